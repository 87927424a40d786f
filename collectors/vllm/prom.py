"""Moved to ``collectors.serving.prom`` (shared by every engine); this name stays for callers."""

import sys

from collectors.serving import prom as _shared

sys.modules[__name__] = _shared
