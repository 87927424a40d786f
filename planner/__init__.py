"""Stepscope planner: which parallel layout serves a model fastest at full precision.

Pure: no Streamlit, no torch, no I/O beyond reading a config, policy or host file (and the
store, for ``--host-from-store``, in planner.hosts and the CLIs). Other code enters through
``planner.api``. Packages: ``specs`` (model, host, engine), ``cost`` (the serving cost model),
``tradeoff`` (the plan and its reports), ``policy`` (full-precision policy, linter, trace
checks). CLIs: ``python -m planner`` (cli.py), ``predict`` (predict.py), ``lint``.
"""
