"""Scripts run from the repository root (``python -m scripts.demo``, gpu-check)."""
