"""Moved to ``collectors.serving.load`` (shared by every engine); this name stays for callers."""

import sys

from collectors.serving import load as _shared

sys.modules[__name__] = _shared
