"""``doctor``: one PASS/WARN/FAIL line per check, exit 1 only on a FAIL."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from collectors.cli import main
from store.commit import commit_entry
from store.connect import connection
from store.location import resolve
from store.spool.bundle import write_spool
from store.spool.status import spool_status
from tests.helpers import ROOT
from tests.store.bundles import host_bundle

FAKE_SPECS = sorted((ROOT / "tests" / "fakes").glob("nvml_*.json"))


def doctor(capsys: pytest.CaptureFixture, store: Path, *extra: str) -> tuple[int, dict[str, str]]:
    code = main(["doctor", "--store", str(store), "--log-format", "text", *extra])
    lines = capsys.readouterr().out.strip().splitlines()
    result = {}
    for line in lines:
        status, name, detail = line.split(maxsplit=2)
        result[name] = f"{status} {detail}"
    return code, result


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STEPSCOPE_SPOOL", raising=False)
    monkeypatch.setenv("STEPSCOPE_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("STEPSCOPE_NVML_MODULE", "tests.fakes.no_such_nvml_module")


def test_fresh_host_passes_with_warnings(capsys, store_path: Path) -> None:
    code, checks = doctor(capsys, store_path)
    assert code == 0
    assert checks["store"].startswith("WARN") and "no store yet" in checks["store"]
    assert checks["spool"].startswith("PASS") and checks["lock-dir"].startswith("PASS")
    assert checks["nvml"].startswith("WARN")
    code2, checks2 = doctor(capsys, store_path, "--expect-gpus")
    assert code2 == 1 and checks2["nvml"].startswith("FAIL")


@pytest.mark.skipif(not FAKE_SPECS, reason="tests/fakes/nvml_*.json not present")
def test_nvml_pass_names_the_gpus(capsys, store_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STEPSCOPE_NVML_MODULE", "tests.fakes.fake_pynvml")
    monkeypatch.setenv("STEPSCOPE_FAKE_NVML_SPEC", str(FAKE_SPECS[0]))
    code, checks = doctor(capsys, store_path, "--expect-gpus")
    assert checks["nvml"].startswith("PASS") and "GPU(s)" in checks["nvml"], checks["nvml"]


def test_store_schema_and_old_spool_backlog(capsys, store_path: Path) -> None:
    loc = resolve(store_path)
    commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))
    code, checks = doctor(capsys, store_path)
    assert code == 0 and checks["store"].startswith("PASS") and "schema v" in checks["store"]
    # Two runs the store never took, the older one two hours old: a growing spool.
    old = write_spool(host_bundle(), loc.spool_dir)
    write_spool(host_bundle(), loc.spool_dir)
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    status = spool_status(loc.spool_dir)
    assert status.pending == 2 and status.oldest_age_s >= 7200
    code, checks = doctor(capsys, store_path)
    assert code == 1
    assert checks["spool"].startswith("FAIL 2 run(s) waiting") and "2 h old" in checks["spool"]
    assert "python -m collectors flush" in checks["spool"]
    code, checks = doctor(capsys, store_path, "--spool-max-age", "86400")
    assert code == 0 and checks["spool"].startswith("WARN")


def test_newer_store_and_unwritable_lock_dir_fail(
    capsys, store_path, monkeypatch, tmp_path
) -> None:
    loc = resolve(store_path)
    commit_entry(loc, write_spool(host_bundle(), loc.spool_dir))
    with connection(loc, read_only=False) as con:
        con.execute("INSERT INTO stepscope_schema VALUES (9999, 'future', now())")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("STEPSCOPE_LOCK_DIR", str(blocker / "locks"))
    code, checks = doctor(capsys, store_path)
    assert code == 1
    assert checks["store"].startswith("FAIL") and "newer than this Stepscope" in checks["store"]
    assert checks["lock-dir"].startswith("FAIL") and "STEPSCOPE_LOCK_DIR" in checks["lock-dir"]


class _Vllm(BaseHTTPRequestHandler):
    health = 200

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/version":
            body, status = json.dumps({"version": "0.33.0"}).encode(), 200
        elif self.path == "/health":
            body, status = b"", type(self).health
        else:
            body, status = b"not found", 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def vllm() -> Iterator[tuple[str, type[_Vllm]]]:
    handler = type("Handler", (_Vllm,), {"health": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_vllm_url_checks_version_and_health(capsys, store_path: Path, vllm) -> None:
    url, handler = vllm
    code, checks = doctor(capsys, store_path, "--vllm-url", url)
    assert code == 0 and checks["vllm"] == f"PASS {url}: vLLM 0.33.0, /health ok"
    handler.health = 503
    code, checks = doctor(capsys, store_path, "--vllm-url", url)
    assert code == 1 and checks["vllm"].startswith("FAIL") and "503" in checks["vllm"]
    code, checks = doctor(capsys, store_path, "--vllm-url", "http://127.0.0.1:1")
    assert code == 1 and "unreachable" in checks["vllm"]
