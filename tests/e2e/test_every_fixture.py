"""One store filled from every real fixture the project holds, through the collectors' CLI; then
every page of app.py, and every stored run each page's run pickers offer.

What goes in: the traces of tests/fixtures/traces (vLLM full graph and piecewise, SGLang,
an H100 ``ProfilerStep`` trace, HTA's two ranks of one job, a ns-resolution trace); vLLM
``--save-result`` JSON and printed logs of every era (tests/vllm/bench_fixtures.py,
printed_fixtures.py); SGLang JSONL of every era (tests/sglang/era_fixtures.py, fixtures.py)
and its printed block; ``/metrics`` of both engines (the recorded expositions in
tests/fixtures/serving/metrics: SGLang's scraped once and twice, vLLM 0.7's once; the vLLM
test server under load); nccl-tests logs of every era (tests/comm/nccl_samples.py); ``host``
and ``gpu`` runs through the NVML stand-in and the real pynvml (no GPU).

A view passes when it shows no exception, no error box and no "from the link" complaint,
and keeps the run its link named. Each run is opened through the URL (every picker is bound
to it) by Streamlit's AppTest, in this process: the page's logic, many views a second. In
Chromium, each page opens and each picker is used once by a real click, which checks that the
URL parameter below is the one the picker writes.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from collectors.serving.load import LoadSpec, run_load
from tests.comm import nccl_samples as nccl
from tests.e2e.conftest import Dashboard, start_dashboard, stop_dashboard, wait_app
from tests.gpu.conftest import MIXED, NVLINK, PCIE, fake_env
from tests.helpers import FIXTURES, query
from tests.helpers import run_in_process as collect
from tests.pages import apptest
from tests.sglang import era_fixtures
from tests.sglang import fixtures as sglang_fixtures
from tests.vllm import bench_fixtures
from tests.vllm import printed_fixtures as pf
from tests.vllm.conftest import ServerProc

pytestmark = pytest.mark.e2e
TRACES = FIXTURES / "traces"
METRICS = FIXTURES / "serving" / "metrics"
HOST = "gpu-node-7"
MODEL = "moonshotai/Kimi-K2.5"
# Widgets that pick stored runs (or what groups them: a served model, a server, a verb):
# each one found on a page must have its entry in PICKERS.
PICKER = re.compile(r"\bruns?\b|^(server|model|collector)$", re.I)
ERROR_TEXT = ("Traceback", "Exception:", "Error:")
LINK_COMPLAINT = re.compile(r"from the link|not in this (store|view)", re.I)
# Error boxes a page rightly shows for a stored shape: the one line saying why it cannot
# plan for it (the planner knows no TFLOPS for a GPU outside its table: MIXED's RTX A6000).
EXPECTED_ERRORS = re.compile(r"^host '[^']+': GPU '[^']+' \(gpu run \S+\) is not in the "
                             r"known-GPU table .* describe the host in a host file")  # fmt: skip


PAGE_FILES = apptest.app_page_files()


def app_pages() -> list[str]:
    """The url paths of app.py's pages (pages added later are found too)."""
    return list(PAGE_FILES)


@dataclass(frozen=True)
class Picker:
    """A run picker: the URL parameter it writes and the stored runs it must offer."""

    param: str
    runs: str | None  # SQL for the run ids; None: a bound widget whose URL value is its label
    prefix: str = ""  # the URL value is prefix + run id (the host choice's ``gpu:``)
    multi: bool = False
    joined: bool = False  # a multiselect's ids in one comma-joined parameter (else repeated)
    other_than: str | None = None  # a parameter that must name another run (a comparison)


TRACE_RUNS = "SELECT run_id FROM runs WHERE verb IN ('trace', 'profile', 'vllm-profile')"
COMM_RUNS = "SELECT DISTINCT run_id FROM v_comm_results"
GPU_RUNS = "SELECT run_id FROM runs WHERE verb = 'gpu'"
# The shared host choice offers each host's newest gpu run that found GPUs.
GPU_HOSTS = ("SELECT arg_max(run_id, finished_at) FROM v_gpu_host WHERE gpu_count > 0 "
             "GROUP BY host")  # fmt: skip
BENCH_RUNS = "SELECT run_id FROM runs WHERE verb IN ('vllm-bench', 'sglang-bench')"
MODEL_RUNS = ("SELECT run_id FROM runs WHERE json_valid(args) "
              "AND json_extract_string(args, '$.model') IS NOT NULL")  # fmt: skip
PICKERS: dict[str, dict[str, Picker]] = {
    "": {"Collector": Picker("verb", None)},
    "kernels": {"Run": Picker("run", TRACE_RUNS),
                "Second run (B); this run is A": Picker("vs", TRACE_RUNS, other_than="run")},
    "hardware": {"gpu run": Picker("run", GPU_RUNS)},
    "collectives": {"Runs": Picker("runs", COMM_RUNS, multi=True)},
    "tradeoff": {"Model": Picker("model", MODEL_RUNS, prefix="run:"),
                 "Host": Picker("hw", GPU_HOSTS, prefix="gpu:"),
                 "Communication curves": Picker("comm", COMM_RUNS),
                 "Calibrate to this host's measurements": Picker("calib", TRACE_RUNS)},
    "policy": {"Run": Picker("run", TRACE_RUNS)},
    "serving": {"Model": Picker("model", None),
                "Benchmark runs": Picker("runs", BENCH_RUNS, multi=True, joined=True),
                "Hardware for the planner's prediction": Picker("hw", GPU_HOSTS, prefix="gpu:"),
                "Server": Picker("server", None)},
}  # fmt: skip
# Views a page's own mode reveals (the Tradeoff page's pickers appear with a custom setup).
BASES: dict[str, list[dict[str, str]]] = {"tradeoff": [{}, {"setup": "custom"}]}


def _ok(res, what: str) -> dict:
    assert res.code == 0, f"{what}: {res.stderr}"
    return res.json if res.stdout.strip() else {}


def fill(store: Path, tmp: Path) -> None:
    """Every fixture into ``store`` through the collectors' CLI, ``collectors.cli.main`` in
    this process (tests.helpers.run_in_process: a child's exit code, output and store). The
    same store as 22 child processes: 7 s instead of 23 s of mostly interpreter start-up."""
    # Traces: each file one run; HTA's two ranks of one job are one run.
    lens = TRACES / "tracelens"
    for name in ("vllm_mi300x_decode_fullgraph_bs32", "vllm_mi300x_prefilldecode_piecewise",
                 "sglang_qwen3_8b_decode", "h100_qwen1.5_0.5b"):  # fmt: skip
        _ok(collect(store, "trace", str(lens / f"{name}.json.gz"), "--label", name), name)
    hta = TRACES / "hta"
    _ok(collect(store, "trace", *map(str, sorted(hta.glob("sampled_rank-*.json.gz")))), "hta")
    _ok(collect(store, "trace", str(hta / "ns_resolution_rank-0.pt.trace.json.gz")), "ns trace")
    # vLLM results: --save-result JSON, and printed blocks of v0.4, v0.6 and v0.10+ in logs.
    bench_fixtures.write_sweep(tmp / "vllm-json", tp=8)
    _ok(collect(store, "vllm-bench", "--results", str(tmp / "vllm-json"), "--host", HOST),
        "vllm json")  # fmt: skip
    logs = tmp / "vllm-logs"
    logs.mkdir()
    (logs / "v04.log").write_text("\n".join([pf.namespace(MODEL, None), pf.v04(pf.case(8))]))
    (logs / "v06.txt").write_text("\n".join([pf.namespace(MODEL, 16), pf.v06(pf.case(16))]))
    (logs / "slurm.out").write_text("\n".join([pf.SERVER_NOISE, pf.namespace(MODEL, 4),
                                               pf.v10(pf.case(4))]))  # fmt: skip
    _ok(collect(store, "vllm-bench", "--results", str(logs), "--server-args", "-tp 8"),
        "vllm logs")  # fmt: skip
    # SGLang results: JSONL of every era (one file each), today's JSONL and a printed block.
    eras = tmp / "sglang-eras"
    eras.mkdir()
    for commit, line in era_fixtures.ERAS.items():
        (eras / f"{commit}.jsonl").write_text(line + "\n")
    _ok(collect(store, "sglang-bench", "--results", str(eras), "--model", MODEL, "--server-args",
                "--tp 8"), "sglang eras")  # fmt: skip
    sglang_fixtures.write_jsonl(tmp / "sglang.jsonl", levels=(1, 4, 16))
    log = tmp / "sglang-bench.log"
    log.write_text("\n".join([pf.namespace(MODEL, 64, tool="sglang"), pf.sgl(pf.case(64))]))
    _ok(collect(store, "sglang-bench", "--results", str(tmp / "sglang.jsonl"), str(log),
                "--model", MODEL, "--server-args", "--tp 8 --ep 8", "--sglang-version",
                "0.5.4", "--host", HOST), "sglang now")  # fmt: skip
    # /metrics: SGLang's docs example twice and, as another host's server, once (the scrape
    # that once took the Serving page down); vLLM 0.7's recorded one once; vLLM under load.
    servers: list[ServerProc] = []
    try:
        for i, (module, cfg) in enumerate([
            ("tests.sglang.server", {"model": "m", "metrics_file": str(METRICS / "sglang_production_metrics.prom")}),
            ("tests.vllm.server", {"model": "m", "metrics_file": str(METRICS / "vllm_aibrix_runtime_metrics.prom")}),
            ("tests.vllm.server", {"version": "0.16.0", "model": MODEL, "token_delay_s": 0.002}),
        ]):  # fmt: skip
            servers.append(ServerProc.launch(module, {**cfg, "trace_dir": str(tmp)},
                                             tmp / f"server-{i}.json", tmp))  # fmt: skip
        sgl, vllm_recorded, vllm_live = (server.url for server in servers)
        for _ in range(2):
            _ok(collect(store, "sglang-metrics", "--url", sgl), "sglang metrics")
        _ok(collect(store, "sglang-metrics", "--url", sgl, "--host", "sglang-once"), "one scrape")
        _ok(collect(store, "vllm-metrics", "--url", vllm_recorded), "vllm recorded metrics")
        for _ in range(2):
            _ok(collect(store, "vllm-metrics", "--url", vllm_live, "--host", HOST), "vllm metrics")
            run_load(LoadSpec(vllm_live, MODEL, num_requests=4, concurrency=2, input_len=8,
                              output_len=16))  # fmt: skip
    finally:
        for server in servers:
            server.stop()
    # nccl-tests logs of every era and launcher, and its -J JSON.
    samples = {"all_reduce_perf.old.log": nccl.OLD_ERA, "alltoall_perf.old.txt": nccl.OLD_ALLTOALL,
               "all_reduce_perf.ms.log": nccl.MS_ERA, "alltoall_perf.mid.log": nccl.MID_ERA,
               "v2_17.log": nccl.V2_17_3, "mpirun.log": nccl.MPIRUN, "srun.log": nccl.SRUN,
               "info.log": nccl.NCCL_INFO, "per_iter.log": nccl.PER_ITER,
               "report.json": nccl.json_report()}  # fmt: skip
    for name, text in samples.items():
        (tmp / name).write_text(text)
    _ok(collect(store, "nccl-tests", *(str(tmp / n) for n in samples)), "nccl-tests")
    # This machine; three GPU hosts through the NVML stand-in, one through the real pynvml.
    _ok(collect(store, "host"), "host")
    for host, spec in ((HOST, PCIE), ("nvl-node", NVLINK), ("mixed-node", MIXED)):
        _ok(collect(store, "gpu", "--host", host, **fake_env(spec)), f"gpu {spec.name}")
    _ok(collect(store, "gpu", "--host", "cpu-box", STEPSCOPE_NVML_MODULE="pynvml"), "gpu none")


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("every-fixture")
    store = tmp / "stepscope.duckdb"
    fill(store, tmp)
    return store


@pytest.fixture(scope="module")
def filled(filled_store) -> Dashboard:
    d = start_dashboard(filled_store, filled_store.parent / "streamlit.log")
    yield d
    stop_dashboard(d)


def test_store_holds_every_kind_of_run(filled_store) -> None:
    verbs = dict(query(filled_store, "SELECT verb, count(*) FROM runs GROUP BY verb"))
    assert verbs == {"trace": 6, "vllm-bench": 2, "sglang-bench": 2, "sglang-metrics": 3,
                     "vllm-metrics": 3, "nccl-tests": 10, "host": 1, "gpu": 4}  # fmt: skip
    scrapes = query(filled_store, "SELECT engine, host, count(DISTINCT run_id) FROM "
                    "v_serving_scrapes GROUP BY ALL ORDER BY ALL")  # fmt: skip
    assert [s for s in scrapes if s[0] == "sglang" and s[1] == "sglang-once"] == [
        ("sglang", "sglang-once", 1)], scrapes  # fmt: skip
    assert {e for e, *_ in scrapes} == {"sglang", "vllm"}


# Counts the app's finished script runs (its state going from running to notRunning): right
# after a navigation or a click the app still reads "notRunning" from before, so waiting for
# that state alone can return before the new run has even started.
RUN_COUNTER = """
window.__stRuns = 0;
new MutationObserver((records) => {
  for (const r of records) {
    if (r.oldValue === 'running' && r.target.getAttribute(r.attributeName) === 'notRunning') {
      window.__stRuns += 1;
    }
  }
}).observe(document, {attributes: true, attributeOldValue: true, subtree: true,
                      attributeFilter: ['data-test-script-state']});
"""


@pytest.fixture(scope="module")
def counted(module_context) -> None:
    """Every page this module's tab loads counts its script runs (RUN_COUNTER)."""
    module_context.add_init_script(RUN_COUNTER)


def _runs(pg) -> int:
    return pg.evaluate("window.__stRuns || 0")


def _settle(pg, before: int) -> None:
    """Wait for a script run to finish after ``before`` had, then for the app to be idle;
    exceptions are left to _problems."""
    pg.wait_for_function(f"(window.__stRuns || 0) > {before}", timeout=60_000)
    with contextlib.suppress(AssertionError):  # an exception: reported by _problems
        wait_app(pg)


def _load(pg, link: str) -> None:
    pg.goto(link)
    pg.wait_for_function("window.__stRuns !== undefined")
    _settle(pg, 0)


def _problems(pg) -> list[str]:
    """Exceptions, error boxes, a link the page refused, and traceback text on the page."""
    found = pg.locator("[data-testid='stException']").all_inner_texts()
    found += [e for e in pg.locator("[data-testid='stAlertContentError']").all_inner_texts()
              if not EXPECTED_ERRORS.search(e)]  # fmt: skip
    found += [w for w in pg.locator("[data-testid='stAlertContentWarning']").all_inner_texts()
              if LINK_COMPLAINT.search(w)]  # fmt: skip
    found += pg.locator("[role='dialog']").all_inner_texts()  # e.g. Streamlit's "Page not found"
    text = pg.locator("[data-testid='stMain']").inner_text()
    return found + [w for w in ERROR_TEXT if w in text]


def _labels(pg, testid: str) -> list[str]:
    """Labels of the page's widgets of one kind (main area; the sidebar's host filter aside),
    those under a closed expander too (it is opened: no script run)."""
    for summary in pg.locator("[data-testid='stMain'] details:not([open]) > summary").all():
        summary.click()
    return [w.locator("label").first.inner_text().strip()
            for w in pg.locator(f"[data-testid='stMain'] [data-testid='{testid}']").all()
            if w.locator("label").count()]  # fmt: skip


def _widget(pg, testid: str, label: str):
    exact = pg.locator("label").filter(has_text=re.compile(f"^{re.escape(label)}$"))
    return pg.locator(f"[data-testid='stMain'] [data-testid='{testid}']").filter(has=exact).first


def _open_list(pg, widget):
    """Open the widget's list and return its options. A click that first scrolls the widget
    into view opens the list and closes it again (the popover closes when the page scrolls
    under it), so the widget is scrolled into view first, and the open is checked."""
    box = widget.get_by_role("combobox")
    closed = widget.locator("xpath=ancestor::details[not(@open)]/summary")
    if closed.count():  # a picker under a closed expander ("More inputs"): open it first
        closed.first.click()
        expect(box).to_be_visible()
    for _ in range(3):
        box.scroll_into_view_if_needed()
        pg.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        box.click()
        try:
            expect(box).to_have_attribute("aria-expanded", "true", timeout=5_000)
            options = pg.get_by_role("listbox").get_by_role("option")
            options.first.wait_for(timeout=5_000)  # a full multiselect shows "No results"
            return options
        except (AssertionError, PlaywrightTimeout):
            pg.keyboard.press("Escape")
    raise AssertionError(f"the list of {widget} never stayed open")


def _params(pg) -> dict[str, list[str]]:
    return parse_qs(urlsplit(pg.url).query)


def _link(dash: Dashboard, path: str, params: dict[str, str | list[str]]) -> str:
    return dash.link(f"{path}?{urlencode(params, doseq=True)}" if params else path)


def _query(pick: Picker, chosen: str | list[str]) -> dict[str, str | list[str]]:
    return {pick.param: ",".join(chosen) if pick.joined else chosen}


def _real_click(pg, testid: str, label: str, pick: Picker, values: list[str]) -> bool:
    """Choose another option by a click, as a user does; the value the URL then holds for
    ``pick.param`` must be one of ``values`` (so PICKERS names what the picker writes).
    False when the list holds no other option (a single served model)."""
    before_params, before = _params(pg).get(pick.param, []), _runs(pg)
    options = _open_list(pg, _widget(pg, testid, label))
    names = options.all_inner_texts()
    free = [i for i, n in enumerate(names) if n not in ("Select all", "No results")
            and options.nth(i).get_attribute("aria-selected") != "true"]  # fmt: skip
    if not free:
        assert len(values) == 1, f"{label!r}: no other option to click in {names}"
        pg.keyboard.press("Escape")
        return False
    # one that names a stored run (a host choice lists presets too)
    runs = [v.removeprefix(pick.prefix) for v in values]
    target = next((i for i in free if any(r in names[i] for r in runs)), free[0])
    options.nth(target).click(timeout=5_000)
    _settle(pg, before)
    pg.keyboard.press("Escape")  # a multiselect's list stays open
    after = _params(pg).get(pick.param, [])
    if pick.joined:
        after = [v for a in after for v in a.split(",")]
    added = [v for v in after if v not in before_params] or after
    assert added and set(added) <= set(values), (label, pick.param, added, values)
    return True


def _bound_values(pg, label: str) -> tuple[list[str], str]:
    """A bound selectbox's options (its URL values) and the one shown now."""
    widget = _widget(pg, "stSelectbox", label)
    shown = widget.get_by_role("combobox").input_value()
    options = _open_list(pg, widget)
    names = options.all_inner_texts()
    pg.keyboard.press("Escape")
    return names, shown


def _view(pg, dash, path: str, params: dict, where: str, problems: list[str]) -> None:
    _load(pg, _link(dash, path, params))
    problems += [f"{where}: {p}" for p in _problems(pg)]


def _values(store: Path, pick: Picker, bound_options: list[str]) -> list[str]:
    """The URL values a picker must accept: each stored run it offers, or a bound widget's
    options (its URL value is its label)."""
    if pick.runs is None:
        return bound_options
    return [pick.prefix + r for (r,) in query(store, pick.runs)]


def _views(pick: Picker, values: list[str]) -> list[str | list[str]]:
    """Each value alone, and a multiselect's all at once."""
    views: list[str | list[str]] = [[v] if pick.multi else v for v in values]
    if pick.multi and len(values) > 1:
        views.append(values)
    return views


def click_walk(pg, dash: Dashboard, path: str, problems: list[str]) -> list[str]:
    """In Chromium: the page's default view (and each base view of its mode), every run
    picker on it listed in PICKERS, and per picker one real click, each from the view the
    previous click left (a multiselect's from a link naming one run, to add another; the base
    view again where that view hides the picker): the URL then names what PICKERS says the
    picker writes, and the view after each click shows no problem. Returns the pickers used by
    a click. Every stored run through the URL is test_every_stored_run_opens_in_its_picker's
    (AppTest). (Clicks follow each other instead of each reloading the base view: a Tradeoff
    view costs Chromium 6-8 CPU s to draw.)"""
    table, clicked, name = PICKERS.get(path, {}), [], path or "(default page)"
    for base in BASES.get(path, [{}]):
        where = f"{name}{'?' + urlencode(base) if base else ''}"
        _view(pg, dash, path, base, where, problems)
        at: dict | None = base  # the link the browser shows; None: a click moved the view
        found = {(t, lab) for t in ("stSelectbox", "stMultiSelect") for lab in _labels(pg, t)}
        unlisted = [lab for _, lab in found if PICKER.search(lab) and lab not in table]
        problems += [f"{where}: run picker {lab!r} has no entry in PICKERS" for lab in unlisted]
        for testid, label in sorted(found):
            pick = table.get(label)
            if pick is None or label in clicked:
                continue
            if at is None and not _widget(pg, testid, label).count():
                _view(pg, dash, path, at := base, where, problems)  # the click hid this picker
            if pick.runs is None:
                values, _ = _bound_values(pg, label)
            else:
                values = _values(dash.store, pick, [])
            assert values, f"{where}: {label!r}: the store holds no run for it"
            if pick.multi and at != (start := {**base, **_query(pick, _views(pick, values)[0])}):
                _view(pg, dash, path, at := start, where, problems)
            if _real_click(pg, testid, label, pick, values):
                clicked.append(label)
                at = None
            problems += [f"{where} [{label}: clicked]: {p}" for p in _problems(pg)]
    return clicked


@pytest.mark.parametrize("path", app_pages(), ids=lambda p: p or "default")
def test_every_picker_on_every_page_works_by_a_click(filled, counted, page, path,
                                                     record_property) -> None:  # fmt: skip
    problems: list[str] = []
    clicked = click_walk(page, filled, path, problems)
    record_property("clicked", clicked)
    assert not problems, "\n".join(problems)
    assert clicked or path not in PICKERS, "no picker of this page was used by a click"


def _url_values(at, param: str) -> list[str]:  # noqa: ANN001 - an AppTest
    got = at.query_params.get(param, [])
    return [got] if isinstance(got, str) else list(got)


def _kept(at, pick: Picker, value: str | list[str], default: str | None) -> bool:  # noqa: ANN001
    """The page kept the run its link named (a bound widget drops its default's parameter)."""
    got = _url_values(at, pick.param)
    if pick.joined:
        got = [v for g in got for v in g.split(",")]
    if pick.multi:
        return sorted(got) == sorted(value)
    return got == [value] or (not got and value == default)


def url_walk(store: Path, path: str, problems: list[str]) -> dict[str, int]:
    """Through AppTest: per base view, every run picker on the page listed in PICKERS (those
    under expanders and tabs too), then each stored run each picker offers (and a
    multiselect's all at once) opened by its link in a new session: no problem, and the page
    keeps the run the link named. Returns how many values each picker was opened with."""
    script, table, counts = PAGE_FILES[path], PICKERS.get(path, {}), {}
    name = path or "(default page)"
    for base in BASES.get(path, [{}]):
        where = f"{name}{'?' + urlencode(base) if base else ''}"
        at = apptest.open_page(script, base)
        problems += [f"{where}: {p}" for p in apptest.problems(at, EXPECTED_ERRORS)]
        widgets = {w.label: w for w in [*at.main.selectbox, *at.main.multiselect]}
        problems += [f"{where}: run picker {lab!r} has no entry in PICKERS"
                     for lab in widgets if PICKER.search(lab) and lab not in table]  # fmt: skip
        for label, widget in sorted(widgets.items()):
            pick = table.get(label)
            if pick is None or label in counts:
                continue
            values = _values(store, pick, list(widget.options))
            default = widget.value if pick.runs is None else None
            assert values, f"{where}: {label!r}: the store holds no run for it"
            for chosen in _views(pick, values):
                params = {**base, **_query(pick, chosen)}
                if pick.other_than:
                    params[pick.other_than] = next(v for v in values if v != chosen)
                shown = f"all {len(chosen)}" if pick.multi and len(chosen) > 1 else chosen
                here = f"{where} [{label} = {shown}]"
                view = apptest.open_page(script, params)
                problems += [f"{here}: {p}" for p in apptest.problems(view, EXPECTED_ERRORS)]
                if not _kept(view, pick, chosen, default):
                    problems.append(f"{here}: the page did not keep it: {view.query_params}")
            counts[label] = len(values)
    missing = [label for label in table if label not in counts]
    problems += [f"{name}: picker {label!r} of PICKERS not on the page" for label in missing]
    return counts


@pytest.mark.parametrize("path", app_pages(), ids=lambda p: p or "default")
def test_every_stored_run_opens_in_its_picker(filled_store, path, record_property) -> None:
    problems: list[str] = []
    with apptest.store_env(filled_store):
        counts = url_walk(filled_store, path, problems)
    record_property("runs_opened", counts)
    assert not problems, "\n".join(problems)


def test_app_lists_the_pages_walked() -> None:
    pages = app_pages()
    assert {"", "kernels", "serving"} <= set(pages) and len(pages) >= 7, pages
    assert set(PICKERS) <= set(pages), set(PICKERS) - set(pages)
