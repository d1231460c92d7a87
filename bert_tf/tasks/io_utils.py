"""The task modules' prediction files; the atomic writes themselves live in `bert_tf.file_io`."""

from __future__ import annotations

import math

from bert_tf import file_io


def _finite(value):
    # JSON has no Infinity/NaN. In prediction files an infinity is a sentinel (SQuAD's null odds when a
    # question has no non-null answer), written as +-1e30 as the SQuAD v2 scripts expect a number.
    # Metrics never come through here: `job.run_finetuning` reports a non-finite metric as a failed run.
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else (1e30 if value > 0 else -1e30)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_json_atomic(path: str, value, indent: int = 2) -> None:
    """Writes prediction JSON atomically, non-finite floats replaced as above."""
    file_io.write_json(path, _finite(value), indent=indent)
