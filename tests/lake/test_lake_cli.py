"""The collectors' real CLI on a lake: commit, spool on an outage, flush, migrate --to."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from store.commit import commit_entry
from store.connect import connection
from store.errors import StoreMissing
from store.location import resolve
from store.spool.bundle import read_manifest, write_spool
from tests.helpers import run_cli
from tests.lake.conftest import Lake, PgServer
from tests.store.bundles import host_bundle


def lake_rows(url: str, sql: str, params: list | None = None) -> list[tuple]:
    with connection(resolve(url), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def test_host_collector_commits_to_the_lake(lake: Lake, tmp_path: Path) -> None:
    res = run_cli(tmp_path / "unused.duckdb", "host", "--store", lake.url, "--json",
                  "--label", "on-lake", **lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    run_id = res.json["run_id"]
    assert res.json["committed"] is True
    assert lake_rows(lake.url, "SELECT label FROM runs WHERE run_id = ?", [run_id]) == [
        ("on-lake",)
    ]
    assert not any(lake.spool.iterdir()) if lake.spool.exists() else True


def test_unreachable_catalog_exits_75_then_flush_commits(migrated_lake: Lake, pg: PgServer,
                                                         tmp_path: Path) -> None:  # fmt: skip
    data = migrated_lake.data
    down = f"ducklake:postgres:dbname=x host=127.0.0.1 port=1 user=postgres;data_path={data}/"
    res = run_cli(tmp_path / "unused.duckdb", "host", "--store", down, "--json",
                  **migrated_lake.env())  # fmt: skip
    assert res.code == 75, res.stderr
    assert "unreachable" in res.stderr and "flush" in res.stderr
    assert "Traceback" not in res.stderr
    spooled = [p.name for p in migrated_lake.spool.iterdir()]
    assert spooled == [res.json["run_id"]]
    # The catalog is back (here: the right URL): flush commits what waited, once.
    res2 = run_cli(tmp_path / "unused.duckdb", "flush", "--store", migrated_lake.url,
                   **migrated_lake.env())  # fmt: skip
    assert res2.code == 0, res2.stderr
    assert lake_rows(migrated_lake.url, "SELECT count(*) FROM runs WHERE run_id = ?",
                     spooled) == [(1,)]  # fmt: skip
    assert not any(migrated_lake.spool.iterdir())


def test_a_password_in_the_store_url_is_never_printed_nor_recorded(
    migrated_lake: Lake, pg: PgServer, tmp_path: Path
) -> None:
    """libpq's ``password=`` in a lake URL: hidden in the 'flush it later' hint (text and
    JSON logs), in a refusal, and in the run's recorded arguments every reader sees."""
    import json

    secret = "hunter2-pw"
    data = f";data_path={migrated_lake.data}/"
    down = f"ducklake:postgres:dbname=x host=127.0.0.1 port=1 user=postgres password={secret}"
    for fmt in ("text", "json"):
        res = run_cli(tmp_path / "unused.duckdb", "host", "--store", down + data, "--json",
                      "--log-format", fmt, **migrated_lake.env())  # fmt: skip
        assert res.code == 75, res.stderr
        assert secret not in res.stderr + res.stdout, res.stderr
        assert "flush --store 'ducklake:postgres:" in res.stderr and "password=***" in res.stderr
    for entry in migrated_lake.spool.iterdir():  # the spooled run's arguments, to be stored
        assert secret not in json.dumps(read_manifest(entry)["run"])
    refused = migrated_lake.url.replace("dbname=", "dbname=no_such_db_", 1).replace(
        " user=", f" password={secret} user=", 1)  # fmt: skip
    res = run_cli(tmp_path / "unused.duckdb", "host", "--store", refused, **migrated_lake.env())
    assert res.code == 1 and "no_such_db_" in res.stderr, res.stderr
    assert secret not in res.stderr
    waiting = len(list(migrated_lake.spool.iterdir()))  # the refused run is kept too
    # PostgreSQL here trusts local users, so the URL with a password commits for real.
    with_password = migrated_lake.url.replace(" user=", f" password={secret} user=", 1)
    res = run_cli(tmp_path / "unused.duckdb", "flush", "--store", with_password,
                  **migrated_lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    assert secret not in res.stderr + res.stdout
    rows = lake_rows(migrated_lake.url, "SELECT args::VARCHAR FROM runs")
    assert len(rows) == waiting == 3 and all(secret not in r[0] and "password=***" in r[0] for r in rows)


def test_migrate_copies_every_table_and_rerun_is_a_noop(lake: Lake, tmp_path: Path) -> None:
    src = tmp_path / "src" / "stepscope.duckdb"
    loc = resolve(src)
    bundles = [host_bundle("a", gpus=3), host_bundle("b", gpus=40), host_bundle("c")]
    for b in bundles:
        commit_entry(loc, write_spool(b, loc.spool_dir))
    assert run_cli(src, "host", "--label", "real-cli").code == 0
    dry = run_cli(src, "migrate", "--to", lake.url, "--json", "--dry-run", **lake.env())
    assert dry.code == 0, dry.stderr
    assert dry.json["new_runs"] == 4 and dry.json["tables"]["host_gpus"]["copied"] == 43
    with pytest.raises(StoreMissing):  # the dry run did not even create the catalog
        lake_rows(lake.url, "SELECT 1")
    res = run_cli(src, "migrate", "--to", lake.url, "--json", **lake.env())
    assert res.code == 0, res.stderr
    summary = res.json
    assert summary["new_runs"] == 4 and summary["ok"]
    assert summary["tables"]["host_gpus"] == {"source": 43, "copied": 43, "target": 43}
    assert "host_gpus: 43 row(s) in source, copied 43" in res.stderr
    # Every column of every row arrived unchanged.
    con = duckdb.connect(str(src), read_only=True)
    want_runs = con.execute("SELECT * EXCLUDE (committed_at) FROM runs ORDER BY run_id").df()
    want_gpus = con.execute("SELECT * FROM host_gpus ORDER BY run_id, gpu_index").df()
    con.close()
    with connection(resolve(lake.url), read_only=True) as lcon:
        got_runs = lcon.execute("SELECT * EXCLUDE (committed_at) FROM runs ORDER BY run_id").df()
        got_gpus = lcon.execute("SELECT * FROM host_gpus ORDER BY run_id, gpu_index").df()
    assert got_runs.equals(want_runs[got_runs.columns])
    assert got_gpus.equals(want_gpus[got_gpus.columns])

    again = run_cli(src, "migrate", "--to", lake.url, "--json", **lake.env())
    assert again.code == 0, again.stderr
    assert again.json["new_runs"] == 0
    assert all(t["copied"] == 0 for t in again.json["tables"].values())
    assert lake_rows(lake.url, "SELECT count(*) FROM runs") == [(4,)]


def test_migrate_refuses_bad_targets_in_one_line(lake: Lake, tmp_path: Path) -> None:
    src = tmp_path / "s.duckdb"
    missing = run_cli(src, "migrate", "--to", lake.url, **lake.env())
    assert missing.code == 1 and "no store there" in missing.stderr
    assert run_cli(src, "host").code == 0
    same = run_cli(src, "migrate", "--to", str(src))
    assert same.code == 1 and "the target is the source" in same.stderr
    for res in (missing, same):
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_compact_merges_files_and_keeps_every_row(migrated_lake: Lake, tmp_path: Path) -> None:
    loc = resolve(migrated_lake.url)
    for i in range(6):
        bundle = host_bundle(f"h{i}", gpus=24 if i % 2 else 3)
        commit_entry(loc, write_spool(bundle, migrated_lake.spool))

    def state() -> tuple:
        with connection(loc, read_only=True) as con:
            rows = con.execute(
                "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM host_gpus), "
                "(SELECT sum(gpu_index) FROM host_gpus)"
            ).fetchone()
            files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'host_gpus')")
            return rows, files.fetchone()[0]

    rows_before, files_before = state()
    res = run_cli(tmp_path / "unused.duckdb", "compact", "--store", migrated_lake.url,
                  "--keep-days", "0", "--json", **migrated_lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    assert [s["step"] for s in res.json["steps"]][0] == "flush inlined rows to Parquet"
    rows_after, files_after = state()
    assert rows_after == rows_before == (6, 3 * 24 + 3 * 3, 3 * 276 + 3 * 3)
    assert files_before >= 3 and files_after < files_before
    embedded = run_cli(tmp_path / "e.duckdb", "host")
    assert embedded.code == 0
    assert run_cli(tmp_path / "e.duckdb", "compact").code == 0


def test_relabel_moves_a_run_on_the_lake(migrated_lake: Lake, tmp_path: Path) -> None:
    """Issue 57: a real nccl-tests log that names no host lands under `unknown` on the lake
    too; `relabel` names its host there, and running it again changes nothing."""
    from tests.helpers import FIXTURES

    log = FIXTURES / "nccl" / "h100_8gpu_all_reduce_128M-4G.log"
    bare = tmp_path / "bare_all_reduce_perf.log"
    bare.write_text("\n".join(x for x in log.read_text().splitlines() if "Rank" not in x) + "\n")
    unused = tmp_path / "unused.duckdb"
    res = run_cli(unused, "nccl-tests", str(bare), "--world-size", "8", "--store",
                  migrated_lake.url, "--json", **migrated_lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    run_id = res.json["run_id"]
    sql = "SELECT host, imported_on FROM v_runs WHERE run_id = ?"
    ((host, imported_on),) = lake_rows(migrated_lake.url, sql, [run_id])
    assert host == "unknown" and imported_on
    moved = run_cli(unused, "relabel", run_id, "--host", "h100-box", "--store", migrated_lake.url,
                    "--json", **migrated_lake.env())  # fmt: skip
    assert moved.code == 0, moved.stderr
    assert moved.json["changed"] is True and moved.json["before"] == "unknown"
    assert lake_rows(migrated_lake.url, sql, [run_id]) == [("h100-box", imported_on)]
    assert lake_rows(migrated_lake.url, "SELECT count(*) FROM v_comm_results "
                     "WHERE host = 'h100-box'") == [(12,)]  # fmt: skip
    again = run_cli(unused, "relabel", run_id, "--host", "h100-box", "--store", migrated_lake.url,
                    "--json", **migrated_lake.env())  # fmt: skip
    assert again.code == 0 and again.json["changed"] is False
    assert not unused.exists()
