"""The planner's door loads each name on first use: every name it lists is there and is the
object its module defines, importing the door loads no planner part, and no planner module
goes through the door (a circle through it would hide from tests/test_layout.py, which reads
import statements, not the door's table)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

from tests.imports import ROOT, imported, product_modules


def test_every_name_is_what_its_module_defines() -> None:
    api = importlib.import_module("planner.api")
    assert len(api.__all__) > 40
    for name, (module, attr) in api._EXPORTS.items():
        value = getattr(api, name)
        home = importlib.import_module(module)
        assert value is getattr(home, attr, None) or (
            isinstance(value, types.ModuleType) and value.__name__ == f"{module}.{attr}"
        ), name
    assert sorted(dir(api)) == sorted(api.__all__)


def test_an_unknown_name_is_an_import_error() -> None:
    code = "from planner.api import no_such_name"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1 and "cannot import name 'no_such_name'" in proc.stderr


def test_a_page_loads_only_the_planner_parts_it_uses() -> None:
    code = (
        "import sys\n"
        "import planner.api\n"
        "before = {m for m in sys.modules if m.startswith('planner.')}\n"
        "from planner.api import check_kernels\n"
        "after = {m for m in sys.modules if m.startswith('planner.')}\n"
        "print(sorted(before)); print(sorted(after))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=True)  # fmt: skip
    before, after = (eval(line) for line in proc.stdout.splitlines())
    assert before == ["planner.api"]
    assert "planner.policy.trace_check" in after
    assert not any(m.startswith(("planner.tradeoff", "planner.cost.calibrate")) for m in after)


def test_no_planner_module_goes_through_the_door() -> None:
    through = sorted(name for name, path in product_modules(("planner",)).items()
                     if name != "planner.api" and any(n.startswith("planner.api")
                                                      for n in imported(path)))  # fmt: skip
    assert not through, f"import these from the planner module itself: {through}"
