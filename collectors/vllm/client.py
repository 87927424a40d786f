"""Moved to ``collectors.serving.client`` (shared by every engine); this name stays for callers."""

import sys

from collectors.serving import client as _shared

sys.modules[__name__] = _shared
