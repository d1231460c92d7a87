#!/usr/bin/env bash
# Creates (or updates) the project's virtual environment in .venv and installs
# bert_tf in editable mode with its test extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
echo "bert_tf installed in $(pwd)/.venv"
