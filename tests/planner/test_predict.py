"""``python -m planner predict``: the JSON contract, the policy verdict and every bad input."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import numpy as np
import pytest

from planner.cost import serving, serving_means
from planner.cost.params import FITTED
from planner.cost.step import prefill_cost
from planner.cost.types import ServeLayout, Workload
from planner.errors import PlannerInputError
from planner.predict import build_parser, run
from planner.specs import hardware, models
from planner.specs.engines import ENGINES
from planner.tradeoff.instances import Instance
from tests.helpers import FIXTURES, planner_cli

CONFIGS = FIXTURES / "serving" / "configs"
needs_configs = pytest.mark.skipif(not CONFIGS.is_dir(), reason=f"{CONFIGS} absent")


def predict_cli(*args: str) -> subprocess.CompletedProcess:
    return planner_cli("predict", *args)


def answer(*args: str) -> dict:
    return run(build_parser().parse_args(list(args)))


def test_json_contract_one_point_per_concurrency() -> None:
    p = predict_cli("--model", "minimax-m2.5", "--host", "h200-sxm-8x", "--tp", "4",
                    "--isl", "1024", "--osl", "1024", "--concurrency", "1,8,64", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert [pt["concurrency"] for pt in data["points"]] == [1, 8, 64]
    for pt in data["points"]:
        assert {"concurrency", "tpot_ms", "ttft_ms", "output_tok_s"} <= set(pt)
        assert pt["tpot_ms"] > 0 and pt["ttft_ms"] > 0 and pt["output_tok_s"] > 0
        assert pt["tpot_ms"] == pytest.approx(sum(pt["breakdown_ms"].values()), abs=0.01)
    assert data["layout"] == {"tp": 4, "dp": 1, "ep": False, "moe_tp": 4, "moe_ep": 1,
                              "all2all_backend": "", "allreduce": "nccl", "replicas": 1,
                              "name": "TP=4"}  # fmt: skip
    for pt in data["points"]:  # the measured-error band of vLLM on this format
        assert pt["tpot_ms_low"] <= pt["tpot_ms_high"] and pt["ttft_ms_low"] < pt["ttft_ms_high"]
    assert data["band"]["tpot"].startswith("vllm/fp8: measured within")
    assert data["gpus"] == 4 and data["policy"]["compliant"] is True
    assert all(a["source"] for a in data["assumptions"])
    assert {"bw_eff", "kernel_us", "engine scheduler", "host", "model"} <= {
        a["what"] for a in data["assumptions"]}  # fmt: skip


def test_more_concurrency_costs_tpot_and_buys_throughput() -> None:
    d = answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--isl", "1024",
               "--osl", "1024", "--concurrency", "1,4,16,64,256")  # fmt: skip
    tpot = [p["tpot_ms"] for p in d["points"]]
    tput = [p["output_tok_s"] for p in d["points"]]
    assert tpot == sorted(tpot) and tput == sorted(tput)


def test_clients_past_the_kv_capacity_queue_without_lowering_throughput() -> None:
    # Kimi-K2.5 at TP=8 on H200 holds about 92 sequences of 8,192 + 1,024 tokens: the
    # clients past that wait for room in the queue (TTFT), while the engine still streams
    # the running sequences' tokens, so tokens/s holds its level.
    d = answer("--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--tp", "8", "--isl", "8192",
               "--osl", "1024", "--concurrency", "64,128,256", "--bench", "vllm",
               "--num-prompts", "512", "--json")  # fmt: skip
    cap = d["kv_capacity_seqs_per_rank"]
    at64, at128, at256 = d["points"]
    assert at64["running_mean"] > 0.9 * 64 and at64["queued_mean"] < 8 and 64 < cap < 128
    for pt in (at128, at256):
        assert pt["running_mean"] < 1.05 * cap and pt["queued_mean"] > 20
    assert at256["queued_mean"] > at128["queued_mean"] + 80
    assert at256["ttft_ms"] > 2 * at128["ttft_ms"] > 4 * at64["ttft_ms"]
    assert at256["output_tok_s"] == pytest.approx(at128["output_tok_s"], rel=0.15)
    assert at128["output_tok_s"] > at64["output_tok_s"]


def test_attention_dp_moe_runs_the_clients_tokens_not_dp_times_the_busiest_ranks() -> None:
    # 9 clients on DP=8: one rank holds 2 sequences (the step waits for it), but the experts
    # see 9 tokens, not 16, and 7 of the 9 prompts are alone on their rank: TPOT and TTFT
    # climb between multiples of DP, and tokens/s never falls.
    d = answer("--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--tp", "1", "--dp", "8",
               "--ep", "--isl", "1024", "--osl", "1024", "--concurrency", "8,9,12,16,17")  # fmt: skip
    pts = d["points"]
    assert [p["running_per_rank"] for p in pts] == [1, 2, 2, 2, 3]  # the busiest rank
    tpot = [p["tpot_ms"] for p in pts]
    assert tpot == sorted(tpot) and len(set(tpot)) == len(tpot)
    ttft = [p["ttft_ms"] for p in pts]
    assert ttft == sorted(ttft) and len(set(ttft)) == len(ttft)
    tput = [p["output_tok_s"] for p in pts]
    assert tput == sorted(tput)


def test_decode_only_has_no_prefill_interference() -> None:
    common = ("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--osl", "1024",
              "--concurrency", "64")  # fmt: skip
    dec = answer(*common, "--isl", "1")["points"][0]
    agg = answer(*common, "--isl", "8192")["points"][0]
    assert dec["breakdown_ms"]["prefill"] < 0.01 * agg["breakdown_ms"]["prefill"]
    assert agg["breakdown_ms"]["prefill"] > 0 and agg["tpot_ms"] > dec["tpot_ms"]
    assert agg["ttft_ms"] > dec["ttft_ms"]


def test_fp8_kv_answers_and_is_marked_as_breaking_the_policy() -> None:
    d = answer("--model", "kimi-k2.5", "--host", "h200-sxm-8x", "--tp", "8", "--isl", "1024",
               "--osl", "1024", "--concurrency", "8", "--kv-dtype", "fp8")  # fmt: skip
    assert d["points"][0]["tpot_ms"] > 0
    assert d["policy"]["compliant"] is False and d["policy"]["violations"]


def test_attention_dp_with_expert_parallel() -> None:
    d = answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "1", "--dp", "8",
               "--ep", "--isl", "1024", "--osl", "1024", "--concurrency", "8,256")  # fmt: skip
    assert d["layout"]["moe_ep"] == 8 and d["gpus"] == 8
    assert d["points"][0]["breakdown_ms"]["all_to_all"] > 0  # AllGather + ReduceScatter per MoE layer
    assert d["points"][0]["breakdown_ms"]["allreduce"] == 0  # TP=1: no AllReduce
    assert {c["op"] for c in d["collectives"]} == {"all_gather", "reduce_scatter"}


def test_a_lone_prompt_spreads_its_experts_over_the_ep_group() -> None:
    m, hw = models.preset("kimi-k2.5"), hardware.preset("h20-141g-8x")
    w = Workload(isl=1024, osl=1024)
    dp = prefill_cost(m, hw, ServeLayout(tp=1, dp=8, moe_ep=8), w, FITTED)
    tp = prefill_cost(m, hw, ServeLayout(tp=8), w, FITTED)
    assert dp.expert_ms == pytest.approx(tp.expert_ms)  # 8 GPUs run its experts either way
    assert dp.attention_ms > 4 * tp.attention_ms  # its attention runs on one GPU, not eight


def test_attention_dp_below_dp_clients_prefills_only_the_busy_ranks() -> None:
    d = answer("--model", "kimi-k2.5", "--host", "h20-141g-8x", "--tp", "1", "--dp", "8",
               "--ep", "--isl", "1024", "--osl", "1024", "--concurrency", "1,8")  # fmt: skip
    one, eight = d["points"]
    assert one["running_per_rank"] == eight["running_per_rank"] == 1
    # Eight ranks' prompts load the experts on every GPU eight times as much as one's; the
    # busy rank's attention share is the same.
    # one client: no other prompt ever shares its decode steps
    assert eight["breakdown_ms"]["prefill"] > 0 == one["breakdown_ms"]["prefill"]
    assert one["ttft_ms"] < eight["ttft_ms"] and one["tpot_ms"] < eight["tpot_ms"]


def test_sglang_decode_waits_for_whole_prefill_passes() -> None:
    def point(engine: str, conc: str) -> dict:
        return answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--isl",
                      "1024", "--osl", "1024", "--engine", engine,
                      "--concurrency", conc)["points"][0]  # fmt: skip

    vllm, sglang, step = point("vllm", "64"), point("sglang", "64"), point("vllm", "1")
    # vLLM's prompt chunks ride on decode steps: their tokens' compute only. SGLang runs a
    # prompt as a pass of its own that streams the weights too, and its decode batch waits:
    # 64 clients start one every 1024 / 64 = 16 steps on average, so about a sixteenth of a
    # weight-streaming step more per output token.
    extra = sglang["breakdown_ms"]["prefill"] - vllm["breakdown_ms"]["prefill"]
    assert extra == pytest.approx(64 / 1024 * step["tpot_ms"], rel=0.3)
    assert sglang["tpot_ms"] > vllm["tpot_ms"]


def test_every_host_preset_answers() -> None:
    for host in hardware.HARDWARE_PRESETS:
        d = answer("--model", "minimax-m2.5", "--host", host, "--tp", "8", "--isl", "1024",
                   "--osl", "256", "--concurrency", "1,32")  # fmt: skip
        assert d["points"][1]["tpot_ms"] > d["points"][0]["tpot_ms"] > 0, host


def test_slower_memory_means_slower_decode() -> None:
    def tpot(host: str) -> float:
        return answer("--model", "minimax-m2.5", "--host", host, "--tp", "4", "--isl", "1",
                      "--osl", "512", "--concurrency", "1")["points"][0]["tpot_ms"]  # fmt: skip

    assert tpot("a100-sxm-8x") > tpot("h100-sxm-8x") > tpot("b200-sxm-8x")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--host", "h999"], "--host 'h999': not a host preset or a host file"),
        (["--model", "/nonexistent/config.json"], "neither a model preset"),
        (["--gpus", "3"], "--gpus 3"),
        (["--tp", "16"], "needs 16 GPUs"),
        (["--concurrency", "a,b"], "--concurrency"),
        (["--isl", "0"], "--isl must be >= 1"),
        (["--model", "minimax-m2.5", "--tp", "5"], "heads do not split"),
        (["--all2all-backend", "deepep_low_latency"], "needs --ep"),
        (["--replicas", "2"], "needs 16 GPUs"),
        (["--num-prompts", "-3"], "--num-prompts must be >= 0"),
        (["--token-budget", "-1"], "--token-budget must be >= 0"),
        (["--engine", "trtllm", "--isl", "8192", "--token-budget", "4096"],
         "--token-budget 4096 < --isl 8192: TensorRT-LLM"),
        (["--adp-balance-iters", "60"], "--adp-balance-iters: TensorRT-LLM's attention-DP"),
        (["--engine", "trtllm", "--adp-balance-iters", "60"], "--dp >= 2"),
        (["--engine", "trtllm", "--tp", "1", "--dp", "8", "--adp-balance-iters", "-1"],
         "a timeout >= 0"),
        (["--scheduler-recv-interval", "30"], "--scheduler-recv-interval: SGLang's"),
        (["--engine", "sglang", "--scheduler-recv-interval", "0"], ">= 1 with --engine sglang"),
        (["--batch-wait-iters", "20", "--batch-wait-ratio", "0.9"],
         "--batch-wait-iters / --batch-wait-ratio: TensorRT-LLM's"),
        (["--engine", "trtllm", "--tp", "1", "--dp", "8", "--batch-wait-iters", "20"],
         "with --engine trtllm and --dp 1"),
        (["--engine", "trtllm", "--batch-wait-ratio", "1.5"], "between 0 and 1"),
        (["--allreduce", "fast"], "with full NVLink, vLLM's TP already runs its custom"),
    ],
)
def test_bad_input_is_one_line_exit_1(args: list[str], needle: str) -> None:
    base = {"--model": "deepseek-v3", "--host": "b200-sxm-8x", "--tp": "8", "--isl": "128",
            "--osl": "128", "--concurrency": "1"}  # fmt: skip
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    p = predict_cli(*[x for kv in base.items() for x in kv])
    assert p.returncode == 1
    assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_deepep_at_dp1_is_sglang_only() -> None:
    p = predict_cli("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--ep",
                    "--all2all-backend", "deepep_low_latency", "--isl", "128", "--osl", "128",
                    "--concurrency", "1")  # fmt: skip
    assert p.returncode == 1 and "only when DP > 1" in p.stderr and "--engine sglang" in p.stderr
    ok = answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--ep",
                "--all2all-backend", "deepep_low_latency", "--engine", "sglang", "--isl", "128",
                "--osl", "128", "--concurrency", "1")  # fmt: skip
    assert ok["points"][0]["breakdown_ms"]["all_to_all"] > 0  # dispatch + combine per MoE layer


def test_model_that_does_not_fit_is_an_error_not_a_guess() -> None:
    with pytest.raises(PlannerInputError, match="does not fit"):
        answer("--model", "kimi-k2.5", "--host", "l40s-pcie-8x", "--tp", "8", "--isl", "1",
               "--osl", "16", "--concurrency", "1")  # fmt: skip


@needs_configs
def test_ep_on_a_dense_model_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="no routed experts"):
        answer("--model", str(CONFIGS / "meta-llama--Meta-Llama-3.1-70B_config.json"),
               "--host", "h100-sxm-8x", "--tp", "8", "--ep", "--isl", "1", "--osl", "16",
               "--concurrency", "1")  # fmt: skip


def test_usage_error_is_exit_2() -> None:
    assert predict_cli("--host", "h100-sxm-8x").returncode == 2


def test_longer_than_the_model_context_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="exceeds .* context of 163840 tokens"):
        answer("--model", "deepseek-v3", "--host", "h200-sxm-8x", "--tp", "8",
               "--isl", "160000", "--osl", "4096", "--concurrency", "1")  # fmt: skip


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_concurrency_beyond_kv_capacity_waits_in_ttft_not_in_tpot(engine: str) -> None:
    d = answer("--model", "minimax-m2.5", "--host", "h100-sxm-8x", "--tp", "4", "--isl", "8192",
               "--osl", "1024", "--concurrency", "16,1024", "--engine", engine,
               "--bench", "vllm", "--num-prompts", "2048")  # fmt: skip
    small, big = d["points"]
    cap = d["kv_capacity_seqs_per_rank"]
    assert big["running_mean"] < 1.1 * cap < 1024 and big["queued_mean"] > 500
    assert big["ttft_ms"] > 20 * small["ttft_ms"]  # queued for room in the KV cache
    # the running requests decode at the batch the cache holds: the wait is not in TPOT
    assert big["tpot_ms"] < 1024 / cap * small["tpot_ms"] / 4


def test_downcast_flags_answer_and_break_the_policy() -> None:
    common = ("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "1", "--dp", "8",
              "--ep", "--all2all-backend", "deepep_low_latency", "--isl", "1024", "--osl",
              "1024", "--concurrency", "64")  # fmt: skip
    full, fp8 = answer(*common), answer(*common, "--a2a-dtype", "fp8")
    assert full["policy"]["compliant"] is True
    assert {v["rule"] for v in fp8["policy"]["violations"]} == {"communication-native"}
    # DeepSeek-V3 dispatches FP8 natively: only the combine payload shrinks.
    assert fp8["points"][0]["breakdown_ms"]["all_to_all"] < full["points"][0]["breakdown_ms"][
        "all_to_all"]  # fmt: skip


def test_replicas_split_the_clients_and_add_their_throughput() -> None:
    one = answer("--model", "minimax-m2.5", "--host", "h200-sxm-8x", "--tp", "4", "--isl",
                 "1024", "--osl", "1024", "--concurrency", "32")["points"][0]  # fmt: skip
    two = answer("--model", "minimax-m2.5", "--host", "h200-sxm-8x", "--tp", "4", "--replicas",
                 "2", "--isl", "1024", "--osl", "1024", "--concurrency", "64")["points"][0]  # fmt: skip
    assert two["tpot_ms"] == pytest.approx(one["tpot_ms"])
    assert two["output_tok_s"] == pytest.approx(2 * one["output_tok_s"], rel=1e-3)


def test_more_prompts_per_client_means_less_first_wave_in_ttft() -> None:
    def ttft(n: str) -> float:
        return answer("--model", "minimax-m2.5", "--host", "h200-sxm-8x", "--tp", "4",
                      "--isl", "8192", "--osl", "1024", "--concurrency", "64",
                      "--num-prompts", n)["points"][0]["ttft_ms"]  # fmt: skip

    # 64 prompts: all arrive at once and queue behind each other; 6400: later, drifted waves
    assert ttft("64") > 3 * ttft("6400")
    # percentiles as the benchmark reports them: the first wave's long wait is the tail
    pct = answer("--model", "minimax-m2.5", "--host", "h200-sxm-8x", "--tp", "4", "--isl",
                 "8192", "--osl", "1024", "--concurrency", "64")["points"][0]["percentiles"]
    assert pct["ttft_ms"]["p50"] < pct["ttft_ms"]["p90"] < pct["ttft_ms"]["p99"]
    assert pct["tpot_ms"]["p50"] <= pct["tpot_ms"]["p90"] <= pct["tpot_ms"]["p99"]


def test_sglang_dp_attention_splits_its_chunk_over_the_ranks() -> None:
    """SGLang's server_args.py: ``_handle_data_parallelism`` divides chunked_prefill_size by
    dp_size under DP attention, after the memory reserve was sized from the whole chunk."""
    b200, sglang = hardware.preset("b200-sxm-8x"), ENGINES["sglang"]
    assert sglang.token_budget(b200, 1024) == 16384
    assert sglang.token_budget(b200, 1024, attention_dp=8) == 2048
    assert ENGINES["vllm"].token_budget(b200, 1024, attention_dp=8) == 8192  # one per DP engine


def test_the_launched_token_budget_sets_the_prompt_chunks() -> None:
    """A server launched with a smaller budget (vLLM --max-num-batched-tokens) prefills an
    8,192-token prompt in more steps, each paying the step's weights and kernels again; the
    decode step is the same. The engine's own default gives the same answer as no flag."""

    def point(*extra: str) -> dict:
        return answer("--model", "kimi-k2.5", "--host", "b200-sxm-8x", "--tp", "8", "--isl",
                      "8192", "--osl", "1024", "--concurrency", "1", *extra)["points"][0]  # fmt: skip

    default, same = point(), point("--token-budget", "8192")
    assert same["ttft_ms"] == default["ttft_ms"] and same["tpot_ms"] == default["tpot_ms"]
    ttft = [point("--token-budget", str(n))["ttft_ms"] for n in (8192, 4096, 2048, 1024)]
    assert ttft == sorted(ttft) and ttft[-1] > ttft[0]
    assert point("--token-budget", "1024")["tpot_ms"] == default["tpot_ms"]
    said = {a["what"]: a["value"] for a in answer(
        "--model", "kimi-k2.5", "--host", "b200-sxm-8x", "--tp", "8", "--isl", "8192",
        "--osl", "1024", "--concurrency", "1", "--token-budget", "2048")["assumptions"]}  # fmt: skip
    assert "token budget 2048 per step (--token-budget)" in said["engine scheduler"]


def test_sglang_sizes_its_reserve_and_rank_chunks_from_the_launched_chunk() -> None:
    """server_args.py: the memory reserve grows 1.5 MiB per chunk token and DP attention
    divides ``--chunked-prefill-size`` over the ranks, as for its default."""
    b200, sglang = hardware.preset("b200-sxm-8x"), ENGINES["sglang"]
    assert sglang.token_budget(b200, 1024, attention_dp=8, launched=4096) == 512

    def seqs(*extra: str) -> float:
        return answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--isl",
                      "1024", "--osl", "1024", "--engine", "sglang", "--concurrency", "1",
                      *extra)["kv_capacity_seqs_per_rank"]  # fmt: skip

    assert seqs("--token-budget", "4096") > seqs() == seqs("--token-budget", "16384")


def test_trtllm_admits_only_what_fits_to_the_last_output_token() -> None:
    def seqs(engine: str, osl: str) -> float:
        return answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--isl",
                      "1024", "--osl", osl, "--engine", engine, "--concurrency", "1",
                      "--json")["kv_capacity_seqs_per_rank"]  # fmt: skip

    # TRT-LLM's GUARANTEED_NO_EVICT reserves a request's whole I + O tokens; vLLM holds what
    # it has written, I + O / 2 on average over a request's life.
    assert seqs("trtllm", "8192") / seqs("trtllm", "1024") == pytest.approx(2048 / 9216, rel=0.01)
    assert seqs("vllm", "8192") / seqs("vllm", "1024") == pytest.approx(1536 / 5120, rel=0.01)


def test_a_prompt_crosses_the_tp_allreduces_in_ttft() -> None:
    """Prompt activations go through every layer's AllReduce, a chunk at a time. Each GPU of
    a ring AllReduce sends 2 (n - 1) / n of the buffer over its link, so a TP=8 prompt of
    8,192 tokens over PCIe takes at least that many bytes / link bandwidth longer than over
    a link a hundred times faster. The TPOT's prompt interference stays compute only: its
    collectives are in the step's AllReduce term."""
    m, pcie = models.preset("kimi-k2.5"), hardware.preset("rtx-pro-6000-pcie-8x")
    fast = dataclasses.replace(pcie, link_gbps=pcie.link_gbps * 100)
    lay, w, one = ServeLayout(tp=8), Workload(isl=8192, osl=1024), np.ones(1)
    slow_p, fast_p = (serving.predict(m, hw, lay, w, one) for hw in (pcie, fast))
    calls = 2 * m.num_layers + 1
    ring = 2 * 7 / 8 * w.isl * m.hidden * 2 * calls  # bytes each GPU sends for the prompt
    bound_ms = ring / (pcie.link_gbps * 1e9) * 1e3 * (1 - 1 / 100)
    assert slow_p.ttft_ms[0] - fast_p.ttft_ms[0] > bound_ms > 300
    assert slow_p.breakdown_ms["prefill"][0] == pytest.approx(fast_p.breakdown_ms["prefill"][0])


def test_trtllm_adp_balance_holds_later_prompts_not_decode_steps() -> None:
    """py_executor.py ``_balance_adp_requests``: with enable_balance a later prompt waits for
    every rank to hold one or for timeout_iters steps; with few arrivals per step most wait
    for the timeout. TPOT barely changes (the decode steps are the same)."""

    def run_at(conc: str, *extra: str) -> dict:
        return answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "1", "--dp",
                      "8", "--ep", "--engine", "trtllm", "--isl", "1024", "--osl", "1024",
                      "--concurrency", conc, *extra)  # fmt: skip

    off, on = run_at("64")["points"][0], run_at("64", "--adp-balance-iters", "60")["points"][0]
    assert on["tpot_ms"] == pytest.approx(off["tpot_ms"], rel=0.05)
    waited = (on["ttft_ms"] - off["ttft_ms"]) / on["tpot_ms"]
    assert 15 < waited < 60  # steps: the first wave meets idle ranks, later prompts wait
    said = {a["what"]: a["value"] for a in run_at("64", "--adp-balance-iters", "60")["assumptions"]}
    assert "attention-DP balance on (timeout_iters 60)" in said["engine scheduler"]


def test_sglang_recv_interval_holds_later_prompts_for_the_next_poll() -> None:
    """scheduler_recv_skipper.py: a decode step adds 1 to the counter, a prefill 1,000, and new
    requests are read when it reaches --scheduler-recv-interval. While the engine decodes a
    later prompt waits for the next poll (about R / 2 steps) and is prefilled with the others
    that came meanwhile; the first wave (an idle engine) does not wait."""

    def run_at(*extra: str) -> dict:
        return answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8",
                      "--engine", "sglang", "--isl", "1024", "--osl", "1024",
                      "--concurrency", "64", *extra)  # fmt: skip

    off, on = run_at()["points"][0], run_at("--scheduler-recv-interval", "30")["points"][0]
    waited = (on["ttft_ms"] - off["ttft_ms"]) / on["tpot_ms"]
    assert 8 < waited < 25
    # fewer prefill passes interrupt the decode steps: TPOT does not rise
    assert on["tpot_ms"] <= off["tpot_ms"] * 1.01
    first = ("--num-prompts", "64")  # one wave: every prompt meets an idle engine
    assert run_at(*first, "--scheduler-recv-interval", "30")["points"][0]["ttft_ms"] == \
        run_at(*first)["points"][0]["ttft_ms"]  # fmt: skip
    said = {a["what"]: a["value"] for a in run_at("--scheduler-recv-interval", "30")["assumptions"]}
    assert "polls for new requests every 30 decode steps" in said["engine scheduler"]


def test_trtllm_batch_waiting_holds_later_prompts_until_the_timeout() -> None:
    """py_executor.py ``_waiting_requests``: while requests decode, prompts are held until
    their tokens reach batch_wait_max_tokens_ratio x max_num_tokens or for
    batch_wait_timeout_iters steps. At concurrency 4 four 1k prompts never fill 0.9 x 16384,
    so a later prompt waits the 20 steps; an idle engine (one wave) does not wait."""

    def run_at(*extra: str) -> dict:
        return answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8",
                      "--engine", "trtllm", "--isl", "1024", "--osl", "1024",
                      "--concurrency", "4", "--token-budget", "16384", *extra)  # fmt: skip

    held = ("--batch-wait-iters", "20", "--batch-wait-ratio", "0.9")
    off, on = run_at()["points"][0], run_at(*held)["points"][0]
    assert on["tpot_ms"] == pytest.approx(off["tpot_ms"], rel=0.01)
    waited = (on["ttft_ms"] - off["ttft_ms"]) / on["tpot_ms"]
    assert 12 < waited < 20  # later requests (most of the 40) wait 20 steps
    first = ("--num-prompts", "4")
    assert run_at(*first, *held)["points"][0]["ttft_ms"] == run_at(*first)["points"][0]["ttft_ms"]
    said = {a["what"]: a["value"] for a in run_at(*held)["assumptions"]}
    assert "batch waiting (batch_wait_timeout_iters 20" in said["engine scheduler"]
    assert "--batch-wait-iters 20 --batch-wait-ratio 0.9" in " ".join(
        Instance(ServeLayout(8), 1, Workload(1024, 1024, "trtllm", batch_wait_iters=20,
                                             batch_wait_ratio=0.9)).predict_args())  # fmt: skip


def test_the_output_says_how_each_point_was_simulated() -> None:
    d = answer("--model", "deepseek-v3", "--host", "b200-sxm-8x", "--tp", "8", "--isl", "256",
               "--osl", "64", "--concurrency", "4,16", "--bench", "vllm", "--num-prompts",
               "3000", "--json")  # fmt: skip
    sim = d["points"][0]["simulation"]
    assert sim["prompts"] == 3000 and sim["requests_simulated"] < 3000
    assert sim["converged_after_requests"] and not sim["interpolated"]
    for pt in d["points"]:
        assert pt["queued_mean"] >= 0 and 0 < pt["running_mean"] <= pt["concurrency"]
        assert pt["e2el_ms"] > pt["ttft_ms"] and pt["itl_ms"] > 0


def test_the_fit_prices_the_same_schedules_and_steps_as_predict() -> None:
    """The fit evaluates each fixture row from its schedule's aggregated step shapes
    (serving.mean_latencies); those means are predict's, for every engine and with DP."""
    m, hw = models.preset("deepseek-v3"), hardware.preset("b200-sxm-8x")
    c = np.array([1.0, 16.0, 128.0])
    for engine in ENGINES:
        for lay in (ServeLayout(tp=8), ServeLayout(tp=1, dp=8, moe_tp=1, moe_ep=8)):
            w = Workload(1024, 256, engine)
            pr = serving.predict(m, hw, lay, w, c)
            tpot, ttft = serving_means.mean_latencies(m, hw, lay, w, c)
            assert tpot == pytest.approx(pr.tpot_ms, rel=2e-3), (engine, lay)
            assert ttft == pytest.approx(pr.ttft_ms, rel=2e-3), (engine, lay)
