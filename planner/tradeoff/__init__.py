"""The tradeoff plan: every layout of one host costed by the serving model and ranked.

``plan.plan`` is the entry. ``layouts`` lists the layouts and their precision,
``instances`` turns one into a serving-model instance, ``recommend`` and ``findings``
read the curves, ``reference`` is the write-up the product was born from, ``types`` holds
the result, ``report_text`` / ``report_json`` render it, ``engine_commands`` says how to run
a layout on each engine.
"""
