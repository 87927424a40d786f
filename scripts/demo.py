"""``python -m scripts.demo``: gather real data on this machine for areas that are empty.

The README's run command calls this before starting the dashboard, so a fresh machine shows
its own measurements. Each step runs only when the store has no run of that verb yet.
"""

from __future__ import annotations

import subprocess
import sys

from store.errors import StoreError
from store.location import resolve
from store.queries.overview import freshness

# (verb, extra arguments): a short, real measurement per area; later collectors add theirs.
DEMO_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("host", ()),
    ("gpu", ()),
    ("profile", ("--steps", "3", "--layers", "4")),  # ~10 s on 2 CPU cores (gloo)
    # 2-rank gloo sweep in serving terms: ~10-40 s on 2 CPU cores (depends on their load)
    ("comm", ("--device", "cpu", "--nproc", "2", "--ops", "all_reduce,all_to_all",
              "--tokens", "1,2,4,8,16,32,64,128", "--hidden", "7168", "--dtype", "bf16",
              "--iters", "20", "--warmup", "3", "--timeout", "120")),  # fmt: skip
)


def verbs_present() -> set[str]:
    try:
        return set(freshness(resolve(None))["verb"])
    except StoreError:
        return set()  # no store yet: everything is empty


def main() -> int:
    # Commit any backlog and upgrade an older store's schema before the dashboard reads it.
    subprocess.call([sys.executable, "-m", "collectors", "flush", "--log-format", "text"])
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
