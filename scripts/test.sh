#!/usr/bin/env bash
# Set up .venv with the pinned dev requirements, lint, and run every test (browser tests too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/setup.sh requirements-dev.txt
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
