"""A served model's config.json, recorded with the run: the fields the planner reads only.

``vllm-profile`` / ``vllm-bench`` / ``sglang-*`` know the served model's name
(``moonshotai/Kimi-K2.5``). Its config is looked for:

1. in the folder the user names with ``--model-dir`` (the checkpoint, or a folder holding its
   config.json);
2. in the Hugging Face hub cache, ``$HF_HUB_CACHE`` or ``$HF_HOME/hub`` (default
   ``~/.cache/huggingface/hub``), as ``models--ORG--NAME/snapshots/<rev>/config.json``, for a
   name shaped as a hub repo id (``org/name``): the revision ``refs/main`` names first, else
   the newest snapshot.

A model name from a results file or a server is a name, never a path: a ``model_id`` of
``/home/me/.docker`` opens nothing. ModelOpt checkpoints keep their quantization in
``hf_quant_config.json`` beside the config; it is read too. What is recorded is the keys the
planner reads (planner/specs/config_fields.py), never the raw file. Layout of the cache:
huggingface_hub ``file_download.py`` (``repo_folder_name``: ``models--{org}--{name}``;
``snapshots/{commit}``, ``refs/{revision}``).

It never fails a run: a config that cannot be found or read gives no table (and a reason).
"""

from __future__ import annotations

import json
import os
import re
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from collectors.core import inputs
from collectors.core.errors import InputError

MAX_BYTES = 4 * 1024 * 1024  # a config.json is a few KB; refuse anything absurd
# A hub repo id (huggingface_hub validate_repo_id: letters, digits, "-", "_", ".", at most
# 96 characters per part, no "--" or ".." in it)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
TABLE = "serving_model_config"


@dataclass(frozen=True)
class Found:
    model_id: str
    source_path: str
    config_json: str
    quant_config_json: str | None


def hub_cache(env: dict[str, str] | None = None) -> Path:
    """The HF hub cache directory, as huggingface_hub resolves it."""
    e = os.environ if env is None else env
    if e.get("HF_HUB_CACHE"):
        return Path(e["HF_HUB_CACHE"]).expanduser()
    if e.get("HF_HOME"):
        return Path(e["HF_HOME"]).expanduser() / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def is_repo_id(name: str | None) -> bool:
    """Whether ``name`` is shaped as a hub repo id (so it names one cache folder, no path)."""
    return bool(name and _REPO_ID.match(name) and "--" not in name and ".." not in name)


def candidates(model_id: str | None, model_dir: str | None = None,
               env: dict[str, str] | None = None) -> list[Path]:  # fmt: skip
    """config.json paths to try, best first: the user's ``model_dir``, then the hub cache."""
    out: list[Path] = []
    if model_dir:
        p = Path(model_dir).expanduser()
        out.append(p / "config.json" if p.is_dir() else p)
    if is_repo_id(model_id):
        repo = hub_cache(env) / ("models--" + str(model_id).replace("/", "--"))
        with suppress(InputError):  # no (readable) refs/main: the snapshots alone
            ref = inputs.read_text(repo / "refs" / "main", 4096, "a refs file").strip()
            if re.fullmatch(r"[0-9a-zA-Z._-]{1,128}", ref):
                out.append(repo / "snapshots" / ref / "config.json")
        snaps = repo / "snapshots"
        if snaps.is_dir():
            found = sorted(snaps.glob("*/config.json"), key=_mtime, reverse=True)
            out += [p for p in found if p not in out]
    return out


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _read_json(p: Path) -> Any:
    """The parsed JSON of a regular file of at most MAX_BYTES, or None."""
    try:
        return inputs.parse_json(inputs.read_bytes(p, MAX_BYTES, "a config.json"), p)
    except InputError:
        return None


def _found(model_id: str, path: Path) -> Found | None:
    """The planner's fields of ``path`` (and of ModelOpt's quantization beside it)."""
    from planner.api import config_fields  # only once a config is there to keep

    config = _read_json(path)
    if not isinstance(config, dict):
        return None
    quant = None
    for q in (path.with_name("hf_quant_config.json"),
              path.with_name(path.name.replace("_config.json", "_hf_quant_config.json"))):  # fmt: skip
        if q != path and q.is_file() and isinstance(hq := _read_json(q), dict):
            quant = json.dumps(config_fields.quant_fields(hq))
            break
    return Found(model_id, str(path), json.dumps(config_fields.planner_fields(config)), quant)


def find(model_id: str, model_dir: str | None = None,
         env: dict[str, str] | None = None) -> tuple[Found | None, str]:  # fmt: skip
    """The model's config (or None) and a one-line account of where it was looked for."""
    tried = candidates(model_id, model_dir, env)
    for path in tried:
        if path.is_file() and (found := _found(model_id, path)) is not None:
            return found, f"config.json from {path}"
    where = ", ".join(str(p) for p in tried) or (
        f"no --model-dir and no HF cache entry under {hub_cache(env)}" if is_repo_id(model_id)
        else "no --model-dir, and the name is no hub repo id (org/name)")  # fmt: skip
    return None, f"config.json of {model_id!r} not found ({where})"


def model_config_tables(model_id: str | None, model_dir: str | None = None,
                        env: dict[str, str] | None = None) -> dict[str, list[dict]]:  # fmt: skip
    """``{"serving_model_config": [row]}`` when the config is found, else ``{}``; a
    ``model_id`` is only ever a name (``model_dir``: a folder the user named)."""
    if not model_id and not model_dir:
        return {}
    found, _ = find(model_id or Path(str(model_dir)).name, model_dir, env)
    return {TABLE: [asdict(found)]} if found else {}


def config_file_tables(path: str) -> dict[str, list[dict]]:
    """``{"serving_model_config": [row]}`` for a config.json the user named (``trace --model
    FILE``, or a directory holding one), with ModelOpt's quantization beside it
    (``hf_quant_config.json``, or ``X_hf_quant_config.json`` for an ``X_config.json``);
    ``{}`` when it cannot be read (the planner then says why)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    model_id = p.parent.name if p.name == "config.json" else p.name.removesuffix(".json").removesuffix("_config")
    found = _found(model_id, p.resolve()) if p.is_file() else None
    return {TABLE: [asdict(found)]} if found else {}


def add_model_dir_argument(parser: Any) -> None:
    """``--model-dir``: the one way a serving verb reads a local model folder."""
    parser.add_argument("--model-dir", metavar="DIR",
                        help="the served checkpoint's folder (or its config.json) on this "
                        "host: its config is recorded with the run (the planner's fields "
                        "only). Without it the config is looked up by the model's name in the "
                        "Hugging Face cache; a name is never opened as a path")  # fmt: skip
