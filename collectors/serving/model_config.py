"""Find a served model's HF ``config.json`` on this host and record it with the run.

``vllm-profile`` / ``vllm-bench`` know the served model id (``moonshotai/Kimi-K2.5``) and,
from the server, often its ``model_root`` (a local directory). The config is looked for:

1. in ``model_root`` (or the model id) when that is a local directory holding config.json;
2. in the Hugging Face hub cache, ``$HF_HUB_CACHE`` or ``$HF_HOME/hub`` (default
   ``~/.cache/huggingface/hub``), as ``models--ORG--NAME/snapshots/<rev>/config.json``: the
   revision ``refs/main`` names first, else the newest snapshot.

ModelOpt checkpoints keep their quantization in ``hf_quant_config.json`` beside the config;
it is recorded too. Layout of the cache: huggingface_hub ``file_download.py``
(``repo_folder_name``: ``models--{org}--{name}``; ``snapshots/{commit}``, ``refs/{revision}``).

The coordinator wires it in from the vLLM / SGLang collectors as::

    tables.update(model_config_tables(model_id, model_root))

It never fails a run: a config that cannot be found or read gives no table (and a reason).
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path

MAX_BYTES = 4 * 1024 * 1024  # a config.json is a few KB; refuse anything absurd
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


def candidates(model_id: str, model_root: str | None = None,
               env: dict[str, str] | None = None) -> list[Path]:  # fmt: skip
    """config.json paths to try, best first."""
    out: list[Path] = []
    for local in (model_root, model_id):
        if local and Path(local).expanduser().is_dir():
            out.append(Path(local).expanduser() / "config.json")
    if model_id and "/" in model_id.strip("/") and not model_id.startswith(("/", ".")):
        repo = hub_cache(env) / ("models--" + model_id.strip("/").replace("/", "--"))
        with suppress(OSError):  # no (readable) refs/main: the snapshots alone
            if rev := (repo / "refs" / "main").read_text(encoding="utf-8").strip():
                out.append(repo / "snapshots" / rev / "config.json")
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


def _read_json_text(p: Path) -> str | None:
    try:
        if p.stat().st_size > MAX_BYTES:
            return None
        text = p.read_text(encoding="utf-8")
        json.loads(text)
        return text
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def find(model_id: str, model_root: str | None = None,
         env: dict[str, str] | None = None) -> tuple[Found | None, str]:  # fmt: skip
    """The model's config (or None) and a one-line account of where it was looked for."""
    tried = candidates(model_id, model_root, env)
    for path in tried:
        if not path.is_file() or (text := _read_json_text(path)) is None:
            continue
        quant = path.with_name("hf_quant_config.json")
        qtext = _read_json_text(quant) if quant.is_file() else None
        return Found(model_id, str(path), text, qtext), f"config.json from {path}"
    where = ", ".join(str(p) for p in tried) or f"no local directory and no HF cache entry " \
        f"under {hub_cache(env)}"  # fmt: skip
    return None, f"config.json of {model_id!r} not found ({where})"


def model_config_tables(model_id: str | None, model_root: str | None = None,
                        env: dict[str, str] | None = None) -> dict[str, list[dict]]:  # fmt: skip
    """``{"serving_model_config": [row]}`` when the config is on this host, else ``{}``."""
    if not model_id and not model_root:
        return {}
    found, _ = find(model_id or str(model_root), model_root, env)
    return {TABLE: [asdict(found)]} if found else {}
