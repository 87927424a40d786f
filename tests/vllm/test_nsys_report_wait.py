"""Waiting for the report nsys writes when a capture range ends: a SQLite export is taken
only when whole (its header's page count times its page size), a report that never becomes
whole is one line naming it, with the import command for later."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from collectors.core.errors import MeasurementError
from collectors.serving.traces import sqlite_complete, wait_for_report

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "nsys" / "pipit_cloverleaf_nsys2024.5.sqlite"


def test_a_whole_export_is_complete_and_a_cut_or_journaled_one_is_not(tmp_path: Path) -> None:
    data = REAL.read_bytes()
    whole = tmp_path / "report1.sqlite"
    whole.write_bytes(data)
    assert sqlite_complete(whole)
    cut = tmp_path / "report2.sqlite"
    cut.write_bytes(data[: len(data) - 4096])  # a page short of what its header says
    assert not sqlite_complete(cut)
    (tmp_path / "report1.sqlite-journal").write_bytes(b"")  # a writer is at work
    assert not sqlite_complete(whole)
    not_sqlite = tmp_path / "report3.sqlite"
    not_sqlite.write_bytes(b"x" * 4096)
    assert not sqlite_complete(not_sqlite)


def test_a_report_that_stays_cut_is_one_line_naming_it(tmp_path: Path) -> None:
    data = REAL.read_bytes()
    report = tmp_path / "report1.sqlite"
    since = time.time() - 1
    report.write_bytes(data[: len(data) // 2])  # size steady, but half the pages
    os.utime(report, None)
    with pytest.raises(MeasurementError) as err:
        wait_for_report(tmp_path, since, timeout_s=1.0, settle_s=0.2,
                        log=logging.getLogger("test"), start=time.monotonic(), poll_s=0.1)  # fmt: skip
    line = str(err.value)
    assert "\n" not in line and str(report) in line and "is not whole" in line
    assert f"python -m collectors trace {report}" in line
    report.write_bytes(data)  # finished: taken
    found, _ = wait_for_report(tmp_path, since, timeout_s=5.0, settle_s=0.2,
                               log=logging.getLogger("test"), start=time.monotonic(),
                               poll_s=0.1)  # fmt: skip
    assert found == report
