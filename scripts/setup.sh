#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install the pinned requirements given as arguments.
# Re-running is cheap: pip skips what is already installed at the pinned versions.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "stepscope: Python 3.11+ is required ($PY is $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.stepscope-reqs"
want=$(cat "$@" | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  for req in "$@"; do args+=(-r "$req"); done
  .venv/bin/python -m pip install -q --disable-pip-version-check "${args[@]}"
  echo "$want" > "$stamp"
fi
