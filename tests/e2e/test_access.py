"""Access defaults: the dashboard listens on loopback only, and works behind docs/access.md's
nginx configuration (basic auth, WebSocket upgrade for /_stcore/stream)."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Dashboard, free_port, open_app, start_dashboard, stop_dashboard
from tests.helpers import ROOT, run_cli

pytestmark = pytest.mark.e2e
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


@pytest.fixture(scope="module")
def dash(tmp_path_factory) -> Dashboard:
    tmp = tmp_path_factory.mktemp("access")
    store = tmp / "stepscope.duckdb"
    assert run_cli(store, "host").code == 0
    d = start_dashboard(store, tmp / "streamlit.log")
    yield d
    stop_dashboard(d)


def test_dashboard_listens_on_loopback_only(dash: Dashboard) -> None:
    port = int(dash.url.rsplit(":", 1)[1])
    listening = [
        c.laddr.ip
        for c in psutil.Process(dash.proc.pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]
    assert listening and set(listening) <= {"127.0.0.1"}, listening
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    assert re.search(r"^enableXsrfProtection = true$", config, re.M)


def _nginx_conf(tmp: Path, listen: int, upstream: int) -> Path:
    """docs/access.md's server block, with TLS swapped for a plain test port."""
    doc = (ROOT / "docs" / "access.md").read_text()
    block = re.search(r"```nginx\n(map .*?)```", doc, re.S)[1]
    block = block.split("server { listen 80;")[0]
    block = re.sub(r"listen 443 ssl;", f"listen 127.0.0.1:{listen};", block)
    block = re.sub(r"\s*ssl_certificate(_key)? [^;]+;", "", block)
    block = block.replace("/etc/nginx/stepscope.htpasswd", str(tmp / "htpasswd"))
    block = block.replace("127.0.0.1:8501", f"127.0.0.1:{upstream}")
    htpass = subprocess.run(["openssl", "passwd", "-apr1", "s3cret"], capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    (tmp / "htpasswd").write_text(f"alice:{htpass}\n")
    (tmp / "htpasswd").chmod(0o644)
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;\n"
        "events {}\nhttp {\n"
        f"access_log {tmp}/access.log; client_body_temp_path {tmp}/body;\n"
        f"proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fcgi;\n"
        f"uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;\n{block}\n}}\n"
    )
    return conf


@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx not installed (apt-get install nginx)")
@pytest.mark.skipif(not shutil.which("openssl"), reason="openssl not installed")
def test_dashboard_behind_nginx_basic_auth(dash: Dashboard, browser) -> None:
    # nginx's workers run as an unprivileged user: its files go where that user can read.
    tmp_path = Path(tempfile.mkdtemp(prefix="stepscope-nginx-"))
    tmp_path.chmod(0o755)
    port = free_port()
    conf = _nginx_conf(tmp_path, port, int(dash.url.rsplit(":", 1)[1]))
    check = subprocess.run([NGINX, "-t", "-c", str(conf)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen([NGINX, "-c", str(conf)], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
            except urllib.error.HTTPError as exc:
                assert exc.code == 401  # no credentials: refused
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        token = base64.b64encode(b"alice:s3cret").decode()
        req = urllib.request.Request(f"{url}/_stcore/health",
                                     headers={"Authorization": f"Basic {token}"})  # fmt: skip
        assert urllib.request.urlopen(req, timeout=5).status == 200
        # A real browser through the proxy: the page only renders if the WebSocket works.
        context = browser.new_context(http_credentials={"username": "alice", "password": "s3cret"})
        try:
            pg = context.new_page()
            open_app(pg, f"{url}/overview")
            expect(pg.get_by_text("1 host report")).to_be_visible()
        finally:
            context.close()
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp_path, ignore_errors=True)
