"""The host a planner answer is for: ``--host PRESET|FILE`` or ``--host-from-store HOST``.

One resolver for ``python -m planner``, ``python -m planner predict`` and the pages:

- a preset name (``planner.specs.hardware.HARDWARE_PRESETS``);
- a host file, JSON or TOML (``planner.specs.host_file``);
- a host's newest stored ``gpu`` run (NVML inventory, ``store.queries.planner``), the
  known-GPU table filling what NVML cannot report (``planner.specs.hardware.from_gpu_run``).

``--host NAME`` that is neither a preset nor a file still means a stored host, as it did
before ``--host-from-store`` existed, so older scripts keep working.
"""

from __future__ import annotations

import argparse
import difflib
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerInputError
from planner.specs import hardware, host_file

COLLECT = "python -m collectors gpu"


@dataclass(frozen=True)
class Host:
    """A resolved host; ``stored`` is the store host name whose comm runs apply, if any."""

    hardware: hardware.HardwareSpec
    stored: str | None = None


def add_arguments(parser: argparse.ArgumentParser, with_store: bool = False,
                  required: bool = False) -> None:  # fmt: skip
    """``--host`` / ``--host-from-store`` (and ``--store`` where the parser lacks it)."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--host", metavar="PRESET|FILE",
                       help="host preset (" + ", ".join(hardware.HARDWARE_PRESETS) + ") or a "
                       "host file, JSON or TOML (docs/planner.md: Hosts)")  # fmt: skip
    group.add_argument("--host-from-store", metavar="HOST",
                       help="this host's newest `gpu` run in the store (NVML), the known-GPU "
                       f"table filling TFLOPS and generation; `{COLLECT}` records one")  # fmt: skip
    if with_store:
        parser.add_argument("--store", help="store path or ducklake: URL (default: "
                            "$STEPSCOPE_STORE), for --host-from-store")  # fmt: skip


def from_args(args: argparse.Namespace) -> Host:
    """The host the parsed arguments name; PlannerInputError (one line) otherwise."""
    store = getattr(args, "store", None)
    if getattr(args, "host_from_store", None):
        return from_store(args.host_from_store, store, "--host-from-store")
    if not args.host:
        raise PlannerInputError("--host PRESET|FILE or --host-from-store HOST is required")
    return resolve(args.host, store)


def resolve(value: str, store: str | None = None) -> Host:
    """A preset, a host file, else (for older scripts) a host with a stored `gpu` run."""
    if value in hardware.HARDWARE_PRESETS:
        return Host(hardware.preset(value))
    path = Path(value)
    if path.exists() or path.suffix.lower() in (".json", ".toml") or "/" in value:
        return Host(host_file.load(path))
    close = difflib.get_close_matches(value, hardware.HARDWARE_PRESETS, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    presets = f"{hint}presets: {', '.join(hardware.HARDWARE_PRESETS)}"
    loc = store_or_none(store)
    if loc is None:
        raise PlannerInputError(f"--host {value!r}: not a host preset or a host file ({presets})")
    run_id = _latest_gpu_run(loc, value)
    if run_id is None:
        raise PlannerInputError(
            f"--host {value!r}: not a host preset or a host file, and the store has no `gpu` "
            f"run for it (run `{COLLECT}` on that host; {presets})"
        )
    return from_gpu_run_id(loc, run_id)


def from_store(host: str, store: str | None, flag: str = "--host-from-store") -> Host:
    """HardwareSpec of a host from its newest `gpu` run in the store."""
    loc = store_or_none(store)
    if loc is None:
        raise PlannerInputError(f"{flag} {host!r}: there is no store at {_describe(store)} "
                                "(give --store or set STEPSCOPE_STORE)")  # fmt: skip
    run_id = _latest_gpu_run(loc, host)
    if run_id is None:
        known = stored_hosts(loc)
        close = difflib.get_close_matches(host, known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise PlannerInputError(
            f"{flag} {host!r}: the store has no `gpu` run for it (run `{COLLECT} --host "
            f"{host}` on that host; {hint}hosts with one: {', '.join(known) or 'none'})"
        )
    return from_gpu_run_id(loc, run_id)


def stored_hosts(loc) -> list[str]:
    """Hosts with a `gpu` run in the store."""
    from store.queries import planner as qp

    frame = _read(lambda: qp.gpu_hosts(loc))
    return frame["host"].tolist() if not frame.empty else []


def from_gpu_run_id(loc, run_id: str) -> Host:
    """A stored `gpu` run (absolute run id, as the pages' links hold it) -> Host."""
    from store.queries import planner as qp

    head, devices = _read(lambda: qp.gpu_run(loc, run_id))
    if head.empty:
        raise PlannerInputError(f"gpu run {run_id}: not in the store (run `{COLLECT}`)")
    hw = hardware.from_gpu_run(head.iloc[0].to_dict(), devices.to_dict("records"))
    return Host(hw, stored=hw.name)


def host_comm_curves(loc, host: str | None, interconnect: str) -> list:
    """The measured curves of a stored host's GPU comm runs ([] for none, or for the host
    that says it is unknown: runs filed there were not shown to share a machine)."""
    from planner.cost.comm import curves_from_rows
    from store import UNKNOWN_HOST
    from store.queries import planner as qp

    if not host or host == UNKNOWN_HOST:
        return []
    runs = qp.comm_runs(loc, host)
    if runs.empty:
        return []
    rows = qp.comm_rows(loc, runs["run_id"].tolist())
    return curves_from_rows(rows.to_dict("records"), interconnect)


def _latest_gpu_run(loc, host: str) -> str | None:
    from store.queries import planner as qp

    return _read(lambda: qp.latest_gpu_run_id(loc, host))


def _read(query):
    """A store read; a store that cannot be read is one line."""
    from store.errors import StoreError

    try:
        return query()
    except StoreError as exc:
        raise PlannerInputError(f"store: {exc}") from None


def store_or_none(store: str | None):
    from store.errors import StoreError
    from store.location import resolve as resolve_store
    from store.reader import store_exists

    try:
        loc = resolve_store(store)
        return loc if store_exists(loc) else None
    except StoreError as exc:
        raise PlannerInputError(f"store: {exc}") from None


def _describe(store: str | None) -> str:
    from store.location import resolve as resolve_store

    return resolve_store(store).describe()
