#!/usr/bin/env bash
# Set up .venv, gather real data on this machine when the store is empty, start the dashboard.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt requirements-gpu.txt
.venv/bin/python -m scripts.demo   # no-op when the store already has data
exec .venv/bin/python -m streamlit run app.py "$@"
