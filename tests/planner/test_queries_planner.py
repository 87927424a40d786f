"""store.queries.planner on a real store filled by the real collectors."""

from __future__ import annotations

import json

from planner.cost.comm import curves_from_rows
from planner.specs import hardware
from store.location import resolve
from store.queries import planner as qp
from tests.planner.test_cli import planner


def test_gpu_host_and_devices(planner_store) -> None:
    loc = resolve(str(planner_store.path))
    hosts = qp.gpu_hosts(loc)
    assert planner_store.host in hosts["host"].tolist()
    run_id = qp.latest_gpu_run_id(loc, planner_store.host)
    assert run_id == planner_store.gpu_run
    host_row, devices = qp.gpu_run(loc, run_id)
    hw = hardware.from_gpu_run(host_row.iloc[0].to_dict(), devices.to_dict("records"))
    assert hw.gpu_count == 2 and "RTX PRO 6000" in hw.gpu_model and hw.interconnect == "pcie"
    assert qp.latest_gpu_run_id(loc, "nobody") is None


def test_comm_rows_become_curves(planner_store) -> None:
    loc = resolve(str(planner_store.path))
    runs = qp.comm_runs(loc, planner_store.host)
    assert runs["run_id"].tolist() == [planner_store.comm_run]
    rows = qp.comm_rows(loc, [planner_store.comm_run])
    assert set(rows["op"]) == {"all_reduce", "all_to_all"}
    assert curves_from_rows(rows.to_dict("records")) == []  # gloo/CPU: not by default
    curves = curves_from_rows(rows.to_dict("records"), devices=())
    a2a = next(c for c in curves if c.op == "all_to_all")
    assert a2a.bytes == (7168 * 2.0, 4 * 7168 * 2.0, 16 * 7168 * 2.0)  # per destination
    assert a2a.world_size == 2 and planner_store.comm_run in a2a.source


def test_store_without_trace_tables_gives_empty_frames(planner_store) -> None:
    loc = resolve(str(planner_store.path))
    frame = qp.trace_breakdowns(loc)
    assert frame.empty
    assert qp.run_models(loc).empty or "model" in qp.run_models(loc).columns


def test_cli_on_stored_host_with_chosen_comm_run(planner_store) -> None:
    p = planner("--model", "minimax-m2.5", "--host", planner_store.host, "--comm-run",
                planner_store.comm_run, "--json", store=planner_store.path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["gpu_count"] == 2 and data["host"] == planner_store.host
    src = {a["what"]: a for a in data["assumptions"]}
    assert planner_store.comm_run in src["all_reduce latency"]["value"]
    assert src["all_reduce latency"]["source"] == "measured"
    p = planner("--model", "minimax-m2.5", "--host", planner_store.host, "--comm-run", "nope",
                store=planner_store.path)  # fmt: skip
    assert p.returncode == 1 and "no such comm run" in p.stderr
