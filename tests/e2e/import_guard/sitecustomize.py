"""Loaded into the dashboard process by test_no_gpu_stack: records any attempt to import
torch or vllm (the dashboard must never import them) to the file in STEPSCOPE_IMPORT_LOG."""

import os
import sys

_FORBIDDEN = ("torch", "vllm")


class _Guard:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _FORBIDDEN:
            with open(os.environ["STEPSCOPE_IMPORT_LOG"], "a") as log:
                log.write(name + "\n")
        return None  # let the normal finders decide; we only record


sys.meta_path.insert(0, _Guard())
