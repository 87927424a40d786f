"""The host-wide measurement lock between real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.core.lock import LockHeld, measurement_lock
from tests.helpers import ROOT

HOLD = (
    "import sys, time; from collectors.core.lock import measurement_lock\n"
    "with measurement_lock('comm', wait=False):\n"
    "    print('held', flush=True); time.sleep(600)\n"
)


@pytest.fixture
def lock_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("STEPSCOPE_LOCK_DIR", str(tmp_path / "locks"))
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _holder(env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_measurement_is_told_who_holds_it(lock_env) -> None:
    holder = _holder(lock_env)
    try:
        with (
            pytest.raises(LockHeld, match=rf"comm \(pid {holder.pid}"),
            measurement_lock("profile", wait=False),
        ):
            pass
        with pytest.raises(LockHeld), measurement_lock("profile", wait=True, timeout_s=0.5):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_killed_holder_releases_the_lock(lock_env) -> None:
    holder = _holder(lock_env)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with measurement_lock("profile", wait=False):
        pass  # acquired: the kernel dropped the dead process's flock


def test_waiting_measurement_runs_after_the_holder_finishes(lock_env) -> None:
    holder = _holder(lock_env)
    subprocess.Popen(["sh", "-c", f"sleep 0.5; kill {holder.pid}"])
    with measurement_lock("profile", wait=True, timeout_s=30):
        pass
    holder.wait()
