#!/usr/bin/env bash
# Set up .venv with the pinned dev requirements, lint, and run every test (browser tests too).
#   bash scripts/test.sh            everything: lint, unit, robustness, PostgreSQL/S3, real-browser
#   bash scripts/test.sh --quick    the development loop: lint + tests that start no service
#                                   (no browser, no PostgreSQL/S3, none marked slow)
# Further arguments go to pytest (a file, -k, -x ...). Both tiers run on every core
# (pytest-xdist, one test file per worker at a time: module fixtures are built once;
# STEPSCOPE_TEST_WORKERS sets how many workers).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=()
if [ "${1:-}" = "--quick" ]; then
  shift
  tier=(-m "not e2e and not service and not slow")
else
  bash scripts/system-deps.sh
fi
bash scripts/setup.sh requirements-dev.txt
.venv/bin/ruff check .
# Bytecode on disk for every child process the tests start (CLI runs, dashboards): where
# PYTHONDONTWRITEBYTECODE is set (this machine, CI), each would compile the project again
# (~0.1 s of its ~0.5 s start-up, 600+ children per run).
.venv/bin/python -m compileall -q -j 0 app.py pages collectors store planner fitting benchmarks tests
# One worker per core: one more kept the CPUs busier (74% against 70%) but gave the same wall
# time with more contention for the browser checks (docs/benchmarks.md, The test suite).
workers="${STEPSCOPE_TEST_WORKERS:-$(nproc)}"
.venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "${tier[@]}" "$@"
