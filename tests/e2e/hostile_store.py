"""A store whose names are hostile markup (issue 60), filled by the real collectors: a host,
a label, a served model, a kernel and a GPU named ``**bold** $x$ :red[red] [click](...)``,
and a 100 KB host name. Shared by the AppTest check of every page and the browser module."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.comm.nccl_samples import V2_18
from tests.gpu.conftest import PCIE, fake_env
from tests.helpers import FIXTURES, run_cli
from tests.vllm import bench_fixtures

NAME = "**bold** $x$ :red[red] [click](http://pwned.invalid/)"
MARKERS = ("**bold**", "$x$", ":red[red]", "[click](")  # what renders as markup when raw
LONG_HOST = "h" * 100_000
TRACE = FIXTURES / "traces" / "tracelens" / "vllm_mi300x_decode_fullgraph_bs32.json.gz"


def fill(store: Path, tmp: Path) -> None:
    """Every area a page shows a name from, named ``NAME``; one host named ``LONG_HOST``."""
    ok = [
        run_cli(store, "host", "--host", NAME, "--label", NAME),
        run_cli(store, "host", "--host", LONG_HOST, "--label", LONG_HOST),
        run_cli(store, "gpu", "--host", NAME, "--label", NAME, **fake_env(PCIE)),
        run_cli(store, "gpu", "--host", LONG_HOST, **fake_env(PCIE)),  # the newest gpu run
    ]
    log = tmp / "nccl.log"
    log.write_text(V2_18)
    ok.append(run_cli(store, "nccl-tests", str(log), "--host", NAME, "--label", NAME))
    sweep = tmp / "sweep"
    sweep.mkdir()
    for c in (1, 4, 16):
        obj = bench_fixtures.result(c, model=NAME)
        obj["label"] = NAME
        (sweep / f"c{c}.json").write_text(json.dumps(obj))
    ok.append(run_cli(store, "vllm-bench", "--results", str(sweep), "--host", NAME,
                      "--label", NAME))  # fmt: skip
    if TRACE.is_file():
        doc = json.loads(gzip.decompress(TRACE.read_bytes()))
        kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
        kernel["name"] = NAME
        doc["deviceProperties"] = [{**p, "name": NAME} for p in doc.get("deviceProperties", [])]
        trace = tmp / "rank0.json"
        trace.write_text(json.dumps(doc))
        ok.append(run_cli(store, "trace", str(trace), "--host", NAME, "--label", NAME))
    for res in ok:
        assert res.code == 0, res.stderr
