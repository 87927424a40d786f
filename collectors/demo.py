"""``python -m collectors.demo``: gather real data on this machine for areas that are empty.

The README's run command calls this before starting the dashboard, so a fresh machine shows
its own measurements. Each step runs only when the store has no run of that verb yet.
"""

from __future__ import annotations

import subprocess
import sys

from store.errors import StoreError
from store.location import resolve
from store.queries import freshness

# (verb, extra arguments): a short, real measurement per area; later collectors add theirs.
DEMO_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("host", ()),
    ("gpu", ()),
    ("profile", ("--steps", "3", "--layers", "4")),  # ~10 s on 2 CPU cores (gloo)
)


def verbs_present() -> set[str]:
    try:
        return set(freshness(resolve(None))["verb"])
    except StoreError:
        return set()  # no store yet: everything is empty


def main() -> int:
    present = verbs_present()
    for verb, extra in DEMO_STEPS:
        if verb in present:
            continue
        print(f"stepscope: the store has no {verb} run yet; gathering one now", file=sys.stderr)
        code = subprocess.call([sys.executable, "-m", "collectors", verb, "--log-format", "text",
                                "--label", "demo", *extra])  # fmt: skip
        if code not in (0, 75):
            print(f"stepscope: {verb} failed (exit {code}); the dashboard starts anyway",
                  file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
