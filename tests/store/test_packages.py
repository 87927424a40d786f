"""Package versions read without importlib.metadata, and duckdb's version module built the
same way (store/packages.py)."""

from __future__ import annotations

import importlib.metadata as md
import json
import subprocess
import sys
from pathlib import Path

from store import packages
from tests.helpers import ROOT


def test_every_installed_distribution_has_importlib_metadata_s_version() -> None:
    names = {d.metadata["Name"] for d in md.distributions()}
    assert {"duckdb", "numpy", "orjson"} <= {n.lower() for n in names}
    for name in names:
        assert packages.package_version(name) == md.version(name), name
    # PEP 503 names: any case, and - _ . alike
    assert packages.package_version("Typing.Extensions") == md.version("typing_extensions")
    assert packages.package_version("no-such-distribution-here") is None


def test_an_egg_info_install_and_a_dist_info_folder(tmp_path: Path, monkeypatch) -> None:
    """Folders on sys.path as pip (dist-info) and old setuptools (egg-info file) leave them."""
    (tmp_path / "tiny_pkg-1.2.3.dist-info").mkdir()
    (tmp_path / "tiny_pkg-1.2.3.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tiny-pkg\nVersion: 1.2.3\n\nVersion: not a header\n")
    (tmp_path / "old_egg-0.9-py3.11.egg-info").write_text("Name: old-egg\nVersion: 0.9\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    packages._listing.cache_clear()
    try:
        assert packages.package_version("Tiny.Pkg") == "1.2.3"
        assert packages.package_version("old_egg") == "0.9"
    finally:
        packages._listing.cache_clear()


_DESCRIBE = """
import json, sys
{first}
import duckdb
v = sys.modules["duckdb._version"]
print(json.dumps({{
    "names": sorted(n for n in ("__version__", "__duckdb_version__", "version") if hasattr(v, n)),
    "public": sorted(n for n in vars(v) if not n.startswith("_") and n not in ("annotations",)),
    "version": duckdb.__version__, "engine": duckdb.__duckdb_version__, "text": duckdb.version(),
    "metadata_imported": "importlib.metadata" in sys.modules,
    "works": duckdb.connect().execute("SELECT 42").fetchone()[0],
}}))
"""


def _describe(first: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _DESCRIBE.format(first=first)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return json.loads(out)


def test_duckdb_imported_after_store_has_its_own_versions_without_importlib_metadata() -> None:
    own = _describe("")  # duckdb as it ships: its _version module uses importlib.metadata
    ours = _describe("import store")
    assert own["metadata_imported"] and not ours["metadata_imported"]
    assert ours["names"] == own["names"] == ["__duckdb_version__", "__version__", "version"]
    # duckdb's own module exports nothing else that duckdb/__init__.py could import from it
    assert set(own["public"]) - {"_dist_version", "_duckdb"} <= {"version"}
    for key in ("version", "engine", "text", "works"):
        assert ours[key] == own[key], key
    assert ours["version"] == md.version("duckdb")


def test_the_version_module_is_left_alone_once_duckdb_is_imported() -> None:
    ours = _describe("import duckdb._version as real\nfrom store import packages\n"
                     "packages.preseed_duckdb_version()\n"
                     "assert sys.modules['duckdb._version'] is real")  # fmt: skip
    assert ours["metadata_imported"]
