"""Real-browser fixtures: a real ``streamlit run`` on a free port, Debian's Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.helpers import ROOT, cli_env

CHROMIUM = os.environ.get("STEPSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip


# Playwright's expect() waits 5 s by default; on a loaded 2-core CI box a Plotly chart can
# take longer to draw after its heading shows (test_collectives failed so in CI). Waiting
# longer changes no verdict: a chart that never draws still fails.
expect.set_options(timeout=20_000)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Dashboard:
    url: str
    store: Path
    proc: subprocess.Popen

    def link(self, path: str = "") -> str:
        return f"{self.url}/{path.lstrip('/')}"


def start_dashboard(store: Path | str, log_path: Path, env: dict[str, str] | None = None,
                    ) -> Dashboard:  # fmt: skip
    """``streamlit run app.py`` on ``store`` (a file; or a lake URL with ``env`` its whole
    environment), once it answers its health check."""
    port = free_port()
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.headless", "true", "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env or cli_env(store), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return Dashboard(url, store, proc)
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"streamlit did not become healthy:\n{log_path.read_text()}")


def stop_dashboard(dash: Dashboard) -> None:
    dash.proc.terminate()
    try:
        dash.proc.wait(10)
    except subprocess.TimeoutExpired:
        dash.proc.kill()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


VIEWPORT = {"width": 1400, "height": 1000}
# What a test may leave in its origins: cleared before the next test uses the tab. (Not the
# HTTP cache: keeping Streamlit's bundle cached and compiled is why the tab is shared.)
STORAGE = "cookies,local_storage,indexeddb,file_systems,service_workers,cache_storage,websql"


@pytest.fixture(scope="module")
def module_context(browser) -> Iterator:
    """One browser context per test module, its one tab handed to each test in turn (`page`).

    A fresh context per test paid about 3-4 s of Chromium CPU per test (measured: 6.9-9 s a
    page load in a fresh context vs 2.6-3.3 s in a reused tab) to fetch, parse and compile
    Streamlit's JS bundle again. Tests about a fresh context (a copied link opened by a
    teammate) still open their own with ``browser.new_context()``."""
    context = browser.new_context(viewport=VIEWPORT)
    yield context
    context.close()


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else None


def _reset(pg, origins: set[str]) -> None:
    """Leave nothing of a test in the tab: its session storage, then (on about:blank) the
    cookies, local storage and databases of every origin it visited."""
    if _origin(pg.url):
        pg.evaluate("() => sessionStorage.clear()")
    pg.goto("about:blank")
    pg.mouse.move(0, 0)  # no hover left over a chart or widget of the next test's page
    cdp = pg.context.new_cdp_session(pg)
    try:
        for origin in origins:
            cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": STORAGE})
    finally:
        cdp.detach()
    pg.context.clear_cookies()
    pg.context.clear_permissions()


@pytest.fixture
def page(module_context) -> Iterator:
    """The module's tab, on about:blank at the test's start with nothing stored from an earlier
    test (cookies, local and session storage, databases) and the default 1400x1000 viewport.
    A tab left unusable by a failed test is replaced by a new one."""
    pg = next((p for p in module_context.pages if not p.is_closed()), None)
    pg = pg or module_context.new_page()
    pg.set_viewport_size(VIEWPORT)
    origins: set[str] = set()

    def visited(frame) -> None:
        if (origin := _origin(frame.url)) is not None:
            origins.add(origin)

    pg.on("framenavigated", visited)
    yield pg
    pg.remove_listener("framenavigated", visited)
    for other in module_context.pages:
        if other != pg:
            other.close()
    try:
        _reset(pg, origins)
    except Exception:  # noqa: BLE001 - a crashed or hung tab: the next test gets a new one
        pg.close()


def wait_app(pg, timeout_ms: int = 60_000) -> None:
    """Wait until the script run finished, then fail on any exception shown on the page."""
    pg.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    pg.wait_for_function(
        "() => { const a = document.querySelector(\"[data-testid='stApp']\");"
        " return a && a.getAttribute('data-test-script-state') === 'notRunning'; }",
        timeout=timeout_ms,
    )
    # A rerun may start right after the first (bound widgets syncing the URL): settle.
    pg.wait_for_timeout(300)
    pg.wait_for_function(
        "() => document.querySelector(\"[data-testid='stApp']\")"
        ".getAttribute('data-test-script-state') === 'notRunning'",
        timeout=timeout_ms,
    )
    errors = pg.locator("[data-testid='stException']")
    if errors.count():
        raise AssertionError("exception on page:\n" + "\n".join(errors.all_inner_texts()))


def choose(pg, box, option) -> None:
    """Open the selectbox ``box`` and click ``option`` in its list, then wait for the rerun.

    A rerun right after a page loads can close the list or move it out of the viewport
    while it opens, so it is opened again, up to three times."""
    for _ in range(3):
        box.get_by_role("combobox").click()
        try:
            option.click(timeout=5_000)
            break
        except PlaywrightTimeout:
            pg.keyboard.press("Escape")
            wait_app(pg)
    else:
        raise AssertionError(f"{option} never became clickable in {box}")
    wait_app(pg)


def open_app(pg, url: str) -> None:
    pg.goto(url)
    wait_app(pg)


def open_tab(pg, name: str) -> str:
    """Open the tab titled ``name`` (only the open tab's panel is in the page) and return
    the text it shows."""
    pg.get_by_role("tab", name=name, exact=True).click()
    panel = pg.get_by_role("tabpanel")
    expect(panel).to_have_count(1)
    expect(panel.locator("[data-testid='stElementContainer']").first).to_be_visible()
    return panel.inner_text()


def pareto_traces(pg) -> list[str]:
    """Names of the traces the browser drew on the Tradeoff page's Pareto chart."""
    return pg.evaluate("""() => [...document.querySelectorAll('.st-key-pareto .js-plotly-plot')]
        .flatMap(gd => (gd.data || []).map(t => t.name))""")


def answer_on_first_screen(pg, best: str, tok_s_per_gpu: float, concurrency: int) -> None:
    """At 1400x900, unscrolled: the answer sentence, its five metric cards and the drawn
    Pareto chart (with its target line and the answer marked) lie inside the first 900 px."""
    assert pg.viewport_size == {"width": 1400, "height": 900}
    box = pg.locator(".st-key-answer")
    expect(box).to_contain_text(f"Answer: {best} serves the most within the targets: "
                                f"{tok_s_per_gpu:.1f} output tokens/s per GPU at concurrency "
                                f"{concurrency}.")  # fmt: skip
    # the sentence is drawn before the chart below it: on a loaded machine the previous
    # view's Pareto chart can still be there, so read the chart once the run has finished
    wait_app(pg)
    expect(box.locator("[data-testid='stMetric']")).to_have_count(5)
    chart = pg.locator(".st-key-pareto [data-testid='stPlotlyChart']")
    expect(chart.locator(".js-plotly-plot .main-svg").first).to_be_visible()
    title = pg.get_by_role("heading", name="Tradeoff calculator").bounding_box()
    assert title is not None and title["y"] >= 0  # the page's top: its first screen
    for part in (box, chart):
        b = part.bounding_box()
        assert b is not None and b["y"] >= 0 and b["y"] + b["height"] <= 900, (part, b)
    assert f"answer: {best} at concurrency {concurrency}" in pareto_traces(pg)
    shapes = pg.evaluate("() => document.querySelector('.st-key-pareto .js-plotly-plot')"
                         ".layout.shapes.length")  # fmt: skip
    assert shapes >= 1  # the TPOT target line


def open_tab_locator(pg, name: str, selector: str):
    """``selector`` inside the tab titled ``name``, once that tab is open."""
    pg.get_by_role("tab", name=name, exact=True).click()
    return pg.get_by_role("tabpanel").locator(selector)


def on_first_screen(pg, *parts) -> None:
    """At 1400x900, unscrolled, each of ``parts`` (the page's answer: its sentence or metric
    cards, its main chart or table) is drawn inside the first 900 px; a chart counts once
    Plotly drew it. ARCHITECTURE.md's Pages rule, checked the same way on every page."""
    pg.set_viewport_size({"width": 1400, "height": 900})
    wait_app(pg)
    title = pg.get_by_test_id("stMain").locator("h1").first
    expect(title).to_be_visible()
    top = title.bounding_box()
    assert top is not None and top["y"] >= 0  # the page's top: its first screen
    for part in parts:
        expect(part).to_be_visible()
        if part.locator(".js-plotly-plot").count():
            expect(part.locator(".js-plotly-plot .main-svg").first).to_be_visible()
        box = part.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 900, (part, box)
