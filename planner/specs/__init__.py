"""Specs: what a planner answer is about.

The model (``models``: shapes from an HF config.json; ``native``, ``quant_ignore``,
``precision``: the checkpoint's precision), the host (``hardware``: presets and the known-GPU
table; ``host_file``), and the serving engine (``engines``: scheduler defaults from source;
``launch_flags`` and ``launch_parse``: what a launch command line says).
"""
