"""Hardware: one ``gpu`` run's GPUs, topology matrix, P2P matrix and interconnect class.

First screen: the interconnect in a sentence and the topology matrix; the devices' facts, the
GPU table and the P2P matrix below."""

from __future__ import annotations

import html as html_text

import pandas as pd
import streamlit as st

from pages.helpers import ui
from pages.helpers.text import md, name, short
from store.errors import StoreError
from store.queries import hw as queries_hw

AREA = next(a for a in ui.AREAS if a.verb == "gpu")
CLASS_WORDS = {"pcie-only": "PCIe-only", "nvlink": "NVLink", "mixed": "mixed NVLink and PCIe",
               "none": "no GPU"}  # fmt: skip
CAPS = ("read", "write", "nvlink", "atomics")
REMOTE_WORDS = {"gpu": "another GPU (bridge)", "switch": "NVSwitch"}
# Cell colours, nearest (fastest) link first, as a reading aid for the topo -m layout.
TOPO_COLOURS = {"NV": "#1a9850", "PIX": "#91cf60", "PXB": "#d9ef8b", "PHB": "#fee08b",
                "NODE": "#fc8d59", "SYS": "#d73027", "X": "#e0e0e0"}  # fmt: skip
TOPO_LEGEND = [
    ("X", "self"),
    ("NV#", "a bonded set of # NVLinks (direct, or through NVSwitch)"),
    ("PIX", "at most one PCIe bridge"),
    ("PXB", "several PCIe bridges, not through the PCIe host bridge"),
    ("PHB", "PCIe and a PCIe host bridge (typically the CPU)"),
    ("NODE", "PCIe and the link between PCIe host bridges inside one NUMA node"),
    ("SYS", "PCIe and the CPU-to-CPU interconnect between NUMA nodes (QPI/UPI, xGMI)"),
]
P2P_LEGEND = [("X", "self"), ("OK", "supported"), ("CNS", "chipset not supported"),
              ("GNS", "GPU not supported"), ("TNS", "topology not supported"),
              ("DIS", "disabled by registry key"), ("NS", "not supported"), ("U", "unknown")]  # fmt: skip


def pick_run(runs: pd.DataFrame, host: str | None) -> str | None:
    """Run picker kept in ``?run=`` as an absolute run id (the newest when none is given).

    Not ``bind="query-params"``: a bound widget drops its parameter at the default value and
    does not write a value set before its first run, so the link would not name the run.
    """
    ids = runs["run_id"].tolist()
    wanted = st.query_params.get("run")
    host_changed = st.session_state.get("hw_host", host) != host
    st.session_state["hw_host"] = host
    if wanted and wanted not in ids:
        if host_changed and ids:
            wanted = None  # the sidebar moved to another host: show that host's newest run
        else:
            ids.append(wanted)  # a link to a run this filter lacks still opens, and says so
    if not ids:
        return None
    if host_changed or st.session_state.get("run_pick") not in ids:
        st.session_state["run_pick"] = wanted or ids[0]
    facts = {r.run_id: f"{short(r.host)} · {r.interconnect_class} · {r.gpu_count} GPU" for r in
             runs.itertuples()}  # fmt: skip
    choice = st.selectbox(
        "gpu run", ids, key="run_pick",
        format_func=lambda rid: f"{short(rid)} ({facts.get(rid, 'not in this view')})",
    )  # fmt: skip
    if st.query_params.get("run") != choice:
        st.query_params["run"] = choice
    return choice


def pair_words(counts: pd.DataFrame, gpu_count: int, klass: str) -> str:
    total = gpu_count * (gpu_count - 1) // 2
    if total == 0:
        return "a single GPU, so no GPU pairs"
    nv = counts[counts["topology"].str.startswith("NV")]
    labels = ", ".join(f"{r.topology} on {r.pairs}" for r in nv.itertuples())
    nv_pairs = int(nv["pairs"].sum())
    if nv_pairs == 0:
        return "no NVLink"
    if nv_pairs == total:
        return f"NVLink between all {total} GPU pairs ({labels})"
    return f"NVLink on {nv_pairs} of {total} GPU pairs ({labels}), PCIe for the other {total - nv_pairs}"


def p2p_words(p2p: pd.DataFrame) -> str:
    read = p2p[p2p["cap"] == "read"]
    if read.empty or int(read["pairs"].iloc[0]) == 0:
        return "no P2P pairs"
    ok, pairs = int(read["ok"].iloc[0]), int(read["pairs"].iloc[0])
    return f"P2P read OK on all {pairs} pairs" if ok == pairs else (
        f"P2P read OK on {ok} of {pairs} pairs")  # fmt: skip


def _num(value: object, fmt: str = "{:.0f}") -> str:
    return "?" if value is None or pd.isna(value) else fmt.format(value)


def device_facts(dev: pd.DataFrame) -> list[str]:
    """Plain lines about PCIe, memory and power: what the matrix alone does not say."""
    lines = []
    slot = {f"Gen{_num(r.pcie_gen_max)} x{_num(r.pcie_width_max)}" for r in dev.itertuples()}
    lines.append(f"PCIe per GPU (slot maximum): {', '.join(sorted(slot))}.")
    slow = dev[(dev["pcie_gen_current"] < dev["pcie_gen_max"])
               | (dev["pcie_width_current"] < dev["pcie_width_max"])]  # fmt: skip
    if len(slow):
        now = ", ".join(f"GPU {r.gpu_index} at Gen{_num(r.pcie_gen_current)} "
                        f"x{_num(r.pcie_width_current)}" for r in slow.itertuples())  # fmt: skip
        lines.append(
            f"Running below the maximum now: {now} (idle GPUs lower their PCIe speed "
            "to save power; a lower width stays low under load and halves bandwidth)."
        )
    mem = {_num(m / 2**30, "{:.1f} GiB") for m in dev["memory_bytes"]}
    bw = {_num(b, "{:.0f} GB/s").replace("?", "not reported") for b in dev["mem_bandwidth_gbps"]}
    power = {_num(p, "{:.0f} W") for p in dev["power_limit_w"]}
    lines.append(f"Memory {', '.join(sorted(mem))} per GPU; theoretical memory bandwidth "
                 f"{', '.join(sorted(bw))}; power limit {', '.join(sorted(power))}.")  # fmt: skip
    return lines


def matrix(links: pd.DataFrame, column: str) -> pd.DataFrame:
    grid = links.pivot(index="gpu_a", columns="gpu_b", values=column).fillna("?")
    grid.index = [f"GPU{i}" for i in grid.index]
    grid.columns = [f"GPU{i}" for i in grid.columns]
    return grid


def topo_colour(value: object) -> str:
    text = str(value)
    key = "NV" if text.startswith("NV") else text
    colour = TOPO_COLOURS.get(key)
    ink = "; color: white" if key in ("NV", "SYS") else ""
    return f"background-color: {colour}{ink}" if colour else ""


def p2p_colour(value: object) -> str:
    colour = {"OK": "#91cf60", "X": "#e0e0e0"}.get(str(value), "#fc8d59")
    return f"background-color: {colour}"


def styled_table(grid: pd.DataFrame, colour, name: str, title: str) -> None:
    """Show a matrix as a coloured table; CSV and a self-contained HTML file of it."""
    cells = [c for c in grid.columns if c.startswith("GPU")]
    styler = grid.style.map(colour, subset=cells)
    st.table(styler)
    title = html_text.escape(title)
    html = f"<!doctype html><meta charset='utf-8'><title>{title}</title><h3>{title}</h3>"
    ui.csv_download(grid.reset_index(names="gpu"), name)
    page = (html + grid.style.map(colour, subset=cells).format(escape="html").to_html()).encode()
    st.download_button("HTML", page, file_name=f"{name}.html",
                       mime="text/html", key=f"html-{name}", icon=":material/download:")  # fmt: skip


def legend(rows: list[tuple[str, str]]) -> None:
    st.caption(" · ".join(f"**{code}** = {text}" for code, text in rows))


st.title("Hardware")
ui.share_link()
loc = ui.store()
host = ui.host_filter()
try:
    runs = queries_hw.gpu_runs(loc, host)
except StoreError as exc:
    ui.store_problem(exc)
    st.stop()

if runs.empty and not st.query_params.get("run"):
    ui.empty_state(AREA, f"No GPU inventory{' for host ' + name(host) if host else ''} yet. "
                   "This command reads NVML and fills this page:")  # fmt: skip
    st.stop()

run_id = pick_run(runs, host)
if run_id is None:
    st.stop()
head = queries_hw.gpu_host(loc, run_id)
if head.empty:
    st.warning(f"Run {name(run_id)} is not a gpu run in this store"
               + (f" for host {name(host)}." if host else "."))  # fmt: skip
    st.stop()
info = head.iloc[0]
st.caption(f"Run {name(run_id)} on host {name(info['host'])}, {ui.age(info['finished_at'])} ago"
           + (f", label {name(info['label'])}" if info["label"] else ""))  # fmt: skip

if not info["nvml_available"]:
    st.info(f"Host {name(info['host'])} has no NVIDIA GPU: {md(info['message'])}. Interconnect class: "
            "none. Run the command on a GPU host to see its topology.")  # fmt: skip
    st.code(AREA.command, language="bash")
    st.stop()

dev = queries_hw.gpu_devices(loc, run_id)
links = queries_hw.gpu_links(loc, run_id)
counts = queries_hw.topology_counts(loc, run_id)
p2p = queries_hw.p2p_counts(loc, run_id)
n = int(info["gpu_count"])
klass = str(info["interconnect_class"])
st.markdown(f"**{n}x {name(info['gpu_model'])}, {md(CLASS_WORDS.get(klass, klass))}**: "
            f"{pair_words(counts, n, klass)}; {p2p_words(p2p)}.")  # fmt: skip
st.subheader("Topology matrix")
st.caption("As `nvidia-smi topo -m` prints it: how each GPU pair is connected, nearest first.")
topo = matrix(links, "topology")
topo["CPU Affinity"] = [str(a) if a else "?" for a in dev["cpu_affinity"]]
topo["NUMA Affinity"] = [_num(a) for a in dev["numa_node"]]
styled_table(topo, topo_colour, f"topology-{run_id}", f"GPU topology, run {run_id}")
legend(TOPO_LEGEND)

facts = device_facts(dev) if not dev.empty else []
sys_pairs = counts[counts["topology"] == "SYS"]
if len(sys_pairs):
    facts.append(f"{int(sys_pairs['pairs'].iloc[0])} GPU pair(s) cross CPU sockets (SYS): "
                 "their traffic also crosses the CPU-to-CPU interconnect.")  # fmt: skip
facts.append(f"Driver {name(info['driver_version'] or '?')}, CUDA "
             f"{name(info['cuda_driver_version'] or '?')}."
             + (f" Note: {md(info['message'])}." if info["message"] else ""))  # fmt: skip
for line in facts:
    st.caption(line)

st.subheader("GPUs")
shown = dev.assign(
    memory_gib=(dev["memory_bytes"] / 2**30).round(1),
    pcie_now=[f"Gen{_num(r.pcie_gen_current)} x{_num(r.pcie_width_current)}" for r in dev.itertuples()],
    pcie_max=[f"Gen{_num(r.pcie_gen_max)} x{_num(r.pcie_width_max)}" for r in dev.itertuples()],
)  # fmt: skip
st.dataframe(
    shown[["gpu_index", "name", "memory_gib", "pcie_now", "pcie_max", "nvlink_active",
           "power_limit_w", "sm_clock_max_mhz", "mem_clock_max_mhz", "mem_bus_width_bits",
           "mem_bandwidth_gbps", "numa_node", "cpu_affinity", "pci_bus_id", "uuid"]],
    hide_index=True, width="stretch",
)  # fmt: skip
ui.csv_download(dev, f"gpus-{run_id}")
nvl = queries_hw.nvlink_summary(loc, run_id)
if not nvl.empty:
    kinds = {(r.active_links, r.version, r.remote_types) for r in nvl.itertuples()}
    if len(kinds) == 1:
        active, version, remote = next(iter(kinds))
        st.caption(f"NVLink: every GPU has {active} active NVLink {_num(version)} link(s), "
                   f"to {md(REMOTE_WORDS.get(remote, remote or 'unknown devices'))}.")  # fmt: skip
    else:
        st.caption("NVLink: " + "; ".join(
            f"GPU {r.gpu_index}: {r.active_links} active (to {md(r.remote_types or '?')})"
            for r in nvl.itertuples()))  # fmt: skip

st.subheader("P2P matrix")
cap = st.segmented_control("P2P capability", CAPS, default="read", key="p2p",
                           bind="query-params")  # fmt: skip
cap = cap or "read"
st.caption(f"P2P {cap} status for each GPU pair (row GPU to column GPU), as "
           f"`nvidia-smi topo -p2p {cap[0]}` reports it.")  # fmt: skip
styled_table(matrix(links, f"p2p_{cap}"), p2p_colour, f"p2p-{cap}-{run_id}",
             f"P2P {cap} status, run {run_id}")  # fmt: skip
legend(P2P_LEGEND)
ui.csv_download(links, f"gpu-links-{run_id}", label="CSV (all pairs, long form)")
