"""Batches grouped by length and padded to a few bucket lengths: pay for tokens, not padding.

Padding every batch to `max_seq_length` wastes most of a batch of short texts. Sorting the examples by length
and padding each batch to the smallest multiple of `bucket_width` that holds its longest row keeps almost
only real tokens, and, since a batch has one of at most `max_seq_length / bucket_width` shapes, an XLA-compiled
forward pass compiles that many graphs at most. Attention masks the padding, so the outputs of the real
positions do not depend on the padded length (to float rounding); `tests/test_length_buckets.py` checks it.

`length_batches`/`bucketed_dataset` serve inference (feature extraction, layer probing),
where the order of the batches does not matter because every row goes back to its own index. The fine-tuning
tasks' tf.data pipelines (`bert_tf.tasks.base.length_bucketed_dataset`) use `training_batch_indices` (training:
random batches from the seed, each padded to its own bucket, endless and checkpointable; grouping by length is
opt-in) and `inference_batch_indices` with `gather_batches`. TensorFlow is imported only by the tf.data
functions.

Training batches are random by default, as in HuggingFace's Trainer: grouping examples of near-equal length
into a batch (`group_by_length`, HuggingFace's opt-in `group_by_length`) saves more padding, but its batches are
not samples of the data and on small labelled sets it learns more slowly and ends less accurate
(benchmarks/finetune_accuracy.py measures both orders).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_tf import prefetching

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


def bucketed_dataset(
    inputs: dict, batch_size: int, max_seq_length: int, bucket_width: int | None = DEFAULT_BUCKET_WIDTH
):
    """A tf.data pipeline of length-bucketed inference batches of `inputs`, with `feature_index`.

    `inputs`: name -> int [num_examples, max_seq_length] arrays (the encoder inputs, padded at the end); the
    lengths come from `input_mask`. Every batch has `batch_size` rows: a short one is filled up by repeating a
    row with `feature_index` -1, which `bert_tf.tasks.inference.iterate_outputs` drops. Returns
    (dataset, batches).
    """
    lengths = np.asarray(inputs["input_mask"]).sum(axis=1)
    batches = length_batches(lengths, batch_size, max_seq_length, bucket_width)
    # Rows are gathered from tensors inside tf.data (no Python generator: its thread would contend for the
    # GIL with the loop that consumes the batches).
    index = inference_batch_indices(lengths, batch_size, max_seq_length, bucket_width, batches=batches)
    dataset = gather_batches(index, {name: np.asarray(v) for name, v in inputs.items()}, list(inputs), training=False)
    return prefetching.without_autotuning(dataset.prefetch(2)), batches


# --- tf.data pipelines of the fine-tuning tasks ------------------------------------------------------------

#: With `group_by_length`, training batches are formed inside chunks of this many batches of shuffled examples,
#: sorted by length (as HuggingFace's `group_by_length` does with its "megabatches" of 50).
GROUP_BY_LENGTH_CHUNK_BATCHES = 50


def _bucket_lengths_tf(max_lengths, bucket_width: int, max_seq_length: int):
    import tensorflow as tf

    max_lengths = tf.maximum(tf.cast(max_lengths, tf.int64), 1)
    if not bucket_width:
        return tf.fill(tf.shape(max_lengths), tf.constant(max_seq_length, tf.int64))
    return tf.minimum(tf.constant(max_seq_length, tf.int64), -(-max_lengths // bucket_width) * bucket_width)


def training_batch_indices(
    lengths: np.ndarray,
    batch_size: int,
    max_seq_length: int,
    bucket_width: int | None,
    seed: int,
    input_context=None,
    group_by_length: bool = False,
    chunk_batches: int = GROUP_BY_LENGTH_CHUNK_BATCHES,
):
    """An endless tf.data pipeline of training batches as (indices [batch_size] int64, seq_length int64).

    Epoch `e` is a permutation of the examples drawn from (`seed`, `e`) with stateless random ops; its first
    `len // batch_size * batch_size` examples (the rest sit out this epoch) are cut into batches in that random
    order. With `group_by_length`, they are first cut into chunks of `chunk_batches` batches and sorted by
    length inside each chunk (stably), and the batches of the epoch are shuffled, again from (`seed`, `e`).
    Each batch is padded to the bucket length of its longest row.
    Data too small for one batch per input pipeline is repeated within each epoch until it fills them.
    Everything is a pure function of the seed and the epoch number, built from `Dataset.counter` and
    `from_tensor_slices`, so the iterator state is a position that a checkpoint saves and restores exactly.
    `bucket_width` 0/None: the same batches, all at `max_seq_length`. With an `InputContext` of several input
    pipelines, pipeline `i` takes every `num_input_pipelines`-th batch of each epoch.
    """
    import tensorflow as tf

    lengths = np.asarray(lengths, np.int64)
    size = len(lengths)
    if size < 1:
        raise ValueError("No training examples.")
    pipelines = input_context.num_input_pipelines if input_context is not None else 1
    # Slots per epoch: the examples, repeated where they do not fill one batch per pipeline.
    repeats = max(1, -(-batch_size * pipelines // size))
    slots = size * repeats
    num_batches = slots // batch_size
    if lengths.size and int(lengths.max()) > max_seq_length:
        raise ValueError(f"A length of {int(lengths.max())} exceeds max_seq_length={max_seq_length}.")
    used = num_batches * batch_size
    chunk = max(1, chunk_batches) * batch_size
    lengths_t = tf.constant(lengths)
    chunk_ids = tf.constant(np.arange(used, dtype=np.int64) // chunk)
    seed = tf.constant(int(seed), tf.int64)

    def epoch_batches(epoch):
        order = (
            tf.random.experimental.stateless_shuffle(tf.range(slots, dtype=tf.int64), seed=tf.stack([seed, 2 * epoch]))[
                :used
            ]
            % size
        )
        batches = tf.reshape(order, [num_batches, batch_size])
        if group_by_length:
            key = chunk_ids * (max_seq_length + 1) + tf.gather(lengths_t, order)
            order = tf.gather(order, tf.argsort(key, stable=True))
            batches = tf.random.experimental.stateless_shuffle(
                tf.reshape(order, [num_batches, batch_size]), seed=tf.stack([seed, 2 * epoch + 1])
            )
        batches = tf.ensure_shape(batches, [num_batches, batch_size])  # a static batch size, as TPUs need
        seq_lengths = _bucket_lengths_tf(
            tf.reduce_max(tf.gather(lengths_t, batches), axis=1), bucket_width, max_seq_length
        )
        dataset = tf.data.Dataset.from_tensor_slices((batches, seq_lengths))
        if input_context is not None and input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return dataset

    _log_shapes("training (epoch 1)", *[np.asarray(x) for x in _first_epoch(epoch_batches)], lengths, bucket_width)
    return tf.data.Dataset.counter(dtype=tf.int64).flat_map(epoch_batches)


def _first_epoch(epoch_batches):
    import tensorflow as tf

    batches, seq_lengths = [], []
    for rows, seq_length in epoch_batches(tf.constant(0, tf.int64)):
        batches.append(rows.numpy())
        seq_lengths.append(int(seq_length))
    return np.stack(batches), np.asarray(seq_lengths)


def inference_batch_indices(
    lengths: np.ndarray, batch_size: int, max_seq_length: int, bucket_width: int | None, batches=None
):
    """A tf.data pipeline of inference batches as (indices, feature_index, seq_length), each batch full.

    The batches of `length_batches` (increasing length; input order without bucketing), or `batches` when
    given; a short batch is filled up with its first row, whose `feature_index` is -1 (dropped from the
    outputs).
    """
    import tensorflow as tf

    if batches is None:
        batches = length_batches(lengths, batch_size, max_seq_length, bucket_width)
    rows = np.zeros((len(batches), batch_size), np.int64)
    feature_index = np.full((len(batches), batch_size), -1, np.int32)
    for i, batch in enumerate(batches):
        rows[i] = batch.indices[0]
        rows[i, : len(batch.indices)] = batch.indices
        feature_index[i, : len(batch.indices)] = batch.indices
    seq_lengths = np.asarray([b.seq_length for b in batches], np.int64)
    _log_shapes("inference", rows, seq_lengths, np.asarray(lengths), bucket_width, feature_index)
    return tf.data.Dataset.from_tensor_slices((rows, feature_index, seq_lengths))


def _log_shapes(phase, rows, seq_lengths, lengths, bucket_width, feature_index=None):
    from absl import logging

    if feature_index is not None:
        real = int(lengths[rows[feature_index >= 0]].sum())
    else:
        real = int(lengths[rows].sum())
    padded = int((seq_lengths * rows.shape[1]).sum())
    logging.info(
        "Length buckets, %s: %d batches padded to %d distinct length(s) %s (bucket width %s); "
        "%.0f%% of the padded tokens are real.",
        phase,
        len(seq_lengths),
        len(set(seq_lengths.tolist())),
        sorted(set(seq_lengths.tolist())),
        bucket_width or "off",
        100.0 * real / max(padded, 1),
    )


def gather_batches(index_dataset, columns: dict, sequence_keys, training: bool, transform=None):
    """Maps an index pipeline (`training_batch_indices` / `inference_batch_indices`) to batches of `columns`.

    `columns`: name -> numpy array [num_examples, ...]. `transform` (optional): a function of the gathered
    batch dict (e.g. the in-graph tokenizer's packer) applied before the keys in `sequence_keys`
    ([batch, max_seq_length]) are cut to the batch's length. Inference batches get `feature_index`.
    """
    import tensorflow as tf

    tensors = {name: tf.constant(value) for name, value in columns.items()}

    def gather(rows, seq_length, feature_index=None):
        batch = {name: tf.gather(value, rows) for name, value in tensors.items()}
        if feature_index is not None:
            batch["feature_index"] = feature_index  # bert_tf.tasks.base.FEATURE_INDEX_KEY (which loads Keras)
        if transform is not None:
            batch = transform(batch)
            # The packer's ragged ops lose the static batch size that the rows have (TPUs need it).
            batch = {name: _with_rows(value, rows.shape[0]) for name, value in batch.items()}
        for name in sequence_keys:
            if name in batch:
                batch[name] = batch[name][:, :seq_length]
        return batch

    if training:
        return index_dataset.map(gather, num_parallel_calls=tf.data.AUTOTUNE)
    return index_dataset.map(
        lambda rows, feature_index, seq_length: gather(rows, seq_length, feature_index),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def _with_rows(tensor, num_rows):
    import tensorflow as tf

    if num_rows is None or tensor.shape.rank is None or tensor.shape.rank == 0:
        return tensor
    return tf.ensure_shape(tensor, [num_rows] + [None] * (tensor.shape.rank - 1))
