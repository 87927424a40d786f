"""``doctor --sglang-url`` against the SGLang test server (shapes: tests/sglang/server.py)."""

from __future__ import annotations

from tests.helpers import run_cli

# A real /get_server_info lists every ServerArgs field (SGLang 0.5.x: ~300 of them, tens of
# KB); the check must read past the first few KB to find "version".
MANY_FIELDS = {f"server_arg_{i:03d}": "x" * 40 for i in range(300)}


def _sglang_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.split()[1:2] == ["sglang"])


def test_sglang_url_checks_version_and_health(sglang_server, store_path) -> None:
    server = sglang_server(extra_info=MANY_FIELDS, version="0.5.4")
    res = run_cli(store_path, "doctor", "--sglang-url", server.url)
    line = _sglang_line(res.stdout)
    assert line.startswith("PASS") and "SGLang 0.5.4, /health ok" in line, res.stdout
    sick = sglang_server(health=503)
    res = run_cli(store_path, "doctor", "--sglang-url", sick.url)
    assert res.code == 1 and _sglang_line(res.stdout).startswith("FAIL")
    assert "503" in _sglang_line(res.stdout)


def test_sglang_url_unreachable_and_bad(store_path) -> None:
    res = run_cli(store_path, "doctor", "--sglang-url", "http://127.0.0.1:1")
    assert res.code == 1 and "unreachable" in _sglang_line(res.stdout)
    bad = run_cli(store_path, "doctor", "--sglang-url", "localhost:30000")
    assert bad.code == 1 and "--sglang-url localhost:30000: give an http://" in bad.stderr
    assert "Traceback" not in bad.stderr
