"""The environment snapshot's package versions, read without importlib.metadata."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

from collectors import env
from tests.helpers import ROOT


def test_every_installed_distribution_has_importlib_metadata_s_version() -> None:
    names = {d.metadata["Name"] for d in md.distributions()}
    assert {"duckdb", "numpy", "orjson"} <= {n.lower() for n in names}
    for name in names:
        assert env._package_version(name) == md.version(name), name
    # PEP 503 names: any case, and - _ . alike
    assert env._package_version("Typing.Extensions") == md.version("typing_extensions")
    assert env._package_version("no-such-distribution-here") is None


def test_an_egg_info_install_and_a_dist_info_folder(tmp_path: Path, monkeypatch) -> None:
    """Folders on sys.path as pip (dist-info) and old setuptools (egg-info file) leave them."""
    (tmp_path / "tiny_pkg-1.2.3.dist-info").mkdir()
    (tmp_path / "tiny_pkg-1.2.3.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tiny-pkg\nVersion: 1.2.3\n\nVersion: not a header\n")
    (tmp_path / "old_egg-0.9-py3.11.egg-info").write_text("Name: old-egg\nVersion: 0.9\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    env._listing.cache_clear()
    try:
        assert env._package_version("Tiny.Pkg") == "1.2.3"
        assert env._package_version("old_egg") == "0.9"
    finally:
        env._listing.cache_clear()


def test_the_snapshot_never_imports_importlib_metadata() -> None:
    """importlib.metadata imports the email package (~30 ms on a small import's path)."""
    probe = ("import sys\nfrom collectors import env\ns = env.snapshot()\n"
             "print(s['python'], 'importlib.metadata' in sys.modules, 'email' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    assert out == [sys.version.split()[0], "False", "False"]
