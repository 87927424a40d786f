"""Fitting, outside the product: ``python -m fitting`` refits the serving model.

Reads the measured serving runs in ../shared/fixtures/serving (``fixture``: that dataset's
rules, its launch-script history and its MTP runs, ``fixture_mtp``), fits (``fit``), scores
the held-out residuals (``holdout``) and writes planner/cost/fitted.json, which the planner
loads. The product never imports this package.
"""
