"""What the collectors print is one record per line, whatever the names hold (issue 60): a
host named with a newline and ``ESC[2J`` reaches `check` and `import` escaped, never raw;
``--log-format json`` prints JSON lines only, a library's warnings and fd-2 writes included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.core.log import printable
from tests.analysis import histories as h
from tests.helpers import ROOT, cli_env, run_cli

EVIL = "gpu-\n\x1b[2Jevil\x07\u202e"  # a newline, clear-screen, a bell, a bidi override


def test_printable_escapes_every_control_and_keeps_the_rest() -> None:
    assert printable(EVIL) == "gpu-\\n\\x1b[2Jevil\\x07\\u202e"
    assert printable("tab\tstays, é and 漢字 too") == "tab\tstays, é and 漢字 too"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("evil") / "stepscope.duckdb"
    h.serving_history(path, EVIL, {64: h.Plan(step_night=20, step=0.12, seed=1)},
                      h.Plan(upgrade_night=20))  # fmt: skip
    return path


def _records(out: str) -> list[str]:
    lines = out.splitlines()
    assert not any(c in out for c in "\x1b\x07\u202e"), out
    return lines


def test_check_prints_one_escaped_line_per_regression(store: Path) -> None:
    res = run_cli(store, "check", "--host", EVIL)
    assert res.code == 3, res.stderr
    lines = _records(res.stdout)
    assert len(lines) == 3 and all("gpu-\\n\\x1b[2Jevil" in line for line in lines), lines


def test_import_says_the_host_escaped(tmp_path: Path) -> None:
    source = tmp_path / "a.duckdb"
    made = run_cli(source, "host", "--host", EVIL, "--json")
    assert made.code == 0, made.stderr
    out = tmp_path / "run.zip"
    assert run_cli(source, "export", made.json["run_id"], "--out", str(out)).code == 0
    res = run_cli(tmp_path / "other.duckdb", "import", str(out))
    assert res.code == 0, res.stderr
    lines = _records(res.stderr)
    assert all(line.startswith("stepscope import: ") for line in lines), lines
    assert any("gpu-\\n\\x1b[2Jevil" in line for line in lines)


def test_json_logs_are_json_lines_only_warnings_and_fd2_included(tmp_path: Path) -> None:
    """A verb whose libraries warn (a two-line UserWarning) and write to fd 2 themselves (as
    C++ code does, in colour): every stderr line is one JSON record."""
    script = (
        "import os, sys, warnings\n"
        "import collectors.upkeep.doctor as d\n"
        "real = d.run\n"
        "def run(args, ctx):\n"
        "    warnings.warn('a library warning\\nwith a second line', UserWarning)\n"
        "    os.write(2, b'\\x1b[33m[W1207 10:00:00] c10 warning in colour\\x1b[0m\\n')\n"
        "    print('a stray print to stderr', file=sys.stderr)\n"
        "    return real(args, ctx)\n"
        "d.run = run\n"
        "from collectors.cli import main\n"
        "sys.exit(main(['doctor', '--log-format', 'json'], standalone=True))\n"
    )  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, env=cli_env(tmp_path / "s.duckdb"), timeout=120)  # fmt: skip
    records = [json.loads(line) for line in proc.stderr.splitlines()]  # every line is JSON
    said = " | ".join(r["msg"] for r in records)
    assert "UserWarning: a library warning\nwith a second line" in said, said
    assert "[W1207 10:00:00] c10 warning in colour" in said and "\x1b" not in said
    assert "a stray print to stderr" in said
