"""Server-side run time of every dashboard page on a scale store, cold and warm.

Each page is opened with ``streamlit.testing.v1.AppTest`` exactly as a shared link opens it
(``app.py`` + ``switch_page`` + URL parameters holding absolute run ids), and ``at.run()``
is timed. Per page, several fresh worker processes each measure:

- cold: the first run in a new process with an empty result cache (heavy libraries are
  imported beforehand and reported separately, as a running server has them loaded, and so
  is its one scan for installed components);
- cold cache: ``store.reader.clear_cache()`` and the pages' own ``st.cache_data`` cleared
  (what a commit does: both are keyed by the store's data version), then a run, in the now
  warm process;
- warm: repeat runs (the cache hit a second visitor gets).

Each phase also records the process's CPU seconds (every thread's): on a shared, loaded
machine the wall time stretches and the CPU time is the better guide to a quiet one.

Every named query a page calls is recorded (``store.queries`` function, SQL, parameters,
time inside the page's cold run) and re-timed on a plain DuckDB connection, no cache.

    python -m benchmarks.scale.pages --store benchmarks/out/scale.duckdb \
        --out benchmarks/out/scale-pages.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE_FILES = {
    "overview": "pages/overview.py", "kernels": "pages/kernels.py",
    "hardware": "pages/hardware.py", "collectives": "pages/collectives.py",
    "tradeoff": "pages/tradeoff.py", "policy": "pages/policy.py", "serving": "pages/serving.py",
    "experts": "pages/experts.py", "trends": "pages/trends.py",
}  # fmt: skip
MAX_TEXT = 1_500  # characters: a longer text element is a list that should be a table


def links(store: str) -> dict[str, dict]:
    """A realistic shared link (URL parameters, absolute run ids) per page of this store."""
    from store.location import resolve
    from store.queries import comm as queries_comm
    from store.queries import experts as queries_experts
    from store.queries import hw as queries_hw
    from store.queries import serving as queries_serving
    from store.queries import trace as queries_trace

    loc = resolve(store)
    traces = queries_trace.trace_runs(loc)
    gpus = queries_hw.gpu_runs(loc)
    gpus = gpus[gpus["status"] == "ok"]
    comm = queries_comm.comm_runs(loc)
    bench = queries_serving.bench_runs(loc)
    model = queries_serving.bench_models(loc)[0]
    bench = bench[bench["models"] == model]
    servers = queries_serving.metric_servers(loc)
    server = servers.iloc[0]
    run, vs = traces["run_id"].iloc[0], traces["run_id"].iloc[1]
    pcie = gpus[gpus["interconnect_class"] == "pcie-only"]
    gpu_run = (pcie if not pcie.empty else gpus)["run_id"].iloc[0]
    comm_ids = [comm[comm["source"] == s]["run_id"].iloc[0] for s in ("comm", "nccl-tests")]
    return {
        "overview": {"stale_h": "48"},
        "kernels": {"run": run, "vs": vs},
        "hardware": {"run": gpus["run_id"].iloc[0]},
        "collectives": {"runs": comm_ids},
        "tradeoff": {"setup": "custom", "model": "kimi-k2.5", "hw": f"gpu:{gpu_run}",
                     "comm": comm_ids[0], "calib": run},  # fmt: skip
        "policy": {"run": run, "native": "kimi-k2.5"},
        "serving": {"runs": ",".join(bench["run_id"].head(4)), "model": model,
                    "server": f"{server['host']} · {server['url']} · {server['model_name']}"},
        "experts": {"run": queries_experts.runs(loc, None)["run_id"].iloc[0]},
        "trends": {},  # what a first visit shows: regressions only, every host
    }  # fmt: skip


# --- worker: one fresh process per page --------------------------------------------------


def _limit_duckdb(memory_limit: str) -> None:
    """Every DuckDB the dashboard opens gets the benchmark's memory cap (a shared machine)."""
    import duckdb

    real = duckdb.connect

    def connect(database=":memory:", read_only=False, config=None, **kw):
        config = dict(config or {})
        config.setdefault("memory_limit", memory_limit)
        return real(database, read_only=read_only, config=config, **kw)

    duckdb.connect = connect


def _record_queries(calls: list[dict]) -> None:
    """Wrap query_df in every store.queries module: name, SQL, params and time of each call.

    Each module binds ``query_df`` by name (``from store.reader import query_df``), so the
    wrapper replaces that name in every ``store.queries.*`` submodule (and store.reader for
    any caller going through the module)."""
    import importlib
    import pkgutil

    import store.queries
    from store import reader

    real = reader.query_df

    def query_df(loc, sql, params=None):
        frame, name = sys._getframe(1), "?"
        while frame is not None:
            mod = frame.f_globals.get("__name__", "")
            if mod.startswith("store.queries") and not frame.f_code.co_name.startswith("_"):
                name = f"{mod.removeprefix('store.')}.{frame.f_code.co_name}"
                break
            frame = frame.f_back
        start = time.perf_counter()
        out = real(loc, sql, params)
        calls.append({"query": name, "sql": sql, "params": list(params or []),
                      "page_s": time.perf_counter() - start})  # fmt: skip
        return out

    reader.query_df = query_df
    for info in pkgutil.iter_modules(store.queries.__path__):
        mod = importlib.import_module(f"store.queries.{info.name}")
        if getattr(mod, "query_df", None) is real:
            mod.query_df = query_df


def _longest_text(at) -> dict:
    """The longest text element the page shows (markdown, captions, alerts): its length and
    start. A text of more than MAX_TEXT characters is an unbounded list in a sentence."""
    texts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.error, *at.success,
             *at.text]  # fmt: skip
    longest = max((str(t.value) for t in texts), key=len, default="")
    return {"chars": len(longest), "start": longest[:120]}


def _plain_times(store: str, calls: list[dict], reps: int) -> list[dict]:
    """Each distinct query once more on one plain connection (no cache, no open/close)."""
    from store.connect import connection
    from store.location import resolve

    loc, seen, out = resolve(store), set(), []
    with connection(loc, read_only=True, timeout_s=60) as con:
        for call in calls:
            key = (call["sql"], json.dumps(call["params"], default=str))
            if key in seen:
                continue
            seen.add(key)
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                rows = len(con.execute(call["sql"], call["params"]).df())
                times.append(time.perf_counter() - start)
            out.append({"query": call["query"], "rows": rows, "page_s": round(call["page_s"], 4),
                        "plain_s": round(statistics.median(times), 4)})  # fmt: skip
    return out


def _time_html_exports(spent: list[float]) -> None:
    """Add up the time pages spend building self-contained HTML exports of their figures."""
    from plotly.basedatatypes import BaseFigure

    real = BaseFigure.to_html

    def to_html(self, *args, **kw):
        start = time.perf_counter()
        try:
            return real(self, *args, **kw)
        finally:
            spent.append(time.perf_counter() - start)

    BaseFigure.to_html = to_html


def _profiled(run) -> str:
    """``run()`` under cProfile, in the thread the script runs in: the 40 costliest calls."""
    import cProfile
    import io
    import pstats
    import threading

    prof = cProfile.Profile()

    def enable(*_args):  # the script runs in its own thread: profile that thread
        sys.setprofile(None)
        prof.enable()

    threading.setprofile(enable)
    run()
    threading.setprofile(None)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
    return buf.getvalue()


def worker(page: str, params: dict, store: str, reps: int, memory_limit: str,
           queries: bool) -> dict:  # fmt: skip
    """SCALE_PROFILE=1: profile a warm run after the timed ones; =cold: the first run
    (then untimed)."""
    profile_cold = os.environ.get("SCALE_PROFILE") == "cold"
    start = time.perf_counter()
    import pandas  # noqa: F401 - what a running server has loaded before a page runs
    import plotly.graph_objects  # noqa: F401
    import streamlit  # noqa: F401
    from streamlit.components.v2.component_manager import BidiComponentManager
    from streamlit.testing.v1 import AppTest

    from store import reader

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
    # A server scans the installed packages for v2 components once, at start (streamlit 1.67
    # runtime/runtime.py); AppTest does it in its first run unless given a manager (its _run):
    # done here, so the cold page run holds only what a page load costs.
    components = BidiComponentManager()
    components.discover_and_register_components(start_file_watching=False)
    at._bidi_component_manager = components
    imports_s = time.perf_counter() - start
    _limit_duckdb(memory_limit)
    calls: list[dict] = []
    _record_queries(calls)
    html: list[float] = []
    _time_html_exports(html)
    at.switch_page(PAGE_FILES[page])
    for key, value in params.items():
        at.query_params[key] = value
    timed, cpu, html_warm = [], [], []
    for phase in ["cold"] + ["cold_cache", "warm"] * reps:
        if phase == "cold_cache":
            reader.clear_cache()
            streamlit.cache_data.clear()
        html.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        if profile_cold and phase == "cold":
            cold_profile = _profiled(at.run)
        else:
            at.run()
        timed.append((phase, time.perf_counter() - t0))
        cpu.append((phase, time.process_time() - c0))  # every thread's: a loaded box's floor
        if phase == "warm":
            html_warm.append(sum(html))
        if phase == "cold":
            first_calls = list(calls)
            errors = [str(e.value)[:300] for e in at.exception]
            longest = _longest_text(at)
    result = {
        "page": page, "params": params, "imports_s": round(imports_s, 3), "errors": errors,
        "cold_s": round(timed[0][1], 4),
        "cold_cache_s": [round(t, 4) for p, t in timed if p == "cold_cache"],
        "warm_s": [round(t, 4) for p, t in timed if p == "warm"],
        "cold_cpu_s": round(cpu[0][1], 4),
        "warm_cpu_s": [round(t, 4) for p, t in cpu if p == "warm"],
        "html_export_s": [round(t, 4) for t in html_warm],  # inside the warm runs
        "url_after": {k: at.query_params[k] for k in at.query_params},
        "text": [m.value[:300] for m in at.markdown][:6], "longest_text": longest,
        "queries_in_cold_run": len(first_calls),
        "query_s_in_cold_run": round(sum(c["page_s"] for c in first_calls), 4),
    }  # fmt: skip
    if queries:
        result["queries"] = _plain_times(store, first_calls, 3)
    if profile_cold:
        result["profile"] = cold_profile
    if os.environ.get("SCALE_PROFILE") and not profile_cold:  # a warm run (diagnosis only)
        result["profile"] = _profiled(at.run)
    return result


# --- parent ----------------------------------------------------------------------------------


def measure(store: str, pages: list[str], cold_runs: int, reps: int, memory_limit: str,
            timeout: float) -> list[dict]:  # fmt: skip
    urls = links(store)
    results = []
    for page in pages:
        runs = []
        for i in range(cold_runs):
            cmd = [sys.executable, "-m", "benchmarks.scale.pages", "--worker", page,
                   "--params", json.dumps(urls[page]), "--store", store, "--reps", str(reps),
                   "--memory-limit", memory_limit] + ([] if i else ["--queries"])  # fmt: skip
            env = dict(os.environ, STEPSCOPE_STORE=store, PYTHONPATH=str(ROOT))
            try:
                proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=timeout)  # fmt: skip
            except subprocess.TimeoutExpired:
                runs.append({"page": page, "error": f"timed out after {timeout:g} s"})
                break
            if proc.returncode:
                runs.append({"page": page, "error": proc.stderr.strip().splitlines()[-1:]})
                break
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        results.append(summarize(page, urls[page], runs))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "queries"}),
              file=sys.stderr, flush=True)  # fmt: skip
    return results


def summarize(page: str, params: dict, runs: list[dict]) -> dict:
    ok = [r for r in runs if "cold_s" in r]
    if not ok:
        return {"page": page, "params": params, "error": runs[-1].get("error")}
    med = statistics.median
    return {
        "page": page, "params": params, "workers": len(ok),
        "cold_s": round(med(r["cold_s"] for r in ok), 3),
        "cold_cache_s": round(med(t for r in ok for t in r["cold_cache_s"]), 3),
        "warm_s": round(med(t for r in ok for t in r["warm_s"]), 3),
        "cold_cpu_s": round(med(r["cold_cpu_s"] for r in ok), 3),
        "warm_cpu_s": round(med(t for r in ok for t in r["warm_cpu_s"]), 3),
        "imports_s": round(med(r["imports_s"] for r in ok), 3),
        "html_export_s": round(med(t for r in ok for t in r["html_export_s"]), 3),
        "longest_text_chars": max(r["longest_text"]["chars"] for r in ok),
        "queries_in_cold_run": ok[0]["queries_in_cold_run"],
        "query_s_in_cold_run": round(med(r["query_s_in_cold_run"] for r in ok), 3),
        "errors": ok[0]["errors"], "text": ok[0]["text"], "queries": ok[0].get("queries", []),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="file path or ducklake: URL")
    ap.add_argument("--lake", type=Path, metavar="DIR",
                    help="measure the DuckLake store built with generate --lake DIR (starts "
                    "its PostgreSQL for the run)")  # fmt: skip
    ap.add_argument("--pages", default=",".join(PAGE_FILES))
    ap.add_argument("--cold-runs", type=int, default=3, help="fresh processes per page")
    ap.add_argument("--reps", type=int, default=5, help="warm and cold-cache runs per process")
    ap.add_argument("--memory-limit", default="6GB")
    ap.add_argument("--timeout", type=float, default=900, help="per worker process, seconds")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--params", help=argparse.SUPPRESS)
    ap.add_argument("--queries", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        out = worker(args.worker, json.loads(args.params), args.store, args.reps,
                     args.memory_limit, args.queries)  # fmt: skip
        print(json.dumps(out, default=str))
        return 0
    if args.lake:
        from benchmarks.scale import pg

        args.store = pg.lake_url(pg.start(args.lake), args.lake)
    if not args.store:
        ap.error("give --store or --lake")
    try:
        results = measure(args.store, args.pages.split(","), args.cold_runs, args.reps,
                          args.memory_limit, args.timeout)  # fmt: skip
    finally:
        if args.lake:
            pg.stop(args.lake)
    text = json.dumps(results, indent=2, default=str)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
