"""Packed rows against the same examples one by one, on whichever Keras backend runs it.

`run()` builds a tiny classifier, packs five examples of different lengths into rows of 16 tokens with 4 example
slots (one example fills a row alone, one row has a slot and a token left, one holds a sentence pair), and
returns the largest differences between the packed logits and gradients and those of the same examples one
a row (today's batches, where each row is computed alone). Run as a script
(`KERAS_BACKEND=jax python -m tests.helpers.packed_check`) it prints them as JSON.
"""

import json

import keras
import numpy as np

SEQ_LENGTH, SLOTS, NUM_CLASSES = 16, 4, 3
# (word ids, type ids) of each example: [CLS]=2 ... [SEP]=3.
EXAMPLES = [
    ([2] + list(range(10, 24)) + [3], [0] * 16),  # fills a row alone
    ([2, 30, 31, 3], [0] * 4),
    ([2, 40, 41, 42, 3, 43, 44, 3], [0] * 5 + [1] * 3),  # a pair
    ([2, 50, 3], [0] * 3),
    ([2, 60, 61, 62, 63, 3], [0] * 6),
]
ROWS = [[0], [1, 2, 3], [4]]  # row 1: 15 of 16 tokens, 3 of 4 slots
LABELS = [0, 2, 1, 1, 2]


def packed_batch():
    """The packed rows: encoder inputs with `input_example_ids`, and the slots' example index (-1: empty)."""
    batch = {k: np.zeros((len(ROWS), SEQ_LENGTH), "int32") for k in ("words", "types", "ids")}
    slot_examples = np.full((len(ROWS), SLOTS), -1)
    for r, row in enumerate(ROWS):
        start = 0
        for slot, index in enumerate(row):
            words, types = EXAMPLES[index]
            batch["words"][r, start : start + len(words)] = words
            batch["types"][r, start : start + len(words)] = types
            batch["ids"][r, start : start + len(words)] = slot + 1
            slot_examples[r, slot] = index
            start += len(words)
    inputs = {
        "input_word_ids": batch["words"],
        "input_mask": np.int32(batch["ids"] > 0),
        "input_type_ids": batch["types"],
        "input_example_ids": batch["ids"],
    }
    return inputs, slot_examples


def single_batch(indices=None):
    """Today's batch: one example a row, padded to `SEQ_LENGTH` (each row is computed alone)."""
    indices = range(len(EXAMPLES)) if indices is None else indices
    batch = {k: np.zeros((len(indices), SEQ_LENGTH), "int32") for k in ("input_word_ids", "input_type_ids")}
    batch["input_mask"] = np.zeros((len(indices), SEQ_LENGTH), "int32")
    for row, index in enumerate(indices):
        words, types = EXAMPLES[index]
        batch["input_word_ids"][row, : len(words)] = words
        batch["input_type_ids"][row, : len(words)] = types
        batch["input_mask"][row, : len(words)] = 1
    return batch


def tiny_config(vocab_size: int, **config_overrides):
    """The packed checks' encoder config: 2 layers, no dropout, and weights drawn wide (initializer_range 0.5),
    so that states that differ show it."""
    from bert_tf import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=SEQ_LENGTH,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.5,
        **config_overrides,
    )


def run_on_jax(module: str) -> dict:
    """Runs `python -m module` (a check that prints `RESULT {json}`) on the JAX backend; its result."""
    import subprocess
    import sys

    from tests.helpers import training_data

    result = subprocess.run(
        [sys.executable, "-m", module],
        env=training_data.subprocess_env(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(training_data.ROOT),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.split("RESULT", 1)[1])


def models(**config_overrides):
    """(packed classifier, one-example-a-row classifier) on one encoder, with the same head weights."""
    from bert_tf import BertClassifier, BertEncoder

    keras.utils.set_random_seed(0)
    encoder = BertEncoder(tiny_config(70, **config_overrides))
    packed = BertClassifier(encoder, NUM_CLASSES, examples_per_row=SLOTS)
    single = BertClassifier(encoder, NUM_CLASSES)
    single.classifier.set_weights(packed.classifier.get_weights())
    return packed, single


def _loss(logits, labels):
    return keras.ops.sum(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))


def _value_and_grads(model, inputs, loss_of_logits):
    """(logits, gradients of loss_of_logits(logits) w.r.t. the trainable weights, in their order)."""
    if keras.backend.backend() == "jax":
        import jax

        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss(weights):
            logits, _ = model.stateless_call(weights, non_trainable, inputs, training=False)
            return loss_of_logits(logits), logits

        (_, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(trainable)
        return np.asarray(logits), [np.asarray(g) for g in grads]
    import tensorflow as tf

    with tf.GradientTape() as tape:
        logits = model(inputs, training=False)
        loss = loss_of_logits(logits)
    grads = tape.gradient(loss, model.trainable_variables)
    return np.asarray(logits), [
        np.zeros(v.shape) if g is None else np.asarray(tf.convert_to_tensor(g))
        for v, g in zip(model.trainable_variables, grads)
    ]


def run(**config_overrides) -> dict:
    packed, single = models(**config_overrides)
    inputs, slot_examples = packed_batch()
    filled = slot_examples >= 0
    slot_labels = np.where(filled, np.array(LABELS)[np.maximum(slot_examples, 0)], 0).astype("int32")

    def packed_loss(logits):
        per_slot = keras.losses.sparse_categorical_crossentropy(slot_labels, logits, from_logits=True)
        return keras.ops.sum(per_slot * keras.ops.cast(filled, per_slot.dtype))

    packed_logits, packed_grads = _value_and_grads(packed, inputs, packed_loss)
    single_logits, single_grads = _value_and_grads(single, single_batch(), lambda x: _loss(x, np.array(LABELS)))
    logits_diff = np.abs(packed_logits[filled] - single_logits[slot_examples[filled]]).max()
    grads_diff = max(float(np.abs(p - s).max()) for p, s in zip(packed_grads, single_grads))
    return {
        "logits_diff": float(logits_diff),
        "logits_scale": float(np.abs(single_logits).max()),
        "grads_diff": grads_diff,
        "grads_scale": max(float(np.abs(g).max()) for g in single_grads),
        "num_weights": len(packed_grads),
        "same_weights": [v.path for v in packed.trainable_variables] == [v.path for v in single.trainable_variables],
    }


if __name__ == "__main__":
    print("RESULT", json.dumps(run()))
