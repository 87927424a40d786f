"""Installed package versions, read from their metadata files without importlib.metadata.

Importing importlib.metadata pulls in the email package: 20-30 ms of a fresh process, paid
by the environment snapshot and, through duckdb's own version module, by every process
that imports duckdb. Both sit on a small trace import's critical path (issue 12).
"""

from __future__ import annotations

import os
import re
import sys
import types
from functools import cache
from pathlib import Path


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``: the ``Version`` header of the first
    ``<name>-*.dist-info/METADATA`` (or ``.egg-info`` PKG-INFO) along ``sys.path``, which is
    where ``importlib.metadata.version`` finds it. tests/store/test_packages.py checks it
    against importlib.metadata for every installed distribution."""
    want = _normalized(name)
    for folder in sys.path:
        for entry in _listing(folder or "."):
            stem, _, suffix = entry.rpartition(".")
            if suffix not in ("dist-info", "egg-info") or _normalized(stem.split("-")[0]) != want:
                continue
            if (version := _version_header(Path(folder or ".", entry), suffix)) is not None:
                return version
    return None


def _normalized(name: str) -> str:
    """PEP 503: runs of ``-``, ``_`` and ``.`` are one ``-``; case is ignored."""
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _listing(folder: str) -> tuple[str, ...]:
    try:
        return tuple(os.listdir(folder))
    except OSError:  # a zip on sys.path, or a folder that is gone
        return ()


def _version_header(path: Path, suffix: str) -> str | None:
    """The ``Version:`` header of a metadata file (headers end at the first blank line)."""
    meta = path / "METADATA" if suffix == "dist-info" else path
    if suffix == "egg-info" and path.is_dir():
        meta = path / "PKG-INFO"
    try:
        with meta.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


DUCKDB_VERSION_MODULE = "duckdb._version"


def preseed_duckdb_version() -> None:
    """Register duckdb's version module before duckdb is imported, minus importlib.metadata.

    duckdb 1.5.5's ``duckdb/__init__.py`` imports ``__version__``, ``__duckdb_version__``
    and ``version`` from ``duckdb/_version.py``, which computes the first with
    ``importlib.metadata.version("duckdb")``. This module gives the same three names, the
    package version read from the same METADATA file (importlib.metadata where it is not
    found) and the engine's from ``_duckdb``, each computed only when asked for. Nothing
    is done once duckdb is imported. tests/store/test_packages.py compares the names and
    values with duckdb's own module, so a duckdb upgrade that changes them fails there.
    """
    if "duckdb" in sys.modules or DUCKDB_VERSION_MODULE in sys.modules:
        return
    module = types.ModuleType(DUCKDB_VERSION_MODULE, "duckdb's version, for store/packages.py")
    module.__getattr__ = _duckdb_version_attribute  # PEP 562: looked up on first use
    module.version = _duckdb_version_text
    sys.modules[DUCKDB_VERSION_MODULE] = module


def _duckdb_version_attribute(name: str) -> str:
    if name == "__version__":
        if (found := package_version("duckdb")) is not None:
            return found
        import importlib.metadata

        return importlib.metadata.version("duckdb")
    if name == "__duckdb_version__":
        import _duckdb

        return _duckdb.__version__
    raise AttributeError(f"module {DUCKDB_VERSION_MODULE!r} has no attribute {name!r}")


def _duckdb_version_text() -> str:
    """What ``duckdb.version()`` returns: both versions in one line."""
    package = _duckdb_version_attribute("__version__")
    return f"{package} (with duckdb {_duckdb_version_attribute('__duckdb_version__')})"
