"""Moved to ``collectors.serving.traces`` (shared by every engine); this name stays for callers."""

import sys

from collectors.serving import traces as _shared

sys.modules[__name__] = _shared
