"""Packed pretraining rows against the same instances one a row, on whichever Keras backend runs it.

`run()` builds a tiny `BertPretrainer` twice on one encoder (packed with 3 slots a row, and one instance a
row), packs six instances of 16-token rows (one fills a row alone, one row has all three slots filled, one
a slot and a token left, one a single short instance), and returns the largest differences between the two
batches' `pretraining_losses` and their gradients. Run as a script
(`KERAS_BACKEND=jax python -m tests.helpers.packed_pretraining_check`) it prints them as JSON.
"""

import json

import keras
import numpy as np

SEQ_LENGTH, SLOTS, PREDICTIONS = 16, 3, 2
# (word ids, type ids, masked positions within the instance, next-sentence label): [CLS]=2, [SEP]=3, [MASK]=4.
INSTANCES = [
    ([2] + list(range(10, 17)) + [3] + list(range(20, 26)) + [3], [0] * 9 + [1] * 7, [3, 12], 0),  # a row alone
    ([2, 30, 4, 3, 31, 3], [0] * 4 + [1] * 2, [2], 1),  # one masked position: the other is padding
    ([2, 40, 41, 3, 42, 4, 3], [0] * 4 + [1] * 3, [1, 5], 0),
    ([2, 50, 3], [0] * 3, [1], 1),
    ([2, 4, 61, 3, 62, 63, 3], [0] * 4 + [1] * 3, [1, 4], 1),
    ([2, 70, 71, 3, 4, 3], [0] * 4 + [1] * 2, [4], 0),
]
ROWS = [[0], [1, 3, 5], [2, 4], []]  # 16, 15 and 14 of 16 tokens; the last row is padding only
MASKED_IDS = 66  # the label at each masked position (any vocabulary id; the same either way)


def _row(instances, slots):
    """One row's arrays: packed `instances` (indices), with example ids when `slots`."""
    row = {k: np.zeros(SEQ_LENGTH, "int32") for k in ("input_word_ids", "input_type_ids", "input_mask")}
    row["input_example_ids"] = np.zeros(SEQ_LENGTH, "int32")
    positions, labels = [], np.full(slots or 1, -1, "int32")
    start = 0
    for slot, index in enumerate(instances):
        words, types, masked, label = INSTANCES[index]
        end = start + len(words)
        row["input_word_ids"][start:end], row["input_type_ids"][start:end] = words, types
        row["input_mask"][start:end], row["input_example_ids"][start:end] = 1, slot + 1
        positions += [start + p for p in masked]
        labels[slot] = label
        start = end
    width = PREDICTIONS * (slots or 1)
    row["masked_lm_positions"] = np.array(positions + [0] * (width - len(positions)), "int32")
    row["masked_lm_weights"] = np.array([1.0] * len(positions) + [0.0] * (width - len(positions)), "float32")
    row["masked_lm_ids"] = np.full(width, MASKED_IDS, "int32")
    row["next_sentence_labels"] = labels if slots else labels[0]
    return row


def _stack(rows, packed):
    batch = {k: np.stack([row[k] for row in rows]) for k in rows[0]}
    if not packed:
        del batch["input_example_ids"]
    return batch


def packed_batch():
    return _stack([_row(instances, SLOTS) for instances in ROWS], packed=True)


def single_batch():
    return _stack([_row([index], None) for index in range(len(INSTANCES))], packed=False)


def models():
    """(packed pretrainer, one-instance-a-row pretrainer) on one encoder, with the same head weights."""
    from bert_tf import BertEncoder, BertPretrainer
    from tests.helpers.packed_check import tiny_config

    keras.utils.set_random_seed(0)
    encoder = BertEncoder(tiny_config(80))
    packed = BertPretrainer(encoder, examples_per_row=SLOTS)
    single = BertPretrainer(encoder)
    single.masked_lm.set_weights(packed.masked_lm.get_weights())
    single.next_sentence.set_weights(packed.next_sentence.get_weights())
    return packed, single


def _losses_and_grads(model, batch):
    """(pretraining_losses as floats, gradients of its `loss` w.r.t. the trainable weights, in their order)."""
    from bert_tf import pretraining_losses

    inputs = {name: batch[name] for name in model.input}
    if keras.backend.backend() == "jax":
        import jax

        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss(weights):
            outputs, _ = model.stateless_call(weights, non_trainable, inputs, training=False)
            losses = pretraining_losses(batch, outputs)
            return losses["loss"], losses

        (_, losses), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(trainable)
    else:
        import tensorflow as tf

        with tf.GradientTape() as tape:
            losses = pretraining_losses(batch, model(inputs, training=False))
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(losses["loss"], model.trainable_variables)]
    return {k: float(v) for k, v in losses.items()}, [np.asarray(g) for g in grads]


def run() -> dict:
    packed, single = models()
    packed_losses, packed_grads = _losses_and_grads(packed, packed_batch())
    single_losses, single_grads = _losses_and_grads(single, single_batch())
    return {
        "packed_losses": packed_losses,
        "single_losses": single_losses,
        "losses_diff": max(abs(packed_losses[k] - single_losses[k]) for k in single_losses),
        "grads_diff": max(float(np.abs(p - s).max()) for p, s in zip(packed_grads, single_grads)),
        "grads_scale": max(float(np.abs(g).max()) for g in single_grads),
        "num_weights": len(packed_grads),
        "same_weights": [v.path for v in packed.trainable_variables] == [v.path for v in single.trainable_variables],
    }


if __name__ == "__main__":
    print("RESULT", json.dumps(run()))
