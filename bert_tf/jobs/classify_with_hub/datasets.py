"""The hub classifier's batches: length buckets of texts, or packed rows of the exported preprocessor's inputs.

Training batches are random, drawn from the seed epoch by epoch; both return an endless training dataset,
its steps per epoch (the examples over the batch size) and a held-out dataset.
"""

from __future__ import annotations

import numpy as np

from bert_tf.jobs.classify_with_hub.model import ENCODER_KEYS, EXAMPLE_IDS_KEY


def bucketed_datasets(preprocessing, texts, labels, test_texts, test_labels, batch_size, seed, group_by_length=False):
    """Batches of (texts, labels) for `model.BucketedPreprocessing` `preprocessing`, grouped by packed length.

    Training: random batches (`bert_tf.data.length_buckets`; `group_by_length`: of near-equal lengths);
    held out: sorted by length.
    """
    import tensorflow as tf

    from bert_tf import prefetching
    from bert_tf.data import length_buckets

    def lengths(values):
        batches = prefetching.without_autotuning(tf.data.Dataset.from_tensor_slices(values).batch(1024))
        return np.concatenate([preprocessing.packed_lengths(batch).numpy() for batch in batches]).astype(np.int64)

    columns = {"text": np.asarray(texts, dtype=str), "label": np.asarray(labels, np.float32)}
    indices = length_buckets.training_batch_indices(
        lengths(columns["text"]),
        batch_size,
        preprocessing.seq_length,
        preprocessing.bucket_width,
        seed,
        group_by_length=group_by_length,
    )
    train = length_buckets.gather_batches(indices, columns, (), training=True)
    train = prefetching.prefetched(train.map(lambda batch: (batch["text"], batch["label"])))
    order = np.argsort(lengths(np.asarray(test_texts, dtype=str)), kind="stable")
    test = tf.data.Dataset.from_tensor_slices(
        (np.asarray(test_texts, dtype=str)[order], np.asarray(test_labels, np.float32)[order])
    )
    return train, len(texts) // batch_size, prefetching.prefetched(test.batch(batch_size))


def encode_texts(preprocessor, texts, seq_length) -> dict:
    """The encoder inputs of each text alone, int32 numpy [len(texts), seq_length] each, packed by a TF Hub
    BERT preprocessor (`tokenize`, `bert_pack_inputs`; truncated as the notebook's packer truncates)."""
    import tensorflow as tf

    chunks = []
    for start in range(0, len(texts), 1024):
        pieces = preprocessor.tokenize(tf.constant(list(texts[start : start + 1024])))
        pieces = pieces.merge_dims(1, -1) if pieces.ragged_rank > 1 else pieces
        chunks.append(preprocessor.bert_pack_inputs([pieces], seq_length=seq_length))
    return {name: np.concatenate([chunk[name].numpy() for chunk in chunks]).astype(np.int32) for name in ENCODER_KEYS}


def packed_datasets(train_inputs, labels, test_inputs, test_labels, batch_size, seq_length, seed):
    """Batches of packed rows (`bert_tf.data.packed_rows`) of `encode_texts`' inputs, for `model.packed_classifier`.

    A batch is (encoder inputs and `input_example_ids` [rows, seq_length], labels [rows, slots, 1] with -1 in
    an empty slot); a training batch holds `batch_size` examples on average. The held-out dataset packs the
    examples in order; `packed_scores` maps its outputs back to them.
    """
    from bert_tf.data import packed_rows

    def batches(tables, inputs, values):
        columns = dict(inputs, label=np.asarray(values, np.float32))
        rows = packed_rows.gather_packed_batches(tables, columns, seq_length, slot_keys=("label",))
        return rows.map(inputs_and_labels)

    train_tables = packed_rows.training_row_batches(_lengths(train_inputs), batch_size, seq_length, seed)
    test_tables = packed_rows.inference_row_batches(_lengths(test_inputs), batch_size, seq_length)
    steps_per_epoch = max(1, len(labels) // batch_size)
    return batches(train_tables, train_inputs, labels), steps_per_epoch, batches(test_tables, test_inputs, test_labels)


def packed_scores(packed_model, inputs, batch_size, seq_length) -> np.ndarray:
    """float32 [examples]: `packed_model`'s score of each example of `inputs` (`encode_texts`), in packed rows."""
    from bert_tf.data import packed_rows

    tables = packed_rows.inference_row_batches(_lengths(inputs), batch_size, seq_length)
    rows = packed_rows.gather_packed_batches(tables, dict(inputs), seq_length)
    index = np.concatenate([batch[packed_rows.FEATURE_INDEX_KEY].numpy() for batch in rows])
    scores = packed_model.predict(rows.map(lambda batch: _model_inputs(batch)), verbose=0)[..., 0]
    result = np.zeros(len(inputs["input_mask"]), np.float32)
    result[index[index >= 0]] = scores[index >= 0]
    return result


def _lengths(inputs):
    return inputs["input_mask"].sum(axis=1).astype(np.int64)


def _model_inputs(batch):
    return {name: batch[name] for name in ENCODER_KEYS + (EXAMPLE_IDS_KEY,)}


def inputs_and_labels(batch):
    """A `packed_rows.gather_packed_batches` batch as `model.packed_classifier`'s (inputs, labels [rows, slots, 1]),
    the label -1 in an empty slot."""
    import tensorflow as tf

    from bert_tf.data import packed_rows

    labels = tf.where(batch[packed_rows.FEATURE_INDEX_KEY] >= 0, batch["label"], -1.0)
    return _model_inputs(batch), labels[..., None]
