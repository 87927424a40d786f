"""Which model a recording belongs to: its shape (layers, routed experts, top-k, dense layers).

``--model`` is a planner preset (``deepseek-v3``), a config.json (or its folder), or a
served model id (``deepseek-ai/DeepSeek-V3``) whose config.json is in the Hugging Face cache
(collectors/serving/model_config.py) or whose name matches a preset. With ``--url`` and no
``--model``, the server's model is taken by name the same way: a path the server reports is
never opened (only a folder the user names is). The config kept with the run is the
planner's fields of it, never the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from collectors.core import inputs
from collectors.core.errors import InputError
from collectors.serving import model_config
from planner.api import PlannerInputError, config_fields, models


@dataclass(frozen=True)
class Model:
    model_id: str  # what the user or the server called it
    spec: models.ModelSpec
    config_json: str | None  # the config.json text the shape came from (None: a preset)

    @property
    def moe_layers(self) -> range:
        return range(self.spec.num_dense_layers, self.spec.num_layers)


def resolve(name: str, user_named: bool = True) -> Model:
    """The model ``name`` names; InputError (one line) if none. ``user_named``: the user gave
    ``name`` (a path is then read); a server's model name is only ever a name."""
    try:
        if name in models.MODEL_PRESETS:
            return Model(name, models.preset(name), None)
        path = Path(name).expanduser()
        if user_named and path.exists():
            cfg = path / "config.json" if path.is_dir() else path
            text = inputs.read_text(cfg, model_config.MAX_BYTES, "a config.json")
            spec = models.load(path)
            kept = config_fields.planner_fields(inputs.parse_json(text, cfg))
            return Model(name, spec, json.dumps(kept))
        found, where = model_config.find(name)
        if found is not None:
            spec = models.from_config(json.loads(found.config_json), name=name,
                                      source=found.source_path)  # fmt: skip
            return Model(name, spec, found.config_json)
        preset = models.preset_for_name(name)
        if preset is not None:
            spec = models.preset(preset)
            return Model(name, replace(spec, source=f"{name} -> preset {preset}"), None)
    except PlannerInputError as exc:
        raise InputError(f"--model {name}: {exc}") from None
    except OSError as exc:
        raise InputError(f"--model {name}: cannot read ({exc})") from None
    raise InputError(f"--model {name}: not a preset ({', '.join(models.MODEL_PRESETS)}), not a "
                     f"config.json, and {where}")  # fmt: skip
