"""The docs name everything a user can reach: every verb, setting and public view.

A verb added to the CLI, a ``STEPSCOPE_*`` variable read by the code or a ``v_*`` view
created by a migration fails here until the README or docs/schema.md says what it is.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collectors.cli import VERBS
from store.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
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
def test_every_setting_is_in_the_readme(setting) -> None:
    row = re.search(rf"^\| `{setting.name}` \| (.*?) \| (.*?) \|$", README, re.M)
    assert row, f"README's Settings table lacks {setting.name}"
    default, help_text = (cell.replace("`", "").strip() for cell in row.groups())
    assert (default, help_text) == (setting.default, setting.help), (
        f"README's row for {setting.name} differs from store/settings.py"
    )


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.name)
def test_every_verb_is_in_the_readme(verb) -> None:
    assert re.search(rf"^\| `{re.escape(verb.name)}` \|", README, re.M), (
        f"README's Collectors table lacks a row for `{verb.name}`"
    )


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
