"""Batches of packed rows: whole examples side by side in rows of `max_seq_length` tokens, not padding.

A batch of today's fine-tuning pads every example to the longest of its batch; a packed batch fills each row
with as many whole examples as fit, one after another, and marks them with per-token example ids (0 padding,
1..k the row's examples) that the model turns into a block-diagonal mask, restarted position ids and one
[CLS] per example (`bert_tf.layers.packed_examples`), so every example computes what it computes alone.
Shapes are static: [rows, max_seq_length] inputs and [rows, slots] labels and `feature_index` (-1 for an empty
slot), so one XLA program serves every step, on CPU, GPU and TPU.

Training: each epoch's order is a permutation drawn from (seed, epoch) with stateless ops, as
`length_buckets.training_batch_indices` draws it; examples are placed in that order into the first of a few
open rows with room (first fit over a small window, so a row's examples come from nearby in the random order
and a batch's lengths spread as the data's do), and consecutive rows form a batch. Everything is a pure
function of the seed and the epoch, so the iterator state a checkpoint saves restores exactly. Inference packs
the examples in input order the same way; outputs go back by `feature_index`.

Without TensorFlow (Keras `fit` on any backend, `bert_tf.jobs.keras_fit`): `slot_table_numpy` places examples by the
same rule into the same table, and `pack_numpy` gathers a table's rows as `gather_packed_batches` does.
"""

from __future__ import annotations

import functools

import numpy as np

from bert_tf import prefetching

#: Open rows an example may go into: a new example takes the first of them with room.
DEFAULT_WINDOW = 8
EXAMPLE_IDS_KEY = "input_example_ids"  # bert_tf.models.EXAMPLE_IDS_KEY (importing it would load Keras)
FEATURE_INDEX_KEY = "feature_index"  # bert_tf.tasks.base.FEATURE_INDEX_KEY
ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def max_examples_per_row(max_seq_length: int) -> int:
    """The static number of example slots of a row: the most examples of at least 2 tokens ([CLS] [SEP]) that fit."""
    return max(1, max_seq_length // 2)


def assign_rows(lengths, max_seq_length: int, slots: int, window: int = DEFAULT_WINDOW):
    """(row [N], slot [N]) int64 tensors: where each example goes, placed in the given order by first fit.

    An example goes into the first of `window` open rows with `length` tokens and a slot free; when none has,
    the oldest open row is closed and a new row opened. Rows are numbered in the order they open.
    """
    import tensorflow as tf

    lengths = tf.cast(lengths, tf.int64)
    initial = (
        tf.fill([window], tf.constant(max_seq_length + 1, tf.int64)),  # used tokens: "full" until opened
        tf.zeros([window], tf.int64),  # used slots
        tf.fill([window], tf.constant(-1, tf.int64)),  # row id of each open row
        tf.constant(0, tf.int64),  # the next row id
        tf.constant(0, tf.int64),  # (output) row
        tf.constant(0, tf.int64),  # (output) slot
    )

    def place(state, length):
        used, count, row_ids, next_row, _, _ = state
        fits = tf.logical_and(used + length <= max_seq_length, count < slots)
        any_fits = tf.reduce_any(fits)
        target = tf.where(
            any_fits,
            tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int64),
            tf.argmin(row_ids, output_type=tf.int64),  # the oldest (or a never opened) row closes
        )
        row = tf.where(any_fits, row_ids[target], next_row)
        slot = tf.where(any_fits, count[target], 0)
        one_hot = tf.equal(tf.range(window, dtype=tf.int64), target)
        used = tf.where(one_hot, tf.where(any_fits, used + length, length), used)
        count = tf.where(one_hot, slot + 1, count)
        row_ids = tf.where(one_hot, row, row_ids)
        return used, count, row_ids, next_row + tf.cast(tf.logical_not(any_fits), tf.int64), row, slot

    states = tf.scan(place, lengths, initializer=initial)
    return states[4], states[5]


def slot_table(order, lengths, max_seq_length: int, slots: int, window: int = DEFAULT_WINDOW):
    """int64 [rows, slots]: the example index in each slot of each row (-1: empty), placing `order` in turn."""
    return _graph_function(_slot_table)(order, lengths, max_seq_length, slots, window)


@functools.cache
def _graph_function(function):
    """`function` as a `tf.function`: the scan runs as one graph loop, not op by op, when called eagerly."""
    import tensorflow as tf

    return tf.function(function, reduce_retracing=True)


def _slot_table(order, lengths, max_seq_length: int, slots: int, window: int):
    import tensorflow as tf

    row, slot = assign_rows(tf.gather(lengths, order), max_seq_length, slots, window)
    num_rows = tf.reduce_max(row) + 1
    table = tf.fill(tf.stack([num_rows, tf.constant(slots, tf.int64)]), tf.constant(-1, tf.int64))
    return tf.tensor_scatter_nd_update(table, tf.stack([row, slot], axis=1), tf.cast(order, tf.int64))


def slot_table_numpy(order, lengths, max_seq_length: int, slots: int, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """`slot_table` in numpy, without TensorFlow: the same first-fit rule (`assign_rows`), the same table."""
    used = [max_seq_length + 1] * window  # "full" until opened
    count, row_ids = [0] * window, [-1] * window
    placed = []  # (row, slot, example)
    for example in np.asarray(order, np.int64).tolist():
        length = int(lengths[example])
        target = next((i for i in range(window) if used[i] + length <= max_seq_length and count[i] < slots), None)
        if target is None:
            target = row_ids.index(min(row_ids))  # the oldest (or a never opened) row closes
            used[target], count[target], row_ids[target] = 0, 0, max(row_ids) + 1
        placed.append((row_ids[target], count[target], example))
        used[target] += length
        count[target] += 1
    table = np.full((max(row for row, _, _ in placed) + 1 if placed else 0, slots), -1, np.int64)
    for row, slot, example in placed:
        table[row, slot] = example
    return table


def pack_numpy(table, inputs: dict, slot_values: dict | None = None) -> dict:
    """Numpy packed rows of a slot table [rows, slots] (-1: empty), as `gather_packed_batches` without `transform`.

    `inputs`: the encoder inputs of each example alone, [num_examples, max_seq_length]; `slot_values`: name ->
    per-example values [num_examples] (labels), put in their slots (0 in an empty one). Returns the encoder
    inputs and `input_example_ids` [rows, max_seq_length], the slot values and `feature_index` [rows, slots].
    """
    table = np.asarray(table, np.int64)
    rows, slots = table.shape
    lengths = inputs["input_mask"].sum(axis=1)
    seq_length = inputs["input_mask"].shape[1]
    packed = {name: np.zeros((rows, seq_length), np.int32) for name in ENCODER_KEYS + (EXAMPLE_IDS_KEY,)}
    for row, slot in zip(*np.nonzero(table >= 0)):
        example = table[row, slot]
        start = int(sum(lengths[table[row, :slot]]))
        end = start + int(lengths[example])
        for name in ENCODER_KEYS:
            packed[name][row, start:end] = inputs[name][example, : end - start]
        packed[EXAMPLE_IDS_KEY][row, start:end] = slot + 1
    present = table >= 0
    for name, values in (slot_values or {}).items():
        values = np.asarray(values)
        packed[name] = np.where(present, values[np.maximum(table, 0)], np.zeros((), values.dtype))
    packed[FEATURE_INDEX_KEY] = np.where(present, table, -1).astype(np.int32)
    return packed


def rows_per_batch(lengths, batch_size: int, max_seq_length: int, window: int = DEFAULT_WINDOW) -> int:
    """Rows a batch needs to hold `batch_size` examples on average (packing the data once in input order)."""
    import tensorflow as tf

    lengths = np.asarray(lengths, np.int64)
    table = slot_table(
        tf.range(len(lengths), dtype=tf.int64),
        tf.constant(lengths),
        max_seq_length,
        max_examples_per_row(max_seq_length),
        window,
    )
    return max(1, int(round(batch_size * int(table.shape[0]) / len(lengths))))


def training_row_batches(
    lengths, batch_size: int, max_seq_length: int, seed: int, input_context=None, window: int = DEFAULT_WINDOW
):
    """An endless tf.data pipeline of training batches of packed rows: int64 [rows, slots] example indices.

    A batch holds `batch_size` examples on average (`rows_per_batch`); each epoch packs a permutation drawn
    from (`seed`, epoch) and cuts its rows into batches (the rows that do not fill a batch sit out that epoch).
    Data too small for a batch per input pipeline is repeated within each epoch. With an `InputContext` of
    several input pipelines, pipeline `i` takes every `num_input_pipelines`-th batch.
    """
    import tensorflow as tf

    lengths = np.asarray(lengths, np.int64)
    size = len(lengths)
    if size < 1:
        raise ValueError("No training examples.")
    if int(lengths.max()) > max_seq_length:
        raise ValueError(f"A length of {int(lengths.max())} exceeds max_seq_length={max_seq_length}.")
    pipelines = input_context.num_input_pipelines if input_context is not None else 1
    slots = max_examples_per_row(max_seq_length)
    rows = rows_per_batch(lengths, batch_size, max_seq_length, window)
    # Examples for two batches per pipeline at least (a batch of `rows` rows holds at least `rows` examples), so
    # a random order that packs tighter than the input order still gives every pipeline a batch each epoch.
    repeats = max(1, -(-2 * max(batch_size, rows) * pipelines // size))
    lengths_t = tf.constant(lengths)
    seed = tf.constant(int(seed), tf.int64)

    def epoch_batches(epoch):
        order = _epoch_order(size, repeats, seed, epoch)
        table = slot_table(order, lengths_t, max_seq_length, slots, window)
        num_batches = tf.shape(table, out_type=tf.int64)[0] // rows
        batches = tf.reshape(table[: num_batches * rows], [-1, rows, slots])
        dataset = tf.data.Dataset.from_tensor_slices(batches)
        if pipelines > 1:
            dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
        return dataset

    first = np.stack([b.numpy() for b in epoch_batches(tf.constant(0, tf.int64))])
    _log_packing("training (epoch 1)", first, lengths, max_seq_length)
    return tf.data.Dataset.counter(dtype=tf.int64).flat_map(epoch_batches)


def _epoch_order(size: int, repeats: int, seed, epoch):
    """Epoch `epoch`'s permutation of `repeats` copies of examples 0..size-1, drawn statelessly from (`seed`,
    epoch): the same for a resumed run."""
    import tensorflow as tf

    shuffled = tf.random.experimental.stateless_shuffle(
        tf.range(size * repeats, dtype=tf.int64), seed=tf.stack([seed, 2 * epoch])
    )
    return shuffled % size


def inference_row_batches(lengths, batch_size: int, max_seq_length: int, window: int = DEFAULT_WINDOW):
    """A tf.data pipeline of every example once, packed in input order: int64 [rows, slots] batches.

    The last batch is filled up with empty rows (every slot -1), so every batch has the same static shape.
    """
    import tensorflow as tf

    lengths = np.asarray(lengths, np.int64)
    slots = max_examples_per_row(max_seq_length)
    rows = rows_per_batch(lengths, batch_size, max_seq_length, window)
    table = slot_table(tf.range(len(lengths), dtype=tf.int64), tf.constant(lengths), max_seq_length, slots, window)
    table = table.numpy()
    table = np.concatenate([table, np.full((-len(table) % rows, slots), -1, np.int64)]).reshape(-1, rows, slots)
    _log_packing("inference", table, lengths, max_seq_length)
    return tf.data.Dataset.from_tensor_slices(table)


def _log_packing(phase, batches, lengths, max_seq_length):
    from absl import logging

    filled = batches >= 0
    real = int(lengths[batches[filled]].sum())
    logging.info(
        "Packed rows, %s: %d batches of %d rows of %d tokens, %.1f examples a row on average; "
        "%.0f%% of the tokens are real.",
        phase,
        batches.shape[0],
        batches.shape[1],
        max_seq_length,
        filled.sum() / max(1, int(filled.any(axis=2).sum())),
        100.0 * real / max(1, batches.shape[0] * batches.shape[1] * max_seq_length),
    )


def gather_packed_batches(
    table_dataset, columns: dict, max_seq_length: int, transform=None, slot_keys=(), token_keys: dict | None = None
):
    """Maps batches of slot tables to packed model inputs (`packed_batch_function`'s), prefetched."""
    import tensorflow as tf

    gather = packed_batch_function(columns, max_seq_length, transform, slot_keys, token_keys)
    return prefetching.prefetched(table_dataset.map(gather, num_parallel_calls=tf.data.AUTOTUNE))


def packed_batch_function(
    columns: dict, max_seq_length: int, transform=None, slot_keys=(), token_keys: dict | None = None
):
    """A function of one slot table [rows, slots] (example indices, -1: empty) to a batch of packed model inputs.

    `columns`: name -> numpy array [num_examples, ...]: texts for `transform` (the tokenizer's packer, which
    gives each example's encoder inputs [examples, max_seq_length]), or, without `transform`, the encoder
    inputs themselves [num_examples, max_seq_length]. A batch holds the three encoder inputs and
    `input_example_ids` [rows, max_seq_length]; `slot_keys` (per-example labels) as [rows, slots], 0 in empty
    slots; `token_keys` (name -> padding value; per-token labels [num_examples, max_seq_length]) packed as the
    tokens are; and `feature_index` [rows, slots], -1 in empty slots.
    """
    import tensorflow as tf

    token_keys = dict(token_keys or {})
    tensors = {name: tf.constant(value) for name, value in columns.items()}

    def gather(table):
        static_rows, slots = table.shape  # static: one program for every batch (not `document_row_batches`')
        rows = tf.shape(table)[0] if static_rows is None else static_rows
        flat = tf.reshape(table, [-1])
        present = flat >= 0
        indices = tf.maximum(flat, 0)
        per_slot = set(slot_keys)
        encoded = {name: tf.gather(value, indices) for name, value in tensors.items() if name not in per_slot}
        if transform is not None:
            encoded = transform(encoded)
        lengths = tf.where(present, tf.reduce_sum(tf.cast(encoded["input_mask"], tf.int32), axis=1), 0)
        slot_ids = tf.tile(tf.range(1, slots + 1, dtype=tf.int32), [rows])
        encoded[EXAMPLE_IDS_KEY] = tf.broadcast_to(slot_ids[:, None], tf.shape(encoded["input_word_ids"]))
        batch = {}
        for name, padding in [(k, 0) for k in ENCODER_KEYS + (EXAMPLE_IDS_KEY,)] + list(token_keys.items()):
            ragged = tf.RaggedTensor.from_tensor(encoded[name], lengths=lengths)
            ragged = tf.RaggedTensor.from_uniform_row_length(ragged, slots).merge_dims(1, 2)
            shape = [static_rows, max_seq_length] + encoded[name].shape[2:].as_list()  # per-token vectors keep width
            batch[name] = ragged.to_tensor(tf.cast(padding, ragged.dtype), shape=shape)
        for name in ENCODER_KEYS + (EXAMPLE_IDS_KEY,):
            batch[name] = tf.cast(batch[name], tf.int32)
        for name in slot_keys:
            values = tf.gather(tensors[name], indices)  # [rows * slots, ...]: a value (or a vector) per example
            filled = tf.reshape(present, [-1] + [1] * (values.shape.rank - 1))
            values = tf.where(filled, values, tf.zeros_like(values))
            batch[name] = tf.reshape(values, [-1, slots] + values.shape[1:].as_list())
        batch[FEATURE_INDEX_KEY] = tf.cast(tf.where(table >= 0, table, -1), tf.int32)
        return batch

    return gather


def document_row_batches(
    num_windows,
    window_lengths,
    batch_size: int,
    max_seq_length: int,
    training: bool,
    seed: int = 0,
    input_context=None,
    window: int = DEFAULT_WINDOW,
):
    """Batches of `batch_size` documents whose windows pack rows: (documents [batch_size], table [rows, slots]).

    `num_windows` [documents]: each document's windows, which are examples `sum(num_windows[:d])` onwards of
    `window_lengths` [all windows] (tokens incl. [CLS]/[SEP]). A batch's documents' windows are placed by first
    fit (`slot_table`), so windows of short documents share rows and a batch counts documents; the number of
    rows varies with the batch. Training: each epoch a permutation of the documents drawn from (`seed`, epoch)
    with stateless ops (exact resume), cut into batches (the rest sits out; data too small for two batches per
    input pipeline is repeated within the epoch), endless. Inference: the documents in input order, the last
    batch's missing documents -1.
    """
    import tensorflow as tf

    num_windows = np.asarray(num_windows, np.int64)
    size = len(num_windows)
    if size < 1:
        raise ValueError("No documents.")
    offsets = tf.constant(np.concatenate([[0], np.cumsum(num_windows)[:-1]]).astype(np.int64))
    counts, lengths = tf.constant(num_windows), tf.constant(np.asarray(window_lengths, np.int64))
    slots = max_examples_per_row(max_seq_length)

    def with_table(documents):
        present = tf.boolean_mask(documents, documents >= 0)
        starts = tf.gather(offsets, present)
        windows = tf.ragged.range(starts, starts + tf.gather(counts, present)).flat_values
        return documents, slot_table(windows, lengths, max_seq_length, slots, window)

    if not training:
        order = np.concatenate([np.arange(size), np.full(-size % batch_size, -1)]).reshape(-1, batch_size)
        return tf.data.Dataset.from_tensor_slices(order).map(with_table)
    pipelines = input_context.num_input_pipelines if input_context is not None else 1
    repeats = max(1, -(-2 * batch_size * pipelines // size))
    seed = tf.constant(int(seed), tf.int64)

    def epoch_batches(epoch):
        order = _epoch_order(size, repeats, seed, epoch)
        groups = tf.reshape(order[: (size * repeats // batch_size) * batch_size], [-1, batch_size])
        dataset = tf.data.Dataset.from_tensor_slices(groups)
        if pipelines > 1:
            dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
        return dataset.map(with_table)

    return tf.data.Dataset.counter(dtype=tf.int64).flat_map(epoch_batches)


def unpack_outputs(outputs: dict, example_ids: np.ndarray, slots: int) -> dict:
    """Numpy outputs of packed rows, one row per example slot: [rows * slots, ...].

    Per-slot outputs ([rows, slots, ...], a classifier's) are flattened; per-token outputs ([rows, seq, ...], a
    tagger's) are cut into each example's own tokens, moved to start at position 0 and zero-padded, as the
    example alone would give them.
    """
    rows, seq_length = example_ids.shape
    rr, tt = np.nonzero(example_ids > 0)
    kk = example_ids[rr, tt] - 1
    first = np.full((rows, slots), seq_length)
    np.minimum.at(first, (rr, kk), tt)
    unpacked = {}
    for name, value in outputs.items():
        if value.ndim >= 2 and value.shape[:2] == (rows, slots):
            unpacked[name] = value.reshape((rows * slots,) + value.shape[2:])
        elif value.ndim >= 2 and value.shape[:2] == (rows, seq_length):
            per_slot = np.zeros((rows, slots) + value.shape[1:], value.dtype)
            per_slot[rr, kk, tt - first[rr, kk]] = value[rr, tt]
            unpacked[name] = per_slot.reshape((rows * slots,) + value.shape[1:])
        else:
            raise ValueError(f"Output {name!r} of shape {value.shape} is neither per slot nor per token.")
    return unpacked
