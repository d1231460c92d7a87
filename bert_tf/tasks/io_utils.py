"""Atomic writes of the job's result files (temporary file in the same directory, then rename)."""

from __future__ import annotations

import json
import math
import os
import tempfile


def write_text_atomic(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise


def _finite(value):
    # JSON has no Infinity/NaN; strict readers (jq, JavaScript) reject them.
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else (1e30 if value > 0 else -1e30)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_json_atomic(path: str, value, indent: int = 2) -> None:
    write_text_atomic(path, json.dumps(_finite(value), indent=indent, ensure_ascii=False) + "\n")
