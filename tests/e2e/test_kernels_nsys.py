"""Issue 43: the Kernel page shows Nsight Systems runs in a real browser: a real nsys 2024.5
export, and the nsys twin of a real Kineto trace set beside that trace set (the diff of
the two is the same work: the page's words, through AppTest on the same store)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Dashboard, open_app, start_dashboard, stop_dashboard
from tests.helpers import FIXTURES, run_cli
from tests.pages import apptest
from tests.trace.nsys_twin import write_twin

pytestmark = pytest.mark.e2e
HTA = FIXTURES / "traces" / "hta"
CLOVERLEAF = FIXTURES / "nsys" / "pipit_cloverleaf_nsys2024.5.sqlite"
SENTENCE = re.compile(r"(\w+): (\d+) calls/step, ([\d.]+) us avg, ([\d.]+)% of step")


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> tuple[Dashboard, dict[str, str]]:
    ranks = sorted(HTA.glob("sampled_rank-*.json.gz"))
    if len(ranks) < 2 or not CLOVERLEAF.exists():
        pytest.skip("fixtures missing: hta sampled ranks or the nsys 2024.5 export")
    tmp = tmp_path_factory.mktemp("kernels-nsys")
    store = tmp / "stepscope.duckdb"
    twin = write_twin(ranks, tmp / "report1.sqlite")
    ids = {}
    for label, paths in (("kineto", ranks), ("nsys-twin", [twin]), ("cloverleaf", [CLOVERLEAF])):
        res = run_cli(store, "trace", *map(str, paths), "--json", "--label", label)
        assert res.code == 0, res.stderr
        ids[label] = res.json["run_id"]
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d, ids
    stop_dashboard(d)


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_a_real_nsys_export_on_the_kernel_page(dash, page) -> None:
    d, ids = dash
    open_app(page, d.link(f"kernels?run={ids['cloverleaf']}"))
    main = _main(page)
    expect(main.get_by_text(re.compile(r"Step: [\d.]+ ms mean wall"))).to_be_visible()
    text = main.inner_text()
    assert f"Run `{ids['cloverleaf']}`" in text or ids["cloverleaf"] in text
    assert "on nid008553" in text and "device NVIDIA A100-SXM4-80GB" in text, text
    assert "All 1,591 GPU events counted once: 1,591 in steps, 0 outside steps" in text, text
    assert "Steps by capture range" in text
    assert "Top:" in text and "par_ranged2d_kernel" in text
    expect(main.get_by_test_id("stPlotlyChart").first).to_be_visible()
    assert "Traceback" not in text and not main.get_by_test_id("stException").count()


def test_an_nsys_run_reads_as_its_kineto_twin(dash) -> None:
    """The page's words (AppTest, on the module's store) for the two runs and their diff."""
    d, ids = dash
    sentences = []
    for run in (ids["kineto"], ids["nsys-twin"]):
        text = apptest.words(d.store, "pages/kernels.py", {"run": run})
        assert re.search(r"all_to_all: \d+ calls/step", text), text
        assert "2 rank(s)" in text
        sentences.append(sorted(SENTENCE.findall(text)))
    assert sentences[0] == sentences[1] and sentences[0]
    text = apptest.words(d.store, "pages/kernels.py", {"run": ids["kineto"],
                                                       "vs": ids["nsys-twin"]})  # fmt: skip
    wall = re.search(r"Step wall: A ([\d,]+) us vs B ([\d,]+) us \(([+-]\d+) us\)", text)
    assert wall and wall[1] == wall[2] and int(wall[3]) == 0, text
    assert re.search(r"Largest change: \w+ [+-]0 us/step", text), text
