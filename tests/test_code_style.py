"""The tree keeps the project's one code style: `ruff format` and `ruff check` with ruff.toml.

Fix a failure with `.venv/bin/ruff format . && .venv/bin/ruff check --fix .`.
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUFF = os.path.join(os.path.dirname(sys.executable), "ruff")


def _ruff(*args):
    return subprocess.run([RUFF, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_tree_is_formatted():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_passes_the_linter():
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr
