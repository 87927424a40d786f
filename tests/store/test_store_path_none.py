"""A store path of None is refused, never opened: ``str(loc.path)`` of a lake is ``"None"``,
and DuckDB opened that as a new store file named None in the current folder (a 274 KB
``None`` appeared at the repository root from the lake run of a store test's writer)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from store.connect import connection
from store.errors import StoreError
from store.location import StoreLocation, check_usable, resolve
from tests.helpers import ROOT


def test_a_lake_has_no_file() -> None:
    loc = resolve("ducklake:postgres:dbname=x host=db password=s3cret;data_path=/lake/")
    with pytest.raises(StoreError, match="has no file") as err:
        loc.file  # noqa: B018
    assert "s3cret" not in str(err.value)


def test_an_embedded_location_without_a_path_is_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    broken = StoreLocation(url="stepscope.duckdb", kind="duckdb")  # path left None
    with pytest.raises(StoreError, match="has no file"), \
            connection(broken, read_only=False, timeout_s=1):  # fmt: skip
        pass
    with pytest.raises(StoreError, match="has no file"):
        check_usable(broken)
    assert list(tmp_path.iterdir()) == []


def test_a_store_named_none_is_neither_created_nor_opened(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STEPSCOPE_SPOOL", str(tmp_path / "spool"))
    loc = resolve(str(None))
    with pytest.raises(StoreError, match="named None is refused"), \
            connection(loc, read_only=False, timeout_s=1):  # fmt: skip
        pass
    assert not (tmp_path / "None").exists()


def test_the_cli_refuses_store_none_in_one_line(tmp_path: Path) -> None:
    """``--store None`` (a wrapper's str(None)): exit 1, one line, no file, no measuring."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "STEPSCOPE_STORE": "None", "STEPSCOPE_LOCK_DIR": str(tmp_path / "locks")}  # fmt: skip
    res = subprocess.run([sys.executable, "-m", "collectors", "host", "--log-format", "text"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "named None is refused" in lines[0], res.stderr
    assert not (tmp_path / "None").exists()
