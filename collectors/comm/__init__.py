"""Collective benchmarks (``comm``) and nccl-tests imports (``nccl-tests``).

The ``comm`` verb is command.py.
"""
