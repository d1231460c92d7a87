"""Every layer's frozen features for the probing tasks: one forward pass per model and file, cached on disk.

A word is represented by its first WordPiece (as in the BERT paper's feature-based NER) or the mean of its
pieces; a sentence by `[CLS]` and, separately, by the mean over its real tokens. Each is computed for all
L + 1 layers at once (layer 0 is the embedding output) and stored as float16 [items, L + 1, hidden] in
`cache_dir`, under a key that names the model, the file's contents and the options, so every probe row and a
rerun with the same cache reuse it.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
from absl import logging

from bert_tf import file_io

WORD_PIECE_MODES = ("first", "mean")


class FeatureCache:
    """float16 arrays in `directory`, one `.npz` per key (a dict that names what the arrays were made from)."""

    def __init__(self, directory: str):
        self.directory = directory

    def path(self, key: dict) -> str:
        name = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:24]
        return os.path.join(self.directory, f"{key.get('kind', 'features')}-{name}.npz")

    def ensure(self, key: dict, compute) -> str:
        """The path of `key`'s arrays, computed by `compute() -> {name: array}` and stored unless already there."""
        path = self.path(key)
        if os.path.exists(path):
            logging.info("Reusing cached features %s", path)
            return path
        arrays = {name: np.asarray(value, np.float16) for name, value in compute().items()}
        os.makedirs(self.directory, exist_ok=True)
        with file_io.atomic_path(path) as tmp_path:
            with open(tmp_path, "wb") as f:
                np.savez(f, **arrays)
        return path

    @staticmethod
    def load(path: str, name: str) -> np.ndarray:
        """One float16 array of a cached file."""
        with np.load(path) as arrays:
            return arrays[name]


def _forward_batches(encoder, inputs: dict, outputs_fn, *, label, batch_size, max_seq_length, bucket_width, packing):
    """Yields (indices, numpy outputs) per batch of `inputs`, logging progress with an ETA.

    `outputs_fn(layers, mask)`: the outputs of [batch, seq, L + 1, hidden] stacked layers and their [batch, seq]
    mask. Length-bucketed batches, or with `packing` rows filled with whole sequences (`bert_tf.data.packed_rows`),
    each computed as if alone: their per-token layers come back one row per sequence, from position 0 and zero
    beyond its tokens, and `outputs_fn` runs on them, so the outputs are the unpacked ones to float rounding.
    """
    import tensorflow as tf

    from bert_tf.data import packed_rows
    from bert_tf.data.length_buckets import bucketed_dataset
    from bert_tf.tasks.base import FEATURE_INDEX_KEY
    from bert_tf.tasks.inference import iterate_outputs

    if packing:  # logs the share of real tokens
        tables = packed_rows.inference_row_batches(inputs["input_mask"].sum(axis=1), batch_size, max_seq_length)
        dataset = packed_rows.gather_packed_batches(tables, inputs, max_seq_length)
        slots = packed_rows.max_examples_per_row(max_seq_length)

        def forward(batch, training=False):
            return {"layers": _stacked_layers(encoder.packed_outputs(batch, slots))}

    else:
        dataset, batches = bucketed_dataset(inputs, batch_size, max_seq_length, bucket_width)
        shapes = sorted({b.seq_length for b in batches})
        logging.info(
            "%s: %d sequences in %d batches, %d sequence lengths %s",
            label,
            len(inputs["input_mask"]),
            len(batches),
            len(shapes),
            shapes,
        )

        def forward(batch, training=False):
            return outputs_fn(_stacked_layers(encoder(batch, training=False)), tf.cast(batch["input_mask"], tf.float32))

    for batch in iterate_outputs(forward, dataset, jit_compile=False, label=label):
        indices = batch.pop(FEATURE_INDEX_KEY)
        if packing:
            layers = batch["layers"]
            mask = inputs["input_mask"][indices, : layers.shape[1]].astype(np.float32)
            batch = {name: np.asarray(value) for name, value in outputs_fn(layers, mask).items()}
        yield indices, batch


def _stacked_layers(outputs):
    """[batch, seq, L + 1, hidden]: the embedding output and every Transformer layer."""
    from keras import ops

    from bert_tf.features.layer_selection import all_layers

    return ops.stack(all_layers(outputs), axis=2)


def token_features(
    encoder, tokenizer, sentences, *, word_piece, max_seq_length, batch_size, bucket_width, label, packing=False
):
    """float32 [num_words, L + 1, hidden]: each word's first piece (or mean of its pieces) at every layer.

    A word the tokenizer turns into no piece at all (only deleted characters) gets zeros.
    """
    from bert_tf.data.examples import TaggingExample
    from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES
    from bert_tf.tasks.tagging import TaggingTask

    if word_piece not in WORD_PIECE_MODES:
        raise ValueError(f"--word_piece must be one of {WORD_PIECE_MODES}, got {word_piece!r}.")
    # Tags are not needed to place the pieces: featurize the sentences unlabelled.
    task = TaggingTask(tokenizer, max_seq_length, ["_"])
    examples = [TaggingExample(guid=str(i), words=tuple(words)) for i, words in enumerate(sentences)]
    features = task.featurize(examples, training=False)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences])])
    piece_word = _piece_words(features.word_index, features.inputs["input_mask"])
    # Global word number of each piece position (-1: [CLS], [SEP], padding; or not the first piece in "first").
    positions = features.word_index if word_piece == "first" else piece_word
    global_word = np.where(positions >= 0, offsets[features.example_index][:, None] + positions, -1)
    num_layers = encoder.config.num_hidden_layers + 1
    # A word's first piece is written once (float16 is what the cache keeps); a mean accumulates in float32.
    dtype = np.float16 if word_piece == "first" else np.float32
    totals = np.zeros((offsets[-1], num_layers, encoder.config.hidden_size), dtype)
    counts = np.zeros(offsets[-1], np.float32)
    inputs = {name: features.inputs[name] for name in ENCODER_INPUT_NAMES}
    batches = _forward_batches(
        encoder,
        inputs,
        lambda layers, mask: {"layers": layers},
        label=label,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        bucket_width=bucket_width,
        packing=packing,
    )
    for indices, outputs in batches:
        layers = outputs["layers"]
        words = global_word[indices, : layers.shape[1]]
        rows, cols = np.nonzero(words >= 0)
        if word_piece == "first":  # one position per word: no accumulation needed
            totals[words[rows, cols]] = layers[rows, cols]
            counts[words[rows, cols]] = 1.0
        else:
            np.add.at(totals, words[rows, cols], layers[rows, cols])
            np.add.at(counts, words[rows, cols], 1.0)
    if word_piece == "first":
        return totals
    return totals / np.maximum(counts, 1.0)[:, None, None]


def _piece_words(word_index: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The word of every piece ([rows, seq]): a word's first piece and its continuations; -1 elsewhere."""
    piece_word = np.full_like(word_index, -1)
    lengths = mask.sum(axis=1)
    for row in range(word_index.shape[0]):
        current = -1
        for position in range(1, int(lengths[row]) - 1):  # between [CLS] and [SEP]
            if word_index[row, position] >= 0:
                current = word_index[row, position]
            piece_word[row, position] = current
    return piece_word


def sentence_features(encoder, tokenizer, texts, *, max_seq_length, batch_size, bucket_width, label, packing=False):
    """{"cls", "mean"}: float32 [num_texts, L + 1, hidden], [CLS] and the mean over real tokens at every layer."""
    from bert_tf.data.text_inputs import pack_texts
    from bert_tf.features.pooling import pool_tokens

    inputs = pack_texts(tokenizer, list(texts), [None] * len(texts), max_seq_length)
    num_layers = encoder.config.num_hidden_layers + 1
    result = {
        name: np.zeros((len(texts), num_layers, encoder.config.hidden_size), np.float32) for name in ("cls", "mean")
    }

    def outputs_fn(layers, mask):
        return {"cls": pool_tokens(layers, mask, "cls"), "mean": pool_tokens(layers, mask, "mean")}

    batches = _forward_batches(
        encoder,
        inputs,
        outputs_fn,
        label=label,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        bucket_width=bucket_width,
        packing=packing,
    )
    for indices, outputs in batches:
        for name in result:
            result[name][indices] = outputs[name]
    return result
