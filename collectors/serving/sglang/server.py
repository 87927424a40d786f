"""What an SGLang server says about itself: version, model, layout (HTTP, stdlib only).

Endpoints from python/sglang/srt/entrypoints/http_server.py: ``GET /get_server_info``
(``ServerArgs`` fields, scheduler info, ``version``; ``/server_info`` in newer releases),
``GET /get_model_info`` (``model_path``, ``is_generation``), ``GET /v1/models``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collectors.core.errors import MeasurementError
from collectors.serving import client
from collectors.serving.layout import Layout
from collectors.serving.sglang import layout as sgl_layout


@dataclass
class ServerFacts:
    version: str | None = None
    model: str | None = None
    layout: Layout | None = None
    info: dict[str, Any] = field(default_factory=dict)  # /get_server_info as answered


def server_info(base: str, timeout: float = 10.0) -> dict[str, Any]:
    """``/get_server_info`` (or ``/server_info``); {} when neither answers with JSON."""
    for path in ("/get_server_info", "/server_info"):
        try:
            info = client.get_json(f"{base}{path}", timeout=timeout)
        except client.HttpStatus:
            continue
        if isinstance(info, dict):
            return info
    return {}


def facts(base: str, timeout: float = 10.0) -> ServerFacts:
    """Version, model and layout; MeasurementError when nothing answers at ``base``."""
    try:
        info = server_info(base, timeout)
        model = None
        try:
            card = client.get_json(f"{base}/get_model_info", timeout=timeout)
            model = card.get("model_path") if isinstance(card, dict) else None
        except client.HttpStatus:
            pass
        if not model:
            data = client.get_json(f"{base}/v1/models", timeout=timeout).get("data") or []
            model = data[0].get("id") if data else None
    except client.ServerUnreachable as exc:
        raise MeasurementError(f"SGLang server down? {exc}") from None
    except client.HttpStatus as exc:
        raise MeasurementError(f"{exc}; is {base} an SGLang server?") from None
    version = info.get("version")
    return ServerFacts(str(version) if version else None, model, sgl_layout.from_server_info(info),
                       info)  # fmt: skip
