"""``torchrun --nproc-per-node N -m collectors.comm [comm flags]``: one rank per process.

Local rank 0 goes through the normal CLI (host-wide measurement lock, commit by global
rank 0); the other local ranks of this host run the same sweep without taking the lock,
which their local rank 0 already holds for them. A local rank 0 that skips because another
measurement holds the lock leaves its peers waiting: they end at ``--timeout``.
"""

from __future__ import annotations

import sys

from collectors.cli import main


def _worker_only(argv: list[str]) -> int:
    from collectors.cli import build_parser
    from collectors.comm import run
    from collectors.context import Context
    from collectors.errors import EXIT_FAILED, InputError, MeasurementError
    from collectors.log import setup as setup_logging

    args = build_parser().parse_args(["comm", *argv])
    log = setup_logging(args.log_format, "comm", args.verbose)
    try:
        return run(args, Context.from_args("comm", args, log))
    except (InputError, MeasurementError) as exc:
        log.error(str(exc))
        return EXIT_FAILED


if __name__ == "__main__":
    from collectors.comm.launch import torchrun_env

    tr = torchrun_env()
    if tr is not None and tr.local_rank != 0:
        sys.exit(_worker_only(sys.argv[1:]))
    sys.exit(main(["comm", *sys.argv[1:]]))
