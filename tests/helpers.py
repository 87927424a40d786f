"""Shared test helpers: run the real CLI in a subprocess against a temp store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
# real files copied into the repository (tests/fixtures/README.md): a clone passes alone
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict:
        return json.loads(self.stdout.strip().splitlines()[-1])


def _store_arg(store: Path | str) -> str:
    """``str(store)``, refusing None: a lake's ``loc.path`` turned into text is ``"None"``,
    which opens a new store file named None in the repository root."""
    if store is None or Path(str(store)).name == str(None):
        raise ValueError(f"store path {store!r}: pass a real file path (a lake has no path)")
    return str(store)


def cli_env(store: Path | str, **extra: str) -> dict[str, str]:
    store = _store_arg(store)
    env = dict(os.environ)
    env.update(
        STEPSCOPE_STORE=str(store),
        STEPSCOPE_LOCK_DIR=str(Path(str(store)).parent / "locks"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    env.pop("STEPSCOPE_SPOOL", None)
    env.update(extra)
    return env


def run_cli(store: Path | str, *args: str, timeout: float = 300, **extra_env: str) -> CliResult:
    """``python -m collectors ARGS`` as a user runs it (text logs, real exit code)."""
    command = [sys.executable, "-m", "collectors", *args]
    if args and not args[0].startswith("-") and "--log-format" not in args:
        command += ["--log-format", "text"]
    proc = subprocess.run(
        command,
        cwd=ROOT,
        env=cli_env(store, **extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def query(store: Path | str, sql: str, params: list | None = None) -> list[tuple]:
    import duckdb

    con = duckdb.connect(_store_arg(store), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def run_hosts(store: Path | str, run_id: str, extra: str = "") -> tuple:
    """Where a run is filed and what it says of the machines (issue 57): ``host``,
    ``imported_on``, ``hostname``, ``gpu_model``, then the ``extra`` columns of v_runs."""
    return query(store, "SELECT host, imported_on, hostname, gpu_model" + (f", {extra}" if extra
                 else "") + " FROM v_runs WHERE run_id = ?", [run_id])[0]  # fmt: skip


def _as_child(entry, argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:  # noqa: ANN001
    """``entry(argv)`` in this process with ``env`` as the whole environment: (exit code,
    stdout, stderr) as a child process would give them (a usage error's 2; an uncaught
    exception's traceback on stderr and 1)."""
    import io
    import traceback
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = entry(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except Exception:  # noqa: BLE001 - as the child would: a traceback, exit 1
                traceback.print_exc()
                code = 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def run_in_process(store: Path | str, *args: str, **extra_env: str) -> CliResult:
    """``collectors.cli.main(ARGS)`` in this process, as ``run_cli`` runs it in a child (text
    logs, its exit code, what it wrote): for tests that call a verb many times (fuzzing, one
    store read many times), where a fresh interpreter per call would cost most of the time."""
    from collectors.cli import main

    argv = list(args)
    if argv and not argv[0].startswith("-") and "--log-format" not in argv:
        argv += ["--log-format", "text"]
    return CliResult(*_as_child(main, argv, cli_env(store, **extra_env)))


def planner_cli(*args: str, store: Path | str | None = None,
                **extra_env: str) -> subprocess.CompletedProcess:  # fmt: skip
    """``python -m planner ARGS`` in this process (planner.__main__.run, what the child runs),
    with ``store``'s CLI environment (else this one) and ``extra_env``. In-process because the
    tests call it hundreds of times and a fresh interpreter's imports were most of each call."""
    from planner.__main__ import run

    env = cli_env(store) if store else {**os.environ, "PYTHONPATH": str(ROOT)}
    code, out, err = _as_child(run, list(args), {**env, **extra_env})
    return subprocess.CompletedProcess(["planner", *args], code, out, err)


def one_line(stderr: str) -> str:
    """The only non-empty line of ``stderr`` (fails when there are more or none)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def run_on_fifo(fifo: Path, store: Path | str, *args: str) -> CliResult:
    """``run_in_process(store, *args)`` where ``fifo``, one of ``args``, is made a FIFO:
    fails the test (after unblocking the reader) when the verb waits on it."""
    import threading

    os.mkfifo(fifo)
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(r=run_in_process(store, *args)),
                              daemon=True)  # fmt: skip
    worker.start()
    worker.join(30)
    if worker.is_alive():  # open the other end, or the verb (and the suite) waits forever
        with open(fifo, "wb"):
            pass
        raise AssertionError(f"{args[0]} waited on a FIFO")
    return result["r"]
