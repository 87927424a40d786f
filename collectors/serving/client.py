"""A small stdlib HTTP client for a serving engine (vLLM, SGLang): JSON GETs, POSTs, text.

Every failure becomes one of two exceptions that name the URL: ``ServerUnreachable`` (no
server answered: refused, reset, timed out) or ``HttpStatus`` (it answered with an error).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit


class ServerUnreachable(Exception):
    """Nothing answered at the URL (connection refused/reset, DNS, timeout)."""


class HttpStatus(Exception):
    def __init__(self, url: str, status: int, body: str) -> None:
        super().__init__(f"{url} returned HTTP {status}: {body[:200]}")
        self.url, self.status, self.body = url, status, body


def normalize_base(url: str) -> str:
    """``http://host:8000`` (no trailing slash, no ``/v1``); raise ValueError if not HTTP."""
    url = url.strip().rstrip("/").removesuffix("/v1")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http(s) URL like http://127.0.0.1:8000")
    return url


def auth_headers(api_key: str | None) -> dict[str, str]:
    """vLLM's ``--api-key`` guards the ``/v1`` routes with a bearer token."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def request(
    url: str,
    method: str = "GET",
    body: Any = None,
    timeout: float = 10.0,
    api_key: str | None = None,
) -> tuple[int, bytes]:
    """One request; returns (status, body) for 2xx, raises HttpStatus / ServerUnreachable."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    headers.update(auth_headers(api_key))
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace") if exc.fp else ""
        raise HttpStatus(url, exc.code, text) from None
    except urllib.error.URLError as exc:
        raise ServerUnreachable(f"cannot reach {url}: {exc.reason}") from None
    except TimeoutError:
        raise ServerUnreachable(f"{url} did not answer within {timeout:g} s") from None
    except (ConnectionError, OSError) as exc:
        raise ServerUnreachable(f"cannot reach {url}: {exc}") from None


def get_json(url: str, timeout: float = 10.0, api_key: str | None = None) -> Any:
    _, raw = request(url, timeout=timeout, api_key=api_key)
    try:
        return json.loads(raw)
    except ValueError:
        head = raw[:120].decode(errors="replace")
        raise HttpStatus(url, 200, f"answer is not JSON: {head}") from None
