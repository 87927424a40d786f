"""The measured serving rows the serving model is fitted and checked on.

``../shared/fixtures/serving/aic_silicon_blackwell_agg.csv`` (NVIDIA AIConfigurator's silicon
sample, Blackwell, aggregated serving; its README lists the defects). Filter rules, in order:

1. Keep aggregated rows whose instance fits one host (tp x attention-DP <= 8 GPUs) and whose
   model has a config in ``configs/``. Concurrency is the instance's: batch_size x attention-DP,
   the source's per-instance concurrency (AIConfigurator's own check,
   tools/accuracy_regression_testing/predict_silicon_sample.py, passes it as ``batch_size``,
   "max concurrent requests" of cli_estimate). The client's ``silicon_concurrency=`` is that
   times the replicas behind Dynamo's router (Qwen3-32B-NVFP4: 416 = 32 x 13); where it is not
   a whole multiple of it, the client's concurrency is the instance's.
2. vLLM TP+EP rows encoded as attention-DP (tp = attention_dp = T, moe_ep = T x T): read as
   TP=T, EP=T, DP=1 on T GPUs (their TPOT matches the ``tp*_ep*`` rows of the same point).
3. Repeats of one run count once: exact ones (same point, same TPOT, imported from two source
   files); copies rounded to 0.01 ms (a "gap analysis" file restates 71 Qwen3.5 SGLang and
   Kimi-K2.5 vLLM runs as 8.07 / 231.85 for 8.0652 / 231.8479, without their date: the dated
   copy is kept); and one run listed under two model names (same point, TPOT and TTFT to the
   microsecond: 96 of the DeepSeek-V3 rows are DeepSeek-R1 runs, same shapes), kept under the
   first name.
4. MTP (speculative) runs carry no flag. The runs of InferenceX's ``*-mtp`` configs, named by
   the commit that triggered them, are dropped (fitting.fixture_mtp: TRT-LLM DeepSeek-R1 on
   B200 2026-01-14, 02-05, 02-06; SGLang Qwen3.5 FP8 2026-03-20; SGLang DeepSeek-R1 FP8
   2026-03-25, whose run swept the non-MTP config too: there the faster run of a point both
   swept), with their undated copies rounded to 0.01 ms (rule 3's). TRT-LLM DeepSeek-R1
   runs of other days step about 2x faster than a repeat of the same point when speculative:
   where repeats differ, keep the slowest (the non-MTP run). A DeepSeek-V3 run of the same
   point is such a repeat (same shapes).
5. Any other point whose repeats disagree by 2x or more is dropped (which one is right is
   unknowable).
"""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

from fitting.fixture_mtp import split_mtp_runs
from fitting.rows import Row
from planner.cost.serving import ServeLayout, Workload
from planner.errors import PlannerInputError
from planner.specs import hardware, models
from planner.specs.hardware import HardwareSpec
from planner.specs.models import ModelSpec

ROOT = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "serving"
CSV = ROOT / "aic_silicon_blackwell_agg.csv"

# model_path -> config file in configs/ (the checkpoint's shapes; the row sets the format)
CONFIGS = {
    "MiniMaxAI/MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5",
    "meta-llama/Llama-3.1-70B": "meta-llama--Meta-Llama-3.1-70B",
    "moonshotai/Kimi-K2.5": "moonshotai--Kimi-K2.5",
    "openai/gpt-oss-120b": "openai--gpt-oss-120b",
    "deepseek-ai/DeepSeek-R1": "deepseek-ai--DeepSeek-R1",
    "deepseek-ai/DeepSeek-V3": "deepseek-ai--DeepSeek-V3",
    "nvidia/DeepSeek-R1-NVFP4": "deepseek-ai--DeepSeek-R1",
    "nvidia/DeepSeek-V3.1-NVFP4": "nvidia--DeepSeek-V3.1-NVFP4",
    "Qwen/Qwen3-32B": "Qwen--Qwen3-32B",
    "nvidia/Qwen3-32B-NVFP4": "Qwen--Qwen3-32B",
    "Qwen/Qwen3.5-397B-A17B": "Qwen--Qwen3.5-397B-A17B",
    "zhipuai/GLM-5": "zai-org--GLM-5",
}
# The sample's system names -> host presets (the Hopper ones read a fuller copy of the sample).
SYSTEMS = {"b200_sxm": "b200-sxm-8x", "b300_sxm": "b300-sxm-8x", "gb200": "gb200-nvl72-4x",
           "gb300": "gb300-nvl72-4x", "h100_sxm": "h100-sxm-8x", "h200_sxm": "h200-sxm-8x"}  # fmt: skip
# Where the row's format has a real published checkpoint, use its config as shipped (its
# hf_quant_config.json too: ModelOpt's kv_cache_quant_algo FP8 is the KV cache every engine
# runs by default - TRT-LLM's KvCacheConfig.dtype "auto", vLLM's --kv-cache-dtype auto since
# vllm-project/vllm#29980, SGLang's ModelOpt loader).
NVFP4_CONFIGS = {
    "moonshotai/Kimi-K2.5": "nvidia--Kimi-K2.5-NVFP4",
    "deepseek-ai/DeepSeek-R1": "nvidia--DeepSeek-V3.1-NVFP4",
    "deepseek-ai/DeepSeek-V3": "nvidia--DeepSeek-V3.1-NVFP4",
    "nvidia/DeepSeek-R1-NVFP4": "nvidia--DeepSeek-V3.1-NVFP4",
    "zhipuai/GLM-5": "nvidia--GLM-5-NVFP4",
}
FP8_CONFIGS = {
    "meta-llama/Llama-3.1-70B": "nvidia--Llama-3.1-70B-Instruct-FP8",
}
_BYTES = {"fp8": 1.0 + 4.0 / (128 * 128), "nvfp4": 0.5625, "int4_wo": 0.5 + 2.0 / 32}
FP8 = "fp8_e4m3"


def _f(x: str) -> float:
    return float(x) if x not in ("", None) else 0.0


def _parse(r: dict[str, str]) -> Row | None:
    if r["mode"] != "agg" or r["model_path"] not in CONFIGS or r["system"] not in SYSTEMS:
        return None
    tp, dp = int(_f(r["tp_size"])), int(_f(r["attention_dp_size"]))
    mtp, mep = int(_f(r["moe_tp_size"])), int(_f(r["moe_ep_size"]))
    if min(tp, dp) < 1 or tp * dp > 8:
        return None
    conc = instance_concurrency(r, dp)
    if r["backend"] == "vllm" and dp > 1 and dp == tp and mep == tp * dp:
        dp, mep, mtp = 1, tp, 1  # rule 2
    lay = ServeLayout(tp=tp, dp=dp, moe_tp=mtp if mep > 1 else 0, moe_ep=max(mep, 1))
    tpot, ttft = _f(r["silicon_tpot_ms"]), _f(r["silicon_ttft_ms"])
    if tpot <= 0:
        return None
    day = re.search(r"measured=(\d{4}-\d{2}-\d{2})", r["silicon_data_source"] or "")
    return Row(r["id"], r["backend"], r["model_path"], r["moe_quant_mode"], r["system"], lay,
               int(r["isl"]), int(r["osl"]), conc, tpot, ttft,
               day.group(1) if day else "")  # fmt: skip


def instance_concurrency(r: dict[str, str], dp: int) -> int:
    """Concurrent requests one instance served (rule 1): the client's, split over replicas."""
    per_instance = int(_f(r["batch_size"])) * dp
    m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"] or "")
    if not m:
        return per_instance
    client = int(m.group(1))
    replicas = client // per_instance if per_instance else 0
    return per_instance if replicas >= 2 and client == replicas * per_instance else client


def load_rows(path: Path = CSV) -> tuple[list[Row], dict[str, int]]:
    """The filtered rows and how many each rule removed."""
    if not path.is_file():
        raise PlannerInputError(f"{path}: fixture not found")
    with path.open(newline="", encoding="utf-8") as fh:
        raw = list(csv.DictReader(fh))
    parsed = [_parse(r) for r in raw]
    rows = [r for r in parsed if r is not None]
    dropped = {"out of scope (disagg, > 8 GPUs, no config)": len(raw) - len(rows)}
    rows, dropped["runs of InferenceX MTP configs"] = _without_mtp_runs(rows)
    rows, renamed = _one_run_one_row(rows)
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        groups.setdefault(_point(r), []).append(r)
    out: list[Row] = []
    dup = rounded = mtp = spread = 0
    for point, g in groups.items():
        uniq = list({round(r.tpot_ms, 6): r for r in g}.values())
        dup += len(g) - len(uniq)
        kept = _distinct_runs(uniq)
        rounded += len(uniq) - len(kept)
        uniq = kept
        if len(uniq) > 1 and point[0] == "trtllm" and "DeepSeek-R1" in point[1]:
            mtp += len(uniq) - 1
            uniq = [max(uniq, key=lambda r: r.tpot_ms)]
        vals = [r.tpot_ms for r in uniq]
        if max(vals) >= 2 * min(vals):
            spread += len(uniq)
            continue
        out += uniq
    dropped.update({"exact repeats": dup, "copies rounded to 0.01 ms": rounded,
                    "one run under two model names": renamed,
                    "TRT-LLM DeepSeek-R1 MTP repeats": mtp,
                    "repeats disagreeing >= 2x": spread})  # fmt: skip
    return out, dropped


# TensorRT-LLM DeepSeek-V3 runs repeat DeepSeek-R1's points without speculation (the same
# shapes: configs/ differ in no field the engine reads), so rule 4 takes them as repeats.
SAME_SHAPES = {("trtllm", "deepseek-ai/DeepSeek-V3"): "deepseek-ai/DeepSeek-R1"}


def _point(r: Row) -> tuple:
    """The measured point a row belongs to, for rules 3-5."""
    model = SAME_SHAPES.get((r.engine, r.model_path), r.model_path)
    return (r.key[0], model, *r.key[2:])


ROUNDING_MS = 0.005 + 1e-9  # half of the 0.01 ms a rounded copy keeps


def _rounded_copy(a: Row, b: Row) -> bool:
    """Whether ``b`` restates ``a``'s TPOT and TTFT rounded to 0.01 ms (rule 3)."""
    return (abs(a.tpot_ms - b.tpot_ms) <= ROUNDING_MS
            and abs(a.ttft_ms - b.ttft_ms) <= ROUNDING_MS)  # fmt: skip


def _distinct_runs(g: list[Row]) -> list[Row]:
    """One point's rows without rounded copies; the dated (full-precision) copy is kept."""
    kept: list[Row] = []
    for r in sorted(g, key=lambda r: not r.measured):  # stable: dated rows first
        if not any(_rounded_copy(k, r) for k in kept):
            kept.append(r)
    return kept


def _without_mtp_runs(rows: list[Row]) -> tuple[list[Row], int]:
    """Rows less the runs of MTP configs (rule 4) and their undated copies rounded to 0.01 ms
    (rule 3's gap-analysis file), and how many that removed."""
    rows, mtp_runs = split_mtp_runs(rows)
    by_point: dict[tuple, list[Row]] = {}
    for m in mtp_runs:
        by_point.setdefault((m.engine, *m.key[2:]), []).append(m)
    kept = [r for r in rows if not any(_rounded_copy(m, r) for m in
                                       by_point.get((r.engine, *r.key[2:]), ()))]  # fmt: skip
    return kept, len(mtp_runs) + len(rows) - len(kept)


def _one_run_one_row(rows: list[Row]) -> tuple[list[Row], int]:
    """Rows without the copies of one measurement listed under another model name (rule 3):
    the first name a run appears under keeps it."""
    first: dict[tuple, str] = {}
    out = []
    for r in rows:
        run = (*r.key[:1], *r.key[2:], round(r.tpot_ms, 6), round(r.ttft_ms, 6))
        if first.setdefault(run, r.model_path) == r.model_path:
            out.append(r)
    return out, len(rows) - len(out)


_MODEL_CACHE: dict[tuple[str, str], ModelSpec] = {}


def model_for(row: Row) -> ModelSpec:
    """The row's model: its config's shapes in the row's weight format."""
    key = (row.model_path, row.quant)
    if key not in _MODEL_CACHE:
        shipped = {"nvfp4": NVFP4_CONFIGS, "fp8": FP8_CONFIGS}.get(row.quant, {})
        real = shipped.get(row.model_path)
        base = models.load(ROOT / "configs" / f"{real or CONFIGS[row.model_path]}_config.json")
        _MODEL_CACHE[key] = base if real else in_format(base, row.quant)
    return _MODEL_CACHE[key]


def in_format(m: ModelSpec, quant: str) -> ModelSpec:
    """The model with the fixture row's weight format (AIC's gemm/moe quant modes).

    FP8 (block): every linear layer FP8, LM head BF16. NVFP4: MLP and experts FP4; attention
    stays BF16 on MLA models (ModelOpt's DeepSeek/Kimi exclude it) and FP4 on GQA models; FP8
    KV cache (ModelOpt's kv_cache_quant_algo). int4_wo: the checkpoint as shipped (W4A16).
    """
    if quant in ("int4_wo", "", "bf16") or (quant == "nvfp4" and m.native.weights == "mxfp4"):
        return m
    q = "fp8" if quant.startswith("fp8") else quant
    b = _BYTES[q]
    comp = {"attention": b, "dense_mlp": b, "shared": b, "experts": b, "lm_head": 2.0}
    if q == "nvfp4" and m.attention == "mla":
        comp["attention"] = 2.0
    weights = FP8 if q == "fp8" else "nvfp4"
    kv = FP8 if q == "nvfp4" else m.native.kv_cache
    native = replace(m.native, weights=weights, kv_cache=kv)
    return replace(m, native=native, bytes_per_param=tuple(sorted(comp.items())))


def host_for(row: Row) -> HardwareSpec:
    return hardware.preset(SYSTEMS[row.system])


# TensorRT-LLM attention-DP rows ran with attention_dp_config.enable_balance where the
# InferenceX launch script of their model and GPU sets it under DP attention, unchanged since
# each script's first version (SemiAnalysisAI/InferenceX benchmarks/single_node/fixed_seq_len/):
# dsr1_fp4_b200_trt.sh, dsr1_fp8_b200_trt.sh and dsr1_fp8_h200_trt.sh with timeout_iters 60;
# gptoss_fp4_b200_trt.sh with TRT-LLM's default 50 (tensorrt_llm/llmapi/llm_args.py
# ``AttentionDpConfig``); gptoss_fp4_h200_trt.sh leaves it off. (model, system) -> timeout.
ADP_BALANCE_ITERS = {
    ("deepseek-ai/DeepSeek-R1", "b200_sxm"): 60, ("deepseek-ai/DeepSeek-R1", "h200_sxm"): 60,
    ("nvidia/DeepSeek-R1-NVFP4", "b200_sxm"): 60, ("openai/gpt-oss-120b", "b200_sxm"): 50,
}  # fmt: skip


# SGLang rows ran with the --scheduler-recv-interval of their InferenceX launch script as it
# stood when they were measured (benchmarks/single_node/fixed_seq_len/, git history): the
# DeepSeek-R1 and Qwen3.5 scripts poll every 30 steps at concurrency >= 16, else every 10
# ("recv every ~10 requests; if CONC >= 16, relax to ~30"), since their first versions;
# exceptions below; the H100 / H200 scripts never set it before 2026-05 (the sample's last
# dump is 2026-04-27). GLM-5 FP8 never sets it; GLM-5 NVFP4's B200 rows (2026-03-29) predate
# its ``--scheduler-recv-interval 10`` (475cc1dbc, 2026-04-09).
RECV_FIXED = {
    ("zhipuai/GLM-5", "fp8_block"): 1, ("zhipuai/GLM-5", "nvfp4"): 1,
    ("Qwen/Qwen3.5-397B-A17B", "fp8_block", "b300_sxm"): 10,  # qwen3.5_fp8_b300.sh
}  # fmt: skip


HOPPER = ("h100_sxm", "h200_sxm")


def sglang_recv_interval(row: Row) -> int:
    """The row's SGLang --scheduler-recv-interval (1 for the other engines)."""
    if row.engine != "sglang":
        return 1
    fixed = RECV_FIXED.get((row.model_path, row.quant, row.system),
                           RECV_FIXED.get((row.model_path, row.quant)))  # fmt: skip
    if fixed is not None:
        return fixed
    if row.system in HOPPER:
        return 1  # dsr1_fp8_h200.sh, qwen3.5_fp8_h200.sh, glm5_fp8_h200.sh: never set it
    if "DeepSeek" in row.model_path and row.quant.startswith("fp8") and row.layout.tp == 4:
        return 10  # dsr1_fp8_b200.sh / dsr1_fp8_b300.sh, their TP=4 branch
    return 30 if row.concurrency >= 16 else 10


# TensorRT-LLM rows ran with the --max_num_tokens and batch waiting of their InferenceX launch
# script (benchmarks/, git history) as it stood when they were measured, on B200 and H200
# alike (the *_h200_trt*.sh scripts set the same, without DELAY_BATCHING):
# - 70b_fp{8,4}_b200_trt_{slurm,docker}.sh (2025-09-18 to their removal on 2025-10-29;
#   70b_fp8_h200_trt_slurm.sh to 2025-10-31):
#   --max_num_tokens 16384; at 1k/1k below TP=8 batch_wait_timeout_iters 20 and
#   batch_wait_max_tokens_ratio 0.9 ("will improve the performance").
# - gptoss_fp4_b200_trt*.sh (since 2025-09-19): MAX_NUM_TOKENS=20000.
# - dsr1_fp{4,8}_b200_trt*.sh: MAX_NUM_TOKENS = (C + I + 64 + 63) / 64 x 64 (one prompt a
#   step) since 2025-09-18, at least 8192 from 64af5a771 (2026-01-21; dsr1_fp8_h200_trt*.sh
#   from 5409158d0 the same day); dsr1_fp8_b200_trt.sh
#   from ec7bafaae (2026-01-29, its rows measured minutes after) DELAY_BATCHING at 1k/1k from
#   C = 64: batch_wait_timeout_iters 40, batch_wait_max_tokens_ratio 0.8.
TRT_SCRIPTED = ("b200_sxm", "h200_sxm")  # systems whose scripts the rules above read
DSR1_TRT = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "nvidia/DeepSeek-R1-NVFP4")


def trtllm_launch(row: Row) -> tuple[int, int, float]:
    """(--max_num_tokens, batch_wait_timeout_iters, batch_wait_max_tokens_ratio) the row's
    TensorRT-LLM server ran with; (0, 0, 0.0) = TensorRT-LLM's defaults or not TensorRT-LLM."""
    if row.engine != "trtllm" or row.system not in TRT_SCRIPTED:
        return 0, 0, 0.0
    one_k = row.isl == 1024 and row.osl == 1024
    if row.model_path == "meta-llama/Llama-3.1-70B":
        return (16384, 20, 0.9) if one_k and row.layout.tp < 8 else (16384, 0, 0.0)
    if row.model_path == "openai/gpt-oss-120b":
        return 20000, 0, 0.0
    if row.model_path in DSR1_TRT and row.measured:
        tokens = (row.concurrency + row.isl + 64 + 63) // 64 * 64
        if row.measured >= "2026-01-21":
            tokens = max(tokens, 8192)
        delay = (row.system == "b200_sxm" and row.quant.startswith("fp8")
                 and row.measured >= "2026-01-29" and one_k
                 and row.concurrency >= 64 and row.layout.dp == 1)  # fmt: skip
        return (tokens, 40, 0.8) if delay else (tokens, 0, 0.0)
    return 0, 0, 0.0


# vLLM rows ran with the KV-cache dtype and --max-num-batched-tokens of their InferenceX
# launch script (benchmarks/, git history) as it stood when they were measured:
# - 70b_fp{8,4}_b200_{slurm,docker}.sh (all their versions): ``kv-cache-dtype: fp8``.
# - gptoss_fp4_b200*.sh: ``kv-cache-dtype: fp8`` from 2025-12-03 (gptoss_fp4_b200.sh from its
#   first version, 2026-01-05).
# - minimaxm2.5_fp8_b200.sh: ``--kv-cache-dtype fp8`` from 2026-03-27, ``--max-num-batched-tokens
#   $((ISL * 2))`` from bddbf4031 (2026-04-03); minimaxm2.5_fp4_b200.sh: FP8 KV from 2026-04-02,
#   2 x ISL from 2026-04-07; minimaxm2.5_fp{8,4}_b300.sh both from their first versions.
# - kimik2.5_fp4_b200.sh: 2 x ISL from 2026-04-16 (the NVFP4 checkpoint ships FP8 KV already).
# Their --gpu-memory-utilization (0.9 to 0.97) is not modelled per row: the model's 0.9 stands.
def vllm_launch(row: Row) -> tuple[str, int]:
    """(KV-cache dtype, --max-num-batched-tokens) the row's vLLM server ran with; ("", 0) =
    the checkpoint's KV dtype and vLLM's default budget, or not vLLM."""
    if row.engine != "vllm":
        return "", 0
    day, model, fp4 = row.measured, row.model_path, row.quant == "nvfp4"
    if model == "meta-llama/Llama-3.1-70B":
        return FP8, 0
    if model == "openai/gpt-oss-120b":
        return (FP8 if day >= "2025-12-03" else ""), 0
    if model == "MiniMaxAI/MiniMax-M2.5":
        fp8_kv = day >= ("2026-04-02" if fp4 else "2026-03-27")
        twice = day >= ("2026-04-07" if fp4 else "2026-04-03")
        return (FP8 if fp8_kv else ""), (2 * row.isl if twice else 0)
    if model == "moonshotai/Kimi-K2.5" and fp4 and row.system == "b200_sxm":
        return "", (2 * row.isl if day >= "2026-04-16" else 0)
    return "", 0


def workload_for(row: Row) -> Workload:
    balance = 0
    if row.engine == "trtllm" and row.layout.dp > 1:
        balance = ADP_BALANCE_ITERS.get((row.model_path, row.system), 0)
    tokens, wait_iters, wait_ratio = trtllm_launch(row)
    kv_dtype, vllm_tokens = vllm_launch(row)
    return Workload(isl=row.isl, osl=row.osl, engine=row.engine, adp_balance_iters=balance,
                    recv_interval=sglang_recv_interval(row), token_budget=tokens or vllm_tokens,
                    kv_dtype=kv_dtype,
                    batch_wait_iters=wait_iters, batch_wait_ratio=wait_ratio)
