"""Sentence features from token features: `[CLS]`, mean or max over real tokens, and unit length.

Backend-free (`keras.ops`), so the same pooling runs inside a compiled forward pass on TensorFlow or JAX.
sentence-transformers' published embedding of all-MiniLM-L6-v2 is `pool_tokens(..., "mean")` of the last
layer ([CLS] and [SEP] included, padding excluded) followed by `l2_normalize`.
"""

from __future__ import annotations

from keras import ops

POOLING_METHODS = ("cls", "mean", "max")


def pool_tokens(hidden, mask, method: str):
    """Pools [batch, seq, ...] token features over the sequence axis; returns [batch, ...].

    Args:
      hidden: [batch, seq, ...] features (a layer's output, or several layers stacked after the seq axis).
      mask: [batch, seq], 1 for real tokens, 0 for padding.
      method: "cls" (position 0), "mean" or "max" over the real tokens only.
    """
    if method == "cls":
        return hidden[:, 0]
    mask = ops.cast(mask, hidden.dtype)
    mask = ops.reshape(mask, tuple(ops.shape(mask)) + (1,) * (len(hidden.shape) - 2))
    if method == "mean":
        return ops.sum(hidden * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)
    if method == "max":
        lowest = ops.cast(ops.min(hidden), hidden.dtype) - 1.0
        return ops.max(ops.where(mask > 0, hidden, lowest), axis=1)
    raise ValueError(f"Unknown pooling {method!r}; expected one of {POOLING_METHODS}.")


def l2_normalize(features, epsilon: float = 1e-12):
    """Scales each vector (the last axis) to unit L2 length; a zero vector stays zero."""
    norm = ops.sqrt(ops.sum(ops.square(features), axis=-1, keepdims=True))
    return features / ops.maximum(norm, epsilon)
