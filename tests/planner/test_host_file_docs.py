"""docs/planner.md's host section stays in step with the parser: its field table is HOST_FIELDS, its
JSON and TOML examples load (and are the h20-141g-8x preset), every preset is named."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from planner.specs import hardware, host_file
from tests.helpers import ROOT

DOC = (ROOT / "docs" / "planner.md").read_text()
SECTION = DOC.split("## Hosts: presets, host files, stored hosts", 1)[-1].split("\n# ", 1)[0]


def test_the_section_exists() -> None:
    assert "## Hosts: presets, host files, stored hosts" in DOC
    assert "--host-from-store HOST" in SECTION and "python -m collectors gpu" in SECTION


def test_field_table_is_the_parser_field_list() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (yes|no) \| (.+) \|$", SECTION, re.M)
    documented = [(name, req == "yes", doc) for name, req, doc in rows]
    parsed = [(f.name, f.required, f.doc) for f in host_file.HOST_FIELDS]
    assert documented == parsed


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_examples_load_as_the_141g_h20(fmt: str) -> None:
    blocks = re.findall(rf"```{fmt}\n(.*?)```", SECTION, re.S)
    assert len(blocks) == 1, f"one {fmt} example expected"
    hw = host_file.parse(blocks[0].encode(), f"my-h20.{fmt}")
    assert hw.name == "my-h20"
    assert replace(hw, name="", source="") == replace(hardware.preset("h20-141g-8x"), name="",
                                                      source="")  # fmt: skip


def test_every_preset_is_named() -> None:
    missing = [n for n in hardware.HARDWARE_PRESETS if f"`{n}`" not in DOC]
    assert not missing, f"docs/planner.md names no {missing}"
