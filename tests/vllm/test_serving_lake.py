"""The serving tables and views on a DuckLake catalog (PostgreSQL), as the page reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.serving.load import LoadSpec, run_load
from store.location import resolve
from store.queries import serving as qs
from tests.helpers import run_cli
from tests.lake.conftest import Lake, lake, pg  # noqa: F401 - fixtures
from tests.vllm import bench_fixtures
from tests.vllm.conftest import MODEL

pytestmark = pytest.mark.slow  # a PostgreSQL server and a DuckLake catalog


def test_bench_and_metric_deltas_on_the_lake(lake: Lake, vllm_server, tmp_path: Path) -> None:  # noqa: F811
    bench_fixtures.write_sweep(tmp_path / "tp8", tp=8, levels=(1, 16))
    res = run_cli(lake.url, "vllm-bench", "--results", str(tmp_path / "tp8"), "--json",
                  **lake.env())  # fmt: skip
    assert res.code == 0, res.stderr
    server = vllm_server()
    for _ in range(2):
        assert run_cli(lake.url, "vllm-metrics", "--url", server.url, **lake.env()).code == 0
        run_load(LoadSpec(server.url, MODEL, num_requests=2, concurrency=2, input_len=4,
                          output_len=10))  # fmt: skip
    loc = resolve(lake.url)
    rows = qs.bench_results(loc, [res.json["run_id"]], MODEL)
    assert rows["concurrency"].tolist() == [1, 16] and set(rows["layout"]) == {"TP8"}
    servers = qs.metric_servers(loc)
    host = servers["host"].iloc[0]
    timeline = qs.metrics_timeline(loc, host, server.url, MODEL, "2000-01-01")
    assert len(timeline) == 2 and timeline["generation_tokens_per_s"].iloc[1] > 0
    quant = qs.interval_quantiles(loc, host, server.url, MODEL,
                                  "vllm:e2e_request_latency_seconds", "2000-01-01")  # fmt: skip
    assert quant["observations"].tolist() == [2.0]
    # SGLang results (0007 columns) on the same lake, side by side with the vLLM run.
    from tests.sglang import fixtures as sgl

    sgl.write_jsonl(tmp_path / "sgl.jsonl", levels=(1, 16))
    res2 = run_cli(lake.url, "sglang-bench", "--results", str(tmp_path / "sgl.jsonl"), "--model",
                   MODEL, "--server-args", "--tp 8", "--sglang-version", "0.5.4", "--json",
                   **lake.env())  # fmt: skip
    assert res2.code == 0, res2.stderr
    both = qs.bench_results(loc, [res.json["run_id"], res2.json["run_id"]], MODEL)
    assert sorted(set(both["engine_label"])) == ["SGLang 0.5.4", "vLLM"]
