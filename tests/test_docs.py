"""The docs name everything a user can reach: every verb, setting and public view.

A verb added to the CLI, a ``STEPSCOPE_*`` variable read by the code or a ``v_*`` view
created by a migration fails here until the docs say what it is: README.md lists every verb
with its ``--help`` line, docs/collectors.md describes it, docs/settings.md lists every
setting, docs/schema.md every view.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collectors.cli import VERBS
from store.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
COLLECTORS_DOC = (ROOT / "docs" / "collectors.md").read_text()
SETTINGS_DOC = (ROOT / "docs" / "settings.md").read_text()
SCHEMA_DOC = (ROOT / "docs" / "schema.md").read_text()

# Test hooks read by product code to inject faults or stand-ins; not user settings.
TEST_HOOKS = {"STEPSCOPE_COMM_FAULT", "STEPSCOPE_PROFILE_FAULT", "STEPSCOPE_SYSFS_ROOT"}
PRODUCT_DIRS = ("app.py", "collectors", "store", "planner", "pages", "analysis")


def _product_sources() -> list[Path]:
    files: list[Path] = []
    for entry in PRODUCT_DIRS:
        path = ROOT / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def _env_names_read() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in _product_sources():
        for name in re.findall(r"[\"'](STEPSCOPE_[A-Z0-9_]+)[\"']", path.read_text()):
            found.setdefault(name, path)
    return found


def test_every_env_variable_read_is_declared_once() -> None:
    declared = {s.name for s in SETTINGS}
    assert len(declared) == len(SETTINGS), "a setting is declared twice"
    undeclared = {
        name: str(path.relative_to(ROOT))
        for name, path in _env_names_read().items()
        if name not in declared and name not in TEST_HOOKS
    }
    assert not undeclared, f"declare these in store/settings.py: {undeclared}"


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_setting_is_in_the_settings_doc(setting) -> None:
    row = re.search(rf"^\| `{setting.name}` \| (.*?) \| (.*?) \|$", SETTINGS_DOC, re.M)
    assert row, f"docs/settings.md's table lacks {setting.name}"
    default, help_text = (cell.replace("`", "").strip() for cell in row.groups())
    assert (default, help_text) == (setting.default, setting.help), (
        f"docs/settings.md's row for {setting.name} differs from store/settings.py"
    )


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.name)
def test_every_verb_is_in_the_docs(verb) -> None:
    assert re.search(rf"^\| `{re.escape(verb.name)}` \|", COLLECTORS_DOC, re.M), (
        f"docs/collectors.md's table lacks a row for `{verb.name}`"
    )
    row = re.search(rf"^\| `{re.escape(verb.name)}` \| (.*) \|$", README, re.M)
    assert row, f"README's Collectors table lacks a row for `{verb.name}`"
    assert row.group(1) == verb.help, f"README's line for `{verb.name}` is not its --help line"


def test_readme_is_short_and_its_map_matches_the_tree() -> None:
    assert len(README.splitlines()) <= 120
    block = README.split("## Map of the tree", 1)[1].split("```")[1]
    parent = ""
    for line in block.strip().splitlines():
        name = line.split()[0]
        if not line.startswith(" "):
            parent = name if name.endswith("/") else ""
        path = ROOT / (parent + name if line.startswith(" ") else name)
        assert path.exists(), f"README's map names {path.relative_to(ROOT)}, which is not there"
    top = {p.name + "/" for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")
           and p.name != "__pycache__" and (p / "__init__.py").exists()}  # fmt: skip
    assert top <= {line.split()[0] for line in block.splitlines() if line.strip()}, (
        "a top-level package is missing from README's map")


def _views_created() -> set[str]:
    views: set[str] = set()
    for sql in sorted((ROOT / "store" / "migrations").glob("*.sql")):
        views |= set(re.findall(r"CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+(v_\w+)", sql.read_text(), re.I))
    return views


def test_migrations_create_public_views() -> None:
    assert "v_runs" in _views_created()  # the scan itself works


@pytest.mark.parametrize("view", sorted(_views_created()))
def test_every_public_view_is_documented(view: str) -> None:
    assert re.search(rf"\b{view}\b", SCHEMA_DOC), f"docs/schema.md does not describe {view}"
