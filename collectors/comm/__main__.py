"""``torchrun --nproc-per-node N -m collectors.comm [comm flags]``: one rank per process.

Local rank 0 goes through the normal CLI (host-wide measurement lock, commit by global
rank 0); the other local ranks of this host run the same sweep without taking the lock,
which their local rank 0 already holds for them. A local rank 0 that skips because another
measurement holds the lock leaves its peers waiting: they end at ``--timeout``.
"""

from __future__ import annotations

import sys

from collectors.cli import main

if __name__ == "__main__":
    from collectors.comm.launch import torchrun_env

    tr = torchrun_env()
    sys.exit(main(["comm", *sys.argv[1:]], lock=tr is None or tr.local_rank == 0))
