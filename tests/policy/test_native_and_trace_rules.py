"""Native precision from config.json / hints, and the trace rules on kernel rows."""

from __future__ import annotations

import pytest

from planner.policy.check import load_policy
from planner.policy.trace_check import (
    _get,
    _row,
    _rows,
    check_kernels,
    check_runs,
    quantize_candidates,
    run_verdict,
)
from planner.specs.native import NativeError, from_hf_config, parse_hint
from planner.specs.precision import Precision

DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                            "quant_method": "fp8", "weight_block_size": [128, 128]},
}  # fmt: skip


def test_native_from_configs() -> None:
    assert from_hf_config(DEEPSEEK_V3) == Precision(
        "fp8_e4m3", "bf16", "bf16", "bf16", dispatch="fp8_e4m3"
    )
    plain = {"model_type": "llama", "hidden_size": 4096, "torch_dtype": "float16"}
    assert from_hf_config(plain) == Precision("fp16", "fp16", "fp16", "fp16")
    w8a8_kv = {"model_type": "llama", "torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float"},
        "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"},
                                "input_activations": {"num_bits": 8, "type": "float"}}}}}  # fmt: skip
    assert from_hf_config(w8a8_kv) == Precision(
        "fp8_e4m3", "fp8_e4m3", "fp8_e4m3", "bf16", dispatch="fp8_e4m3"
    )
    with pytest.raises(NativeError, match="not a transformer config"):
        from_hf_config({"architectures": ["X"]})
    with pytest.raises(NativeError, match="unknown quantization method 'magic'"):
        from_hf_config({"model_type": "x", "quantization_config": {"quant_method": "magic"}})


def test_native_hints() -> None:
    assert parse_hint("deepseek-v3").dispatch == "fp8_e4m3"
    assert parse_hint("w=int4,kv=fp8") == Precision("int4", "bf16", "fp8_e4m3", "bf16", "")
    for bad in ("llama-9000", "gpu=int4", "weights=banana"):
        with pytest.raises(NativeError):
            parse_hint(bad)


def row(name: str, category: str, dtype: str = "", calls: int = 10, rank: int = 0) -> dict:
    return {"run_id": "r1", "rank": rank, "name": name, "category": category, "dtype": dtype,
            "calls": calls, "total_us": 100.0}  # fmt: skip


def checks(rows: list[dict], native: str | None = None) -> list[tuple[str, str, str]]:
    found = check_kernels(rows, load_policy(), parse_hint(native) if native else None)
    return [(f.level, f.rule_id, f.check) for f in found]


def test_fp8_collectives_are_violations() -> None:
    rows = [row("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL", "allreduce", "f8e4m3"),
            row("ncclDevKernel_ReduceScatter_Sum_f8e5m2_RING_LL", "reduce_scatter")]  # fmt: skip
    assert checks(rows) == [("violation", "communication-native", "low_precision_collective")] * 2


def test_full_precision_and_metadata_collectives_pass() -> None:
    rows = [
        row("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce", "bf16", calls=127),
        row("ncclKernel_AllReduce_RING_LL_Sum_float", "allreduce", "float"),
        row("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long)", "all_to_all",
            "int8"),
        row("ncclKernel_Broadcast_RING_LL_Sum_uint8", "other_comm", "uint8"),
        row("void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, "
            "(vllm::Fp8KVCacheDataType)0>", "attention"),
        row("vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>", "allreduce"),
    ]  # fmt: skip
    assert checks(rows) == []


def test_fp8_dispatch_depends_on_the_checkpoint() -> None:
    rows = [row("ncclDevKernel_AllGather_RING_LL", "allgather", "fp8_e4m3")]
    assert checks(rows) == [("violation", "dispatch-native", "low_precision_collective")]
    assert checks(rows, "deepseek-v3") == []


def test_quantizing_collectives() -> None:
    qr = row("void quickreduce::allreduce_prototype_twoshot<quickreduce::CodecQ4, __hip_bfloat16>",
             "allreduce")  # fmt: skip
    combine = row("moe_a2a_combine_low_precision_kernel", "other_comm")
    fused = row("allreduce_fusion_kernel_oneshot_lamport<fp8_quant>", "allreduce")
    assert checks([qr, combine, fused]) == [
        ("violation", "communication-native", "quantizing_collective"),
        ("violation", "communication-native", "quantizing_collective"),
        ("review", "communication-native", "quantizing_collective"),
    ]
    # FP mode of quick reduce on an FP16 model is not a cast.
    fp = row("quickreduce::allreduce_prototype_twoshot<quickreduce::CodecFP, half>", "allreduce")
    assert checks([fp], "fp16") == []


def test_quantize_kernels_paired_with_collectives_need_review() -> None:
    comm = row("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce", "bf16", calls=122)
    paired = row("void per_token_quant_fp8_kernel<bf16>", "cast_quant", calls=122)
    other_rank = row("void per_token_quant_fp8_kernel<bf16>", "cast_quant", calls=122, rank=1)
    dequant = row("dequant_int4_kernel", "cast_quant", calls=122)
    unpaired = row("void per_token_quant_fp8_kernel<bf16>", "cast_quant", calls=58)
    assert checks([comm, paired]) == [("review", "communication-native", "paired_quantize")]
    assert checks([comm, other_rank, dequant, unpaired]) == []


def test_quantize_right_before_collectives_from_event_order() -> None:
    comm = row("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce", "bf16", calls=122)
    same_count = row("void per_token_quant_fp8_kernel<bf16>", "cast_quant", calls=122)

    def before(name: str, times: int, category: str = "cast_quant") -> dict:
        return {"run_id": "r1", "rank": 0, "name": name, "category": category,
                "comm_category": "allreduce", "times": times, "comm_calls": 122}  # fmt: skip

    policy = load_policy()
    # With event order known, equal call counts alone no longer count (no adjacency row).
    assert check_kernels([comm, same_count], policy, adjacency={"r1": []}) == []
    found = check_kernels([comm, same_count], policy, adjacency={"r1": [before(
        "void per_token_quant_fp8_kernel<bf16>", 122)]})  # fmt: skip
    assert [(f.level, f.check, f.calls) for f in found] == [
        ("review", "quantize_before_collective", 122)]  # fmt: skip
    assert "right before 122 of 122 allreduce calls" in found[0].detail
    rare = [before("void per_token_quant_fp8_kernel<bf16>", 10), before("dequant_kernel", 122),
            before("void gemm_kernel", 122, "gemm")]  # fmt: skip
    assert check_kernels([comm], policy, adjacency={"r1": rare}) == []


def test_summary_verdict_says_when_rule_3_is_by_call_counts() -> None:
    comm = row("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce", "bf16", calls=122)
    paired = row("void per_token_quant_fp8_kernel<bf16>", "cast_quant", calls=122)
    unpaired = row("void per_token_quant_fp8_kernel<bf16>", "cast_quant", calls=124)
    policy = load_policy()
    by_counts = check_kernels([comm, paired], policy)
    assert run_verdict(by_counts, "r1", exact=False, has_events=True) == (
        "needs review (by call counts; open the run for the exact check)")  # fmt: skip
    assert run_verdict(by_counts, "r1", exact=False, has_events=False) == (
        "needs review (by call counts; no per-event rows stored)")  # fmt: skip
    # The proxy misses a quantize kernel with one call more than the AllReduce: the run is
    # a candidate, so its "compliant" is qualified too; a run without one is plainly so.
    missed = check_kernels([comm, unpaired], policy)
    assert quantize_candidates([comm, unpaired]) == {"r1"} and quantize_candidates([comm]) == set()
    assert run_verdict(missed, "r1", False, True, candidate=True) == (
        "compliant (by call counts; open the run for the exact check)")  # fmt: skip
    assert run_verdict(check_kernels([comm], policy), "r1", False, True) == "compliant"
    # Exact (per-event rows of the selected run): no qualifier.
    exact = check_kernels([comm, unpaired], policy, adjacency={"r1": [{
        "run_id": "r1", "rank": 0, "name": unpaired["name"], "category": "cast_quant",
        "comm_category": "allreduce", "times": 122, "comm_calls": 122}]})  # fmt: skip
    assert run_verdict(exact, "r1", exact=True, has_events=True, candidate=True) == "needs review"
    fp8 = row("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL", "allreduce", "f8e4m3")
    assert run_verdict(check_kernels([fp8, paired], policy), "r1", False, True) == (
        "breaks the policy")  # fmt: skip


def test_one_kernel_in_many_runs_is_found_in_each_with_its_own_counts() -> None:
    """Rules 1-2 are decided once per distinct kernel, then reported per run and rank with
    that row's calls and time; missing values from a DataFrame (NaN) count as absent."""
    import math

    import pandas as pd

    fp8 = "ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL"
    quant = "void per_token_quant_fp8_kernel<bf16>"
    frame = pd.DataFrame([
        {"run_id": f"r{i}", "rank": rank, "name": name, "category": cat, "dtype": dtype,
         "calls": calls, "total_us": total}
        for i in range(3) for rank in (0, 1)
        for name, cat, dtype, calls, total in (
            (fp8, "allreduce", "f8e4m3", 10 + i, 5.0 * rank),
            ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce", None, 7, math.nan),
            (quant, "cast_quant", None, 7 if rank else 8, 1.0),
        )
    ])  # fmt: skip
    records = frame.to_dict("records")
    assert math.isnan(records[1]["total_us"]) and pd.isna(records[1]["dtype"])
    found = check_kernels(records, load_policy())
    assert [(f.run_id, f.rank, f.check, f.kernel, f.calls, f.total_us, f.dtype) for f in found] == [
        *[(f"r{i}", rank, "low_precision_collective", fp8, 10 + i, 5.0 * rank, "fp8_e4m3")
          for i in range(3) for rank in (0, 1)],
        *[(f"r{i}", 1, "paired_quantize", quant, 7, 1.0, "") for i in range(3)],
    ]  # fmt: skip
    assert quantize_candidates(records) == {"r0", "r1", "r2"}
    columns = {c: frame[c].tolist() for c in frame.columns}
    assert check_runs(columns, load_policy()) == (found, {"r0", "r1", "r2"})


def test_rows_are_read_alike_in_bulk_and_one_by_one() -> None:
    """The bulk reader a fleet's check uses reads every field as the one-row reader does:
    NaN or None is absent, a row without a kernel name is skipped."""
    import math

    base = row("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce", "bf16", calls=3)
    odd = [base, {**base, "name": math.nan}, {**base, "name": None}, {**base, "name": ""},
           {**base, "rank": math.nan}, {**base, "rank": None}, {**base, "dtype": math.nan},
           {**base, "calls": math.nan, "total_us": None}, {**base, "run_id": math.nan},
           {**base, "category": math.nan}, {"name": "k"}]  # fmt: skip
    assert _rows(odd) == [_row(r) for r in odd if _get(r, "name")]
    assert len(_rows(odd)) == len(odd) - 3
