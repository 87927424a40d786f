"""The streaming reader against json.load on real fixtures, and on awkward inputs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from collectors.core.errors import InputError
from collectors.trace.readers.kineto import read_trace
from tests.trace.conftest import fixture
from tests.trace.synth import TraceBuilder, decode_step_trace

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@pytest.mark.parametrize("rel", [
    "hta/sampled_rank-0.json.gz", "hta/ns_resolution_rank-0.pt.trace.json.gz",
    "tracelens/h100_qwen1.5_0.5b.json.gz", "tracelens/sglang_qwen3_8b_decode.json.gz",
    "tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz",
    "tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz",
])  # fmt: skip
def test_counts_match_a_full_json_load(rel):
    path = fixture(rel)
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    raw = read_trace(path, all_cpu_ops=True)
    assert raw.events_total == len(events)
    gpu = [e for e in events if e.get("cat") in GPU_CATS and e.get("ph") == "X"]
    assert len(raw.g_ts) == len(gpu)
    assert sum(raw.g_dur) == pytest.approx(sum(e["dur"] for e in gpu))
    assert len(raw.c_ts) == sum(1 for e in events if e.get("cat") == "cpu_op")
    assert raw.meta.get("distributedInfo") == doc.get("distributedInfo")
    assert not raw.partial and raw.size_bytes == path.stat().st_size
    lean = read_trace(path)  # GPU traces keep only the CPU ops the analysis needs
    assert len(lean.g_ts) == len(gpu) and lean.events_total == len(events)
    assert len(lean.c_ts) <= len(raw.c_ts)


def test_gpu_trace_with_devices_in_header_skips_unneeded_cpu_ops():
    path = fixture("tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz")
    lean, full = read_trace(path), read_trace(path, all_cpu_ops=True)
    names = {full.names[i] for i in full.c_name}
    kept = {lean.names[i] for i in lean.c_name}
    assert len(full.c_ts) == 642 and kept < names
    # casts, and the attention op whose kernels take its category (piecewise graphs: the
    # attention runs eagerly between graph pieces)
    assert kept <= {"aten::to", "aten::_to_copy", "vllm::unified_attention_with_output"}
    assert "vllm::unified_attention_with_output" in kept and len(lean.g_ts) == len(full.g_ts)


def test_python_function_events_are_not_kept():
    raw = read_trace(fixture("tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz"))
    # 17038 of its 19289 events are python_function frames
    assert raw.events_total == 19289 and raw.events_kept < 2000


def test_truncated_tmp_keeps_complete_events(truncated_tmp):
    raw = read_trace(truncated_tmp)
    assert raw.partial and "ends inside traceEvents" in raw.partial_reason
    full = read_trace(fixture("tracelens/h100_qwen1.5_0.5b.json.gz"))
    assert 0 < raw.events_kept < full.events_kept
    assert raw.meta.get("baseTimeNanoseconds") is None  # it lives in the lost trailer


def test_separator_inside_strings_and_nested_args(tmp_path):
    b = TraceBuilder(rank=3)
    tricky = "void k<{lambda()#1}, {lambda()#2}>(at::Tensor)"
    b.kernel(tricky, 10.0, 20.0, 5.0, nested=[{"a": 1}, {"b": "}, {"}])
    b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30.0, 40.0, 7.0)
    raw = read_trace(b.write(tmp_path / "t.json"))
    assert [raw.names[i] for i in raw.g_name] == [tricky, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert list(raw.g_dur) == [5.0, 7.0] and raw.meta["distributedInfo"]["rank"] == 3


@pytest.mark.parametrize("trailer", [(), ("distributedInfo", "deviceProperties")])
def test_metadata_before_or_after_events(tmp_path, trailer):
    b = TraceBuilder(rank=1)
    b.meta["distributedInfo"]["pg_config"] = [{"pg_name": "0"}, {"pg_name": "1"}]
    b.kernel("gemm_kernel", 1.0, 2.0, 3.0)
    raw = read_trace(b.write(tmp_path / "t.json.gz", trailer_keys=trailer))
    assert raw.meta["distributedInfo"]["rank"] == 1 and not raw.partial
    assert raw.meta["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert len(raw.g_ts) == 1


def test_concatenated_gzip_members(tmp_path):
    text = TraceBuilder().write(tmp_path / "t.json").read_bytes()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:100]) + gzip.compress(text[100:]))
    assert len(read_trace(path).g_ts) == 0 and not read_trace(path).partial


def _bad(path: Path, content: bytes | str) -> str:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputError) as exc:
        read_trace(path)
    msg = str(exc.value)
    assert msg.startswith(str(path)) and "\n" not in msg
    return msg


def test_bad_inputs_name_the_file_and_reason(tmp_path):
    p = tmp_path / "x.json"
    assert "empty" in _bad(p, b"")
    assert "not valid JSON" in _bad(p, "hello, this is not json")
    assert "JSON array" in _bad(p, "[1, 2]")
    assert "without traceEvents" in _bad(p, '{"a": 1}')
    assert "not a list" in _bad(p, '{"traceEvents": 7}')
    ev = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0'
    assert "lacks a numeric 'dur'" in _bad(p, '{"traceEvents": [' + ev + "}]}")
    assert "negative duration" in _bad(p, '{"traceEvents": [' + ev + ', "dur": -3}]}')
    assert "lacks a 'name'" in _bad(p, '{"traceEvents": [{"ph": "X", "cat": "kernel", '
                                      '"ts": 1, "dur": 1}]}')  # fmt: skip
    g = tmp_path / "x.json.gz"
    good = decode_step_trace(tmp_path / "good.json.gz").read_bytes()
    half = len(good) // 2
    assert "corrupt gzip" in _bad(g, good[:half] + b"\xff" * 64 + good[half + 64 :])
    assert "garbage after the gzip stream" in _bad(g, good + b"garbage!")


def test_events_whose_category_comes_after_braces(tmp_path):
    """Producers that write "name"/"args" before "cat" still parse (the slow path)."""
    ev = ('{"name": "k<{lambda()#1}>", "args": {"stream": 7, "correlation": 5}, "ph": "X", '
          '"cat": "kernel", "pid": 0, "tid": 7, "ts": 10.0, "dur": 2.5}')  # fmt: skip
    other = '{"ph": "X", "cat": "python_function", "name": "f", "ts": 1, "dur": 1}'
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + other + ", " + ev + ", " + ev + "]}")
    raw = read_trace(path)
    assert list(raw.g_dur) == [2.5, 2.5] and raw.names[raw.g_name[0]] == "k<{lambda()#1}>"
    assert raw.events_total == 3 and not raw.partial


def test_non_complete_events_in_kept_categories_are_ignored(tmp_path):
    ev = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0}'
    begin = '{"ph": "B", "cat": "user_annotation", "name": "a", "pid": 1, "tid": 1, "ts": 0.5}'
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + begin + ", " + ev + "]}")
    raw = read_trace(path)
    assert list(raw.g_dur) == [2.0] and raw.cpu_annotations == []


@pytest.mark.parametrize("rel", [
    "hta/ns_resolution_rank-0.pt.trace.json.gz",
    "tracelens/vllm_mi300x_prefilldecode_piecewise.json.gz",
    "tracelens/sglang_qwen3_8b_decode.json.gz",
])  # fmt: skip
def test_only_launch_runtime_calls_are_read_and_nothing_changes(rel):
    """cudaEventRecord, hipPointerGetAttribute... are skipped unparsed; every GPU event
    still finds the call that launched it."""
    import numpy as np

    from collectors.trace.analyze import _launch_times

    a = read_trace(fixture(rel))
    b = read_trace(fixture(rel), all_runtime=True)
    assert len(a.r_ts) < len(b.r_ts)
    la, ga = _launch_times(a, np.frombuffer(a.g_corr, dtype=np.int64))
    lb, gb = _launch_times(b, np.frombuffer(b.g_corr, dtype=np.int64))
    assert np.array_equal(la, lb, equal_nan=True) and np.array_equal(ga, gb)
    assert np.isfinite(la).sum() > 0


def test_runtime_calls_in_another_key_order_are_read_again(tmp_path):
    """A writer that puts "name" before "cat" defeats the launch filter: the reader notices
    kernels with correlation ids but no launches and reads every runtime call."""
    from tests.trace.synth import TraceBuilder

    b = TraceBuilder(rank=0, world_size=1)
    b.kernel("nvjet_tst_128x64_64x4_1x2_h_bz_TNT", 10.0, 20.0, 5.0)
    for e in b.events:
        if e.get("cat") == "cuda_runtime":
            e.clear()
            e.update({"name": "cudaLaunchKernel", "ph": "X", "cat": "cuda_runtime", "pid": 1,
                      "tid": 1, "ts": 10.0, "dur": 2.0, "args": {"correlation": 101}})  # fmt: skip
    raw = read_trace(b.write(tmp_path / "t.json"))
    assert list(raw.r_corr) == [101] and list(raw.g_corr) == [101]


@pytest.mark.parametrize("block", [0, 4096])
def test_mixed_spacing_between_events_reads_every_event(tmp_path, block):
    # The reader cuts events at the first separator's exact bytes (Kineto: "},\n  {"); a
    # file written by hand or re-dumped can change spacing midway, and then the regex cut
    # must take over rather than swallow two events or call the file invalid.
    path = fixture("tracelens/vllm_mi300x_decode_fullgraph_bs32.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc.pop("traceEvents")
    spacings = [",\n  ", ", ", ",", " ,\n\t"]
    body = "".join(
        (spacings[(i // 7) % len(spacings)] if i else "") + json.dumps(e)
        for i, e in enumerate(events)
    )  # fmt: skip
    head = json.dumps(doc)[1:-1]
    mixed = tmp_path / "mixed.json"
    mixed.write_text("{" + head + ', "traceEvents": [\n  ' + body + "\n]}")
    raw = read_trace(mixed, block=block)
    reference = read_trace(path)
    assert raw.events_total == len(events)
    assert list(raw.g_ts) == list(reference.g_ts) and list(raw.g_corr) == list(reference.g_corr)
    assert list(raw.r_corr) == list(reference.r_corr) and not raw.partial
