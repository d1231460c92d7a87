"""Batches grouped by length and padded to a few bucket lengths: pay for tokens, not padding.

Padding every batch to `max_seq_length` wastes most of a batch of short texts. Sorting the examples by length
and padding each batch to the smallest multiple of `bucket_width` that holds its longest row keeps almost
only real tokens, and, since a batch has one of at most `max_seq_length / bucket_width` shapes, an XLA-compiled
forward pass compiles that many graphs at most. Attention masks the padding, so the outputs of the real
positions do not depend on the padded length (to float rounding); `tests/test_length_buckets.py` checks it.

Numpy only: used for inference (feature extraction, layer probing), where the order of the batches does not
matter because every row goes back to its own index.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np

DEFAULT_BUCKET_WIDTH = 16


@dataclasses.dataclass(frozen=True)
class LengthBatch:
    """One batch: `indices` [rows] into the examples, all padded to `seq_length`."""

    indices: np.ndarray
    seq_length: int


def bucket_length(length: int, bucket_width: int, max_seq_length: int) -> int:
    """The smallest multiple of `bucket_width` that is >= `length`, capped at `max_seq_length`."""
    return int(min(max_seq_length, -(-max(length, 1) // bucket_width) * bucket_width))


def length_batches(
    lengths: np.ndarray, batch_size: int, max_seq_length: int, bucket_width: int | None = DEFAULT_BUCKET_WIDTH
) -> list[LengthBatch]:
    """Batches of example indices, each with the sequence length to pad it to.

    Args:
      lengths: [num_examples] real lengths (tokens incl. [CLS]/[SEP]), each <= `max_seq_length`.
      batch_size: rows per batch (the last batch may have fewer).
      max_seq_length: the longest allowed length.
      bucket_width: None or 0 turns bucketing off: batches in input order, all at `max_seq_length`.

    Returns:
      Batches in increasing length; within a length, in input order (a stable sort), so the result is
      deterministic.
    """
    lengths = np.asarray(lengths)
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    if lengths.size and int(lengths.max()) > max_seq_length:
        raise ValueError(f"A length of {int(lengths.max())} exceeds max_seq_length={max_seq_length}.")
    if not bucket_width:
        order = np.arange(len(lengths))
    else:
        order = np.argsort(lengths, kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        if bucket_width:
            seq_length = bucket_length(int(lengths[indices].max()), bucket_width, max_seq_length)
        else:
            seq_length = max_seq_length
        batches.append(LengthBatch(indices=indices, seq_length=seq_length))
    return batches


def padded_batches(
    inputs: dict, batches: list[LengthBatch], batch_size: int | None = None
) -> Iterator[tuple[np.ndarray, dict]]:
    """Yields (indices, inputs cut to the batch's length) for each batch.

    `inputs`: name -> [num_examples, max_seq_length, ...] arrays padded at the end. With `batch_size`, a
    short batch is filled up to it by repeating its first row (`indices` still names only the real rows), so
    every batch of a bucket has one shape and a compiled forward pass is not traced again for the last one.
    """
    for batch in batches:
        rows = batch.indices
        if batch_size is not None and len(rows) < batch_size:
            rows = np.concatenate([rows, np.full(batch_size - len(rows), rows[0])])
        yield batch.indices, {name: value[rows, : batch.seq_length] for name, value in inputs.items()}


def bucketed_dataset(
    inputs: dict, batch_size: int, max_seq_length: int, bucket_width: int | None = DEFAULT_BUCKET_WIDTH
):
    """A tf.data pipeline of length-bucketed inference batches of `inputs`, with `feature_index`.

    `inputs`: name -> int [num_examples, max_seq_length] arrays (the encoder inputs, padded at the end); the
    lengths come from `input_mask`. Every batch has `batch_size` rows: a short one is filled up by repeating a
    row with `feature_index` -1, which `bert_tf.tasks.inference.iterate_outputs` drops. Returns
    (dataset, batches).
    """
    import tensorflow as tf

    from bert_tf.tasks.base import FEATURE_INDEX_KEY

    lengths = np.asarray(inputs["input_mask"]).sum(axis=1)
    batches = length_batches(lengths, batch_size, max_seq_length, bucket_width)

    def generate():
        for indices, batch in padded_batches(inputs, batches, batch_size):
            feature_index = np.full(batch_size, -1, np.int32)
            feature_index[: len(indices)] = indices
            yield dict(batch, **{FEATURE_INDEX_KEY: feature_index})

    signature = {
        name: tf.TensorSpec((batch_size, None), tf.as_dtype(np.asarray(v).dtype)) for name, v in inputs.items()
    }
    signature[FEATURE_INDEX_KEY] = tf.TensorSpec((batch_size,), tf.int32)
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    return dataset.prefetch(2), batches
