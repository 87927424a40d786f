"""A fleet's lake at scale: build it, time every page, then ``compact`` and count its files.

One command per configuration: PostgreSQL for the catalog (benchmarks/scale/pg.py, kept
under DIR) and data files in ``DIR/data`` or, with ``--s3``, in a moto S3 server started
here on 127.0.0.1 (tests/lake/s3_server.py; moto keeps objects in its process, so the lake
lives only as long as this command). Steps:

1. build the lake with benchmarks/scale/generate.py (runs from ``--hosts`` hosts);
2. time every page (benchmarks/scale/pages.py: cold new process, cold cache, warm);
3. ``python -m collectors compact --keep-days 0`` (the real CLI), timed, data files and
   catalog snapshots counted before and after; then the pages again.

    python -m benchmarks.scale.fleet --dir benchmarks/out/fleet --runs 10000 \
        --kernel-rows 1000000000 --hosts 50 --out benchmarks/out/fleet.json
    python -m benchmarks.scale.fleet --dir benchmarks/out/fleet-s3 --s3 --runs 1000 \
        --kernel-rows 100000000 --hosts 50 --out benchmarks/out/fleet-s3.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.scale import generate, pages, pg

ROOT = Path(__file__).resolve().parents[2]


def lake_files(url: str) -> dict[str, int]:
    """Data files the catalog names (all tables), its snapshots, and inlined rows left."""
    from store.connect import connection
    from store.location import resolve

    with connection(resolve(url), read_only=True, timeout_s=60) as con:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_catalog = current_database() AND table_schema = current_schema()"
        ).fetchall()]  # fmt: skip
        files = sum(con.execute(f"SELECT count(*) FROM ducklake_list_files('lake', '{t}')"
                                ).fetchone()[0] for t in tables)  # fmt: skip
        snapshots = con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]
        size = con.execute(
            "SELECT sum(data_file_size_bytes) FROM (" + " UNION ALL ".join(
                f"SELECT data_file_size_bytes FROM ducklake_list_files('lake', '{t}')"
                for t in tables) + ")"
        ).fetchone()[0]  # fmt: skip
    return {"data_files": files, "snapshots": snapshots, "tables": len(tables),
            "data_bytes": int(size or 0)}  # fmt: skip


def compact(url: str, env: dict[str, str]) -> dict:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "collectors", "compact", "--store", url, "--keep-days", "0",
         "--json", "--log-format", "text", "--commit-timeout", "600"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"compact failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {"wall_s": round(wall, 1), "steps": json.loads(proc.stdout.splitlines()[-1])["steps"],
            "log": proc.stderr.strip().splitlines()}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, required=True, help="PostgreSQL cluster (and data)")
    ap.add_argument("--s3", action="store_true", help="data files in a local moto S3 server")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--kernel-rows", type=int, default=1_000_000_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--rank-steps", type=int, default=256)
    ap.add_argument("--memory-limit", default="6GB")
    ap.add_argument("--pages", default=",".join(pages.PAGE_FILES))
    ap.add_argument("--cold-runs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-build", action="store_true", help="measure the lake already in DIR")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    server = None
    report: dict = {"args": {k: str(v) for k, v in vars(args).items()}}
    try:
        catalog = pg.start(args.dir)
        url = pg.lake_url(catalog, args.dir)
        if args.s3:
            from tests.lake.s3_server import REGION, MotoServer, free_port

            if not args.skip_build:  # a fresh catalog for the fresh (empty) server
                dropdb = [str(pg.PG_BIN / "dropdb"), "-h", catalog.host, "-p", str(catalog.port)]
                subprocess.run([*dropdb, "-U", catalog.user, "--if-exists", pg.DB], check=False)
                catalog.createdb(pg.DB)
            args.dir.mkdir(parents=True, exist_ok=True)
            server = MotoServer(free_port(), args.dir / "moto.log")
            server.start()
            os.environ.update(AWS_ACCESS_KEY_ID=server.key_id, AWS_SECRET_ACCESS_KEY=server.secret,
                              AWS_ENDPOINT_URL=server.url, AWS_REGION=REGION)  # fmt: skip
            url = catalog.url(pg.DB, f"s3://{server.bucket}/scale/")
        say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        if not args.skip_build:
            built = generate.build_lake(url, args.runs, args.kernel_rows,
                                        rank_steps=args.rank_steps, threads=2,
                                        memory_limit=args.memory_limit, hosts=args.hosts,
                                        progress=say)  # fmt: skip
            report["build"] = asdict(built)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        page_list = args.pages.split(",")
        report["before"] = lake_files(url)
        say(f"before compact: {report['before']}")
        report["pages_before"] = pages.measure(url, page_list, args.cold_runs, args.reps,
                                               args.memory_limit, 1800)  # fmt: skip
        report["compact"] = compact(url, env)
        report["after"] = lake_files(url)
        say(f"compact {report['compact']['wall_s']} s; after: {report['after']}")
        report["pages_after"] = pages.measure(url, page_list, args.cold_runs, args.reps,
                                              args.memory_limit, 1800)  # fmt: skip
    finally:
        if server is not None:
            server.stop()
        pg.stop(args.dir)
    text = json.dumps(report, indent=2, default=str)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
