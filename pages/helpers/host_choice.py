"""The host choice the Tradeoff and Serving pages share: a preset, a stored host (its newest
`gpu` run), or an uploaded host file - the same hosts ``--host`` / ``--host-from-store`` take.

The choice is in the URL as ``hw``: ``preset:NAME``, ``gpu:RUN_ID`` (absolute, so a link
reopens the same inventory) or ``file``; an uploaded file's content cannot ride in a link,
so whoever opens one uploads the file again. A bare preset name (older links) still works.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from pages.helpers import ui
from pages.helpers.text import name, short
from planner.api import PlannerInputError, hardware, host_file, hosts

FILE = "file"
WAITING = "Upload a host file (JSON or TOML) to plan for it: its fields are in docs/planner.md."


@dataclass(frozen=True)
class HostPick:
    """What was chosen (the URL value) and the host it resolves to, or why it does not."""

    key: str
    hardware: hardware.HardwareSpec | None = None  # None: see error, or no file uploaded yet
    stored: str | None = None  # the store's host name, whose comm runs apply
    error: str | None = None


def host_options(gpu_hosts: pd.DataFrame, before: dict[str, str] | None = None,
                 after: dict[str, str] | None = None) -> dict[str, str]:  # fmt: skip
    """URL value -> label: ``before``, presets, stored hosts, an upload, ``after``."""
    opts = dict(before or {})
    opts.update({f"preset:{n}": f"{n} (preset)" for n in hardware.HARDWARE_PRESETS})
    for row in gpu_hosts.to_dict("records"):
        opts[f"gpu:{row['run_id']}"] = (f"{short(row['host'])}: {row['gpu_count']}x "
                                        f"{short(row['gpu_model'])} (gpu run {row['run_id']})")  # fmt: skip
    opts[FILE] = "upload a host file (JSON or TOML)"
    opts.update(after or {})
    return opts


def host_select(title: str, gpu_hosts: pd.DataFrame, notes: list[str], *, param: str = "hw",
                before: dict[str, str] | None = None, after: dict[str, str] | None = None,
                help: str | None = None) -> HostPick:  # fmt: skip
    """The host selectbox (bound to ``?{param}=``) and, for ``file``, the uploader."""
    opts = host_options(gpu_hosts, before, after)
    if gpu_hosts.empty:
        notes.append("no stored `gpu` runs: host presets and host files only "
                     "(python -m collectors gpu)")  # fmt: skip
    key = f"pick_{param}"
    wanted = st.query_params.get(param)
    if wanted in hardware.HARDWARE_PRESETS:
        wanted = f"preset:{wanted}"
    if wanted and wanted not in opts:
        st.warning(f"{title} '{name(wanted)}' from the link is not available here; showing "
                   "another.")  # fmt: skip
        wanted = None
    if st.session_state.get(key) not in opts:
        st.session_state[key] = wanted or next(iter(opts))
    choice = st.selectbox(title, list(opts), key=key, help=help, format_func=opts.get)
    st.query_params[param] = choice
    if choice == FILE:
        return _uploaded(param)
    if choice.startswith("preset:"):
        return HostPick(choice, hardware.preset(choice.removeprefix("preset:")))
    if choice.startswith("gpu:"):
        try:
            host = hosts.from_gpu_run_id(ui.store(), choice.removeprefix("gpu:"))
        except PlannerInputError as exc:
            return HostPick(choice, error=str(exc))
        return HostPick(choice, host.hardware, host.stored)
    return HostPick(choice)  # one of the page's own choices (before / after)


def _uploaded(param: str) -> HostPick:
    fields = ", ".join(host_file.FIELDS)
    up = st.file_uploader("Host file (JSON or TOML)", type=["json", "toml"], key=f"{param}_file",
                          help=f"Fields: {fields} (docs/planner.md: Hosts). A link cannot carry "
                          "the file: whoever opens the link uploads it again.")  # fmt: skip
    if up is None:  # nothing to answer for yet: not an error
        st.info(WAITING)
        return HostPick(FILE)
    try:
        return HostPick(FILE, host_file.parse(up.getvalue(), up.name))
    except PlannerInputError as exc:
        return HostPick(FILE, error=str(exc))
