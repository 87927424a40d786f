"""The host a run is filed under: the machine that recorded it (issue 57), one rule for all.

- ``--host`` names it, always.
- A run against a server's ``--url`` (a sweep, a scrape, a profile, a recording): this
  machine when the URL is a loopback address, else the URL's host name: the server's
  machine is where the GPUs are.
- Files measured elsewhere (bench results, traces, nccl-tests logs, expert dumps): the host
  the files name, else ``unknown`` (store.UNKNOWN_HOST), never the importing machine, which
  the run keeps as ``imported_on`` (see ``imported_env``; store migration 0015).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from store import UNKNOWN_HOST
from store import __version__ as STEPSCOPE_VERSION

# What an importer's own snapshot says of itself, kept apart from the measured host's fields.
_IMPORTER_KEYS = ("hostname", "os", "cpu", "cpu_count", "mem_bytes", "python", "torch", "vllm",
                  "nccl", "cuda", "gpu_model", "gpu_count")  # fmt: skip


def this_machine() -> str:
    return socket.gethostname()


def server_machine(url: str) -> str | None:
    """The host name in ``url``; None when it is this machine (``localhost``, a loopback or
    unspecified address such as 127.0.0.1, ::1 or 0.0.0.0, or this machine's own name)."""
    name = (urlsplit(url).hostname or "").rstrip(".")  # urlsplit lower-cases it
    if name in ("", "localhost", this_machine().lower()) or name.endswith(".localhost"):
        return None
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name
    return None if address.is_loopback or address.is_unspecified else name


def run_host(named: str | None, *, url: str | None = None, from_files: str | None = None) -> str:
    """The host a run is filed under: ``named`` (``--host``); else, for a run against the
    server at ``url``, that server's machine (this one when the URL is a loopback address);
    else, for imported files, the host they name (``from_files``), else UNKNOWN_HOST."""
    if named:
        return named
    if url is not None:
        return server_machine(url) or this_machine()
    return from_files or UNKNOWN_HOST


def imported_env(importer: dict[str, Any] | None = None, **measured: Any) -> dict[str, Any]:
    """The environment of a run this machine did not measure: ``measured`` (what the files
    or the server say of the measured host: GPU model, versions); this machine only as
    ``hostname`` and ``imported_on``, with its own snapshot (``importer``) kept apart under
    ``importer`` so that its GPUs are never taken for the measured host's."""
    me = this_machine()
    env: dict[str, Any] = {"hostname": me, "imported_on": me,
                           "stepscope_version": STEPSCOPE_VERSION, **measured}  # fmt: skip
    if importer:
        env["importer"] = {k: importer.get(k) for k in _IMPORTER_KEYS}
    return env
