#!/usr/bin/env bash
# Check every GPU path of Stepscope on a real GPU host, in one go (at most 8 minutes on one
# GPU, 14 with two or more). One PASS/FAIL line per check; exit 0 only when every check passes.
#
#   bash scripts/gpu-check.sh [--dry-run] OUTDIR
#
# OUTDIR gets a fresh store (store/), each check's stdout/stderr (logs/), the profile's CUDA
# traces (traces/) and the report (gpu-check-report.txt). --dry-run prints what would run.
# PYTHON picks the interpreter (default .venv/bin/python); GPU_CHECK_GPUS overrides the GPU
# count (the dry run assumes 2, so it lists every check). The whole run has a budget
# (GPU_CHECK_BUDGET_S: 480 s on one GPU, 840 s with two or more): each check's timeout is cut
# to what is left, and a check with nothing left fails as not run.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: bash scripts/gpu-check.sh [--dry-run] OUTDIR" >&2
  exit 2
fi
OUT=$(realpath -m "$1")
PY=${PYTHON:-.venv/bin/python}
STORE=$OUT/store/stepscope.duckdb
REPORT=$OUT/gpu-check-report.txt
VERIFY=(scripts/gpu_check_verify.py)

if [[ $DRY -eq 1 ]]; then
  GPUS=${GPU_CHECK_GPUS:-2}
else
  GPUS=${GPU_CHECK_GPUS:-$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)}
fi
N=$(( GPUS > 8 ? 8 : GPUS ))
BUDGET=${GPU_CHECK_BUDGET_S:-$(( GPUS >= 2 ? 840 : 480 ))}
COMM_SIZES=(--tokens 1,4,16,64 --bytes 1M,16M --iters 20 --warmup 5 --timeout 100)
PROFILE=(--device cuda --preset minimax-m2.5 --scale 0.0625 --layers 2 --steps 3 --batch 8
         --context 64 --timeout 120 --startup-timeout 200)

FAILED=0
declare -a LINES=()

# check NAME TIMEOUT_S VERIFY_CHECK VERIFY_ARG -- ENV=VALUE... COMMAND...
check() {
  local name=$1 limit=$2 what=$3 arg=$4
  shift 5  # the "--" too
  if [[ $DRY -eq 1 ]]; then
    printf '%-18s timeout %3ss  %s\n%-18s verify: %s %s\n' "$name" "$limit" "$*" "" "$what" "$arg"
    return 0
  fi
  local log=$OUT/logs/$name start=$SECONDS status detail line
  local left=$(( BUDGET - SECONDS ))
  if (( left < 15 )); then
    line=$(printf 'FAIL  %-18s %4ss  not run: the %ss budget is spent' "$name" 0 "$BUDGET")
    echo "$line"; LINES+=("$line"); FAILED=$(( FAILED + 1 ))
    return 0
  fi
  (( limit > left )) && limit=$left
  set +e
  env STEPSCOPE_STORE="$STORE" STEPSCOPE_LOCK_DIR="$OUT/locks" \
    timeout -k 10 "$limit" "$@" >"$log.out" 2>"$log.err"
  local code=$?
  set -e
  if [[ $code -eq 124 || $code -eq 137 ]]; then
    status=FAIL; detail="timed out after ${limit}s (see logs/$name.err)"
  elif [[ $code -ne 0 ]]; then
    status=FAIL; detail="exit $code: $(tail -n 1 "$log.err" 2>/dev/null | cut -c1-300)"
  elif detail=$("$PY" "${VERIFY[@]}" "$what" "$log.out" "$STORE" "$arg" 2>&1); then
    status=PASS
  else
    status=FAIL
  fi
  line=$(printf '%s  %-18s %4ss  %s' "$status" "$name" "$(( SECONDS - start ))" "$detail")
  echo "$line"
  LINES+=("$line")
  [[ $status == PASS ]] || FAILED=$(( FAILED + 1 ))
}

# The profile keeps its traces under traces/<run id>/: the trace check ingests that folder.
trace_dir() {
  if [[ $DRY -eq 1 ]]; then echo "$OUT/traces/<profile run id>"; return; fi
  find "$OUT/traces" -mindepth 1 -maxdepth 1 -type d -newer "$OUT/.started" 2>/dev/null | sort | tail -n 1
}

# The run id a check committed (its --json summary's last line), for a check that reads it.
run_of() {
  if [[ $DRY -eq 1 ]]; then echo "<$1 run id>"; return; fi
  "$PY" -c 'import json, sys
lines = [ln for ln in open(sys.argv[1]) if ln.startswith("{")]
print(json.loads(lines[-1]).get("run_id", "") if lines else "")' "$OUT/logs/$1.out" 2>/dev/null
}

if [[ $DRY -eq 0 ]]; then
  mkdir -p "$OUT/logs" "$OUT/store" "$OUT/traces" "$OUT/locks"
  rm -f "$STORE" "$STORE.wal"
  touch "$OUT/.started"
  SECONDS=0
  {
    echo "# Stepscope gpu-check on $(hostname) at $(date -u +%FT%TZ)"
    echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $GPUS GPU(s) visible to torch"
    nvidia-smi -L 2>/dev/null | sed 's/^/# /' || echo "# nvidia-smi not found"
  } | tee "$REPORT"
else
  echo "# dry run: $GPUS GPU(s) assumed, budget ${BUDGET}s; commands run from $(pwd), store $STORE"
fi
if [[ $DRY -eq 0 && $GPUS -lt 1 ]]; then
  echo "FAIL  torch sees no CUDA device ($PY); nothing else can run" | tee -a "$REPORT"
  exit 1
fi

check gpu 60 gpu "" -- "$PY" -m collectors gpu --json
check comm-eager 120 comm eager:1 -- "$PY" -m collectors comm --json --device cuda --nproc 1 \
  --no-graph "${COMM_SIZES[@]}"
check comm-graph 120 comm graph:1 -- "$PY" -m collectors comm --json --device cuda --nproc 1 \
  --graph "${COMM_SIZES[@]}"
check comm-default 90 comm default:1 -- "$PY" -m collectors comm --json --device cuda \
  --nproc 1 --ops all_reduce --tokens 1,16 --iters 10
check profile 240 profile gemm -- "$PY" -m collectors profile --json --tp 1 "${PROFILE[@]}" \
  --keep-traces "$OUT/traces"
check trace 90 trace gemm -- "$PY" -m collectors trace --json "$(trace_dir)"
# The profiled step against its floors: the GPU's name must be in the known-GPU table and no
# category may beat its floor (bytes over spec bandwidth, FLOPs over spec peak, 1 us a kernel).
check floor 60 floor "" -- "$PY" -m collectors floor --json "$(run_of profile)"
if [[ $N -ge 2 ]]; then
  # A LOCAL_RANK left in the shell must not pin every spawned rank to one GPU.
  check comm-multi-eager 150 comm "eager:$N" -- env LOCAL_RANK=0 "$PY" -m collectors comm \
    --json --device cuda --nproc "$N" --no-graph "${COMM_SIZES[@]}"
  check comm-multi-graph 150 comm "graph:$N" -- "$PY" -m collectors comm --json --device cuda \
    --nproc "$N" --graph "${COMM_SIZES[@]}"
  # The interconnect of the GPUs used, with CUDA_VISIBLE_DEVICES renumbering them.
  LAST2="$(( GPUS - 2 )),$(( GPUS - 1 ))"
  check comm-visible 90 comm "default:2:$LAST2" -- env CUDA_DEVICE_ORDER=PCI_BUS_ID \
    CUDA_VISIBLE_DEVICES="$LAST2" "$PY" -m collectors comm --json --device cuda --nproc 2 \
    --ops all_reduce --tokens 1,16 --iters 10
  check profile-tp2 240 profile gemm,allreduce -- "$PY" -m collectors profile --json --tp 2 \
    "${PROFILE[@]}" --keep-traces "$OUT/traces"
  check trace-tp2 90 trace gemm,allreduce,allgather -- "$PY" -m collectors trace --json \
    "$(trace_dir)"
fi
check doctor 45 doctor "" -- "$PY" -m collectors doctor --json --expect-gpus

if [[ $DRY -eq 1 ]]; then exit 0; fi
printf '%s\n' "${LINES[@]}" >>"$REPORT"
TOTAL=${#LINES[@]}
echo "# $(( TOTAL - FAILED ))/$TOTAL checks passed; logs in $OUT/logs" | tee -a "$REPORT"
[[ $FAILED -eq 0 ]]
