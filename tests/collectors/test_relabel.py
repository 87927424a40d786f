"""Runs under the host that recorded them (issue 57): an imported nccl-tests log is filed
under ``--host``, else the host the file names, else ``unknown`` - never the importing
machine, kept as ``imported_on``; ``relabel RUN_ID --host NAME`` names it afterwards.

Real logs (tests/fixtures/nccl) through the real CLI into a real DuckDB store; the DuckLake
side of ``relabel`` is tests/lake/test_lake_cli.py's."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, query, run_cli, run_hosts

LOG = FIXTURES / "nccl" / "h100_8gpu_all_reduce_128M-4G.log"  # names node005 and its GPUs
ME = socket.gethostname()


def _bare(tmp: Path) -> Path:
    """The same real log with its preamble cut: it names no host and no GPU."""
    bare = tmp / "no_preamble_all_reduce_perf.log"
    bare.write_text("\n".join(x for x in LOG.read_text().splitlines() if "Rank" not in x) + "\n")
    return bare


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("relabel")
    store = tmp / "stepscope.duckdb"
    runs = {}
    for name, args in (("named", [str(LOG)]), ("bare", [str(_bare(tmp)), "--world-size", "8"])):
        res = run_cli(store, "nccl-tests", *args, "--json")
        assert res.code == 0, res.stderr
        runs[name] = res.json["run_id"]
    return store, runs


def test_an_import_is_filed_under_the_host_its_file_names_else_unknown(stored) -> None:
    store, runs = stored
    assert run_hosts(store, runs["named"]) == ("node005", ME, ME, "NVIDIA H100 80GB HBM3")
    # names no host: no real machine's name (not this one: it is kept as imported_on)
    assert run_hosts(store, runs["bare"]) == ("unknown", ME, ME, None)
    hosts = {h for (h,) in query(store, "SELECT host FROM v_hosts")}
    assert ME not in hosts


def test_host_flag_names_the_host(tmp_path: Path) -> None:
    store = tmp_path / "stepscope.duckdb"
    res = run_cli(store, "nccl-tests", str(LOG), "--host", "gpu-node-7", "--json")
    assert res.code == 0, res.stderr
    assert run_hosts(store, res.json["run_id"])[:2] == ("gpu-node-7", ME)


def test_relabel_moves_a_run_and_running_it_again_changes_nothing(stored) -> None:
    store, runs = stored
    before = query(store, "SELECT count(*) FROM v_comm_results WHERE run_id = ?", [runs["bare"]])
    res = run_cli(store, "relabel", runs["bare"], "--host", "h100-box", "--json")
    assert res.code == 0, res.stderr
    assert res.json == {"run_id": runs["bare"], "host": "h100-box", "before": "unknown",
                        "changed": True}  # fmt: skip
    assert run_hosts(store, runs["bare"])[:2] == ("h100-box", ME)
    # its rows follow it: the views join the host from the run
    assert query(store, "SELECT count(*) FROM v_comm_results WHERE host = 'h100-box'") == before
    again = run_cli(store, "relabel", runs["bare"], "--host", "h100-box", "--json")
    assert again.code == 0 and again.json["changed"] is False
    assert "already on host h100-box; nothing changed" in again.stderr
    assert run_hosts(store, runs["named"])[0] == "node005"  # nothing else moved


@pytest.mark.parametrize("args, words", [
    (["no-such-run", "--host", "x"], "run 'no-such-run' is not in"),
    (["RUN"], "give the host that recorded the run: --host NAME"),
    (["RUN", "--host", "unknown"], "--host 'unknown' is not a host name"),
])  # fmt: skip
def test_relabel_refuses_bad_input_in_one_line(stored, args, words) -> None:
    store, runs = stored
    args = [runs["named"] if a == "RUN" else a for a in args]
    res = run_cli(store, "relabel", *args)
    assert res.code == 1 and words in res.stderr and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1
    assert run_hosts(store, runs["named"])[0] == "node005"


def test_relabel_on_a_store_that_does_not_exist(tmp_path: Path) -> None:
    res = run_cli(tmp_path / "none.duckdb", "relabel", "r1", "--host", "x")
    assert res.code == 1 and "there is no store at" in res.stderr
    assert not (tmp_path / "none.duckdb").exists()


def test_the_overview_lists_unknown_host_runs_apart_with_no_empty_value_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The Overview (through Streamlit's AppTest): the run that names no host is no host of
    its own but listed apart, with the GPUs its file names and the command that names it;
    and no table holds a NULL, which the data grid would draw as a grey "None"."""
    from store import reader
    from tests.pages.apptest import new_app

    store = tmp_path / "stepscope.duckdb"
    assert run_cli(store, "host").code == 0  # this machine: a host of its own
    for args in ([str(LOG)], [str(_bare(tmp_path)), "--world-size", "8"]):
        assert run_cli(store, "nccl-tests", *args).code == 0
    (bare,) = query(store, "SELECT run_id FROM runs WHERE host = 'unknown'")[0]
    monkeypatch.setenv("STEPSCOPE_STORE", str(store))
    reader.clear_cache()
    at = new_app(60).run()
    assert not at.exception, at.exception[0].value
    assert "Unknown host" in [h.value for h in at.subheader]
    (warning,) = [w.value for w in at.warning if "name no host" in w.value]
    assert "python -m collectors relabel RUN_ID --host NAME" in warning
    assert f"python -m collectors relabel {bare} --host NAME" in [c.value for c in at.code]
    frames = [d.value for d in at.dataframe]
    hosts = next(f for f in frames if "stale_collectors" in f.columns)["host"].tolist()
    assert "unknown" not in hosts and "node005" in hosts
    listed = next(f for f in frames if "imported_on" in f.columns)
    assert listed["run_id"].tolist() == [bare] and listed["imported_on"].tolist() == [ME]
    for frame in frames:
        data = frame.data if hasattr(frame, "data") else frame  # a Styler's frame
        assert not data.isna().any().any(), data


def test_imports_made_before_0015_show_the_machine_they_were_filed_under(tmp_path: Path) -> None:
    """Before migration 0015 an import's environment did not record `imported_on`: the view
    gives its `hostname` (the importing machine it was filed under) so it can be found."""
    import duckdb

    store = tmp_path / "stepscope.duckdb"
    res = run_cli(store, "nccl-tests", str(LOG), "--json")
    assert res.code == 0, res.stderr
    with duckdb.connect(str(store)) as con:  # as an older collector wrote it
        con.execute("UPDATE runs SET env = '{}', hostname = 'old-laptop' WHERE run_id = ?",
                    [res.json["run_id"]])  # fmt: skip
    assert run_hosts(store, res.json["run_id"])[1] == "old-laptop"
    assert run_cli(store, "host").code == 0  # measured here: no imported_on
    assert query(store, "SELECT imported_on FROM v_runs WHERE verb = 'host'") == [(None,)]
