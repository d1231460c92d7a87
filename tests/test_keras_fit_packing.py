"""bert_tf.jobs.keras_fit's packed rows: the numpy packing is packed_rows' (same tables, same rows), and a packed
classifier gives every example its logits and loss alone, on the Keras backend in use (TensorFlow here; the
JAX run is tests/test_jax_model_dir.py's)."""

import keras
import numpy as np
import tensorflow as tf

from bert_tf import BertClassifier, BertConfig, BertEncoder
from bert_tf.data import packed_rows
from bert_tf.jobs.keras_fit import _packed_batches_class, packed_logits

SEQ_LENGTH = 16


def _inputs(lengths, vocab_size=60, seed=0):
    rng = np.random.default_rng(seed)
    inputs = {name: np.zeros((len(lengths), SEQ_LENGTH), np.int32) for name in packed_rows.ENCODER_KEYS}
    for i, n in enumerate(lengths):
        inputs["input_word_ids"][i, :n] = [2, *rng.integers(5, vocab_size, n - 2), 3]
        inputs["input_mask"][i, :n] = 1
        inputs["input_type_ids"][i, n // 2 : n] = 1
    return inputs


def test_numpy_packing_places_and_gathers_as_the_tf_data_path():
    rng = np.random.default_rng(3)
    lengths = rng.integers(2, SEQ_LENGTH + 1, 60)
    slots = packed_rows.max_examples_per_row(SEQ_LENGTH)
    order = rng.permutation(60)
    expected = packed_rows.slot_table(tf.constant(order), tf.constant(lengths), SEQ_LENGTH, slots).numpy()
    table = packed_rows.slot_table_numpy(order, lengths, SEQ_LENGTH, slots)
    np.testing.assert_array_equal(table, expected)
    inputs, labels = _inputs(lengths), rng.integers(0, 2, 60).astype(np.int32)
    packed = packed_rows.pack_numpy(table, inputs, {"label": labels})
    columns = dict(inputs, label=labels)
    tables = tf.data.Dataset.from_tensors(tf.constant(table))
    (reference,) = list(packed_rows.gather_packed_batches(tables, columns, SEQ_LENGTH, slot_keys=("label",)))
    assert sorted(packed) == sorted(reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(packed[name], value.numpy(), err_msg=name)


def _classifiers():
    keras.utils.set_random_seed(2)
    config = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=SEQ_LENGTH)  # fmt: skip
    encoder = BertEncoder(config)
    packed = BertClassifier(encoder, num_classes=3, examples_per_row=packed_rows.max_examples_per_row(SEQ_LENGTH))
    alone = BertClassifier(encoder, num_classes=3)
    alone.classifier.set_weights(packed.classifier.get_weights())
    return packed, alone


def test_packed_logits_and_loss_equal_each_example_alone():
    packed, alone = _classifiers()
    # An example that fills a row alone, one that leaves a row one token, and short ones side by side.
    lengths = [SEQ_LENGTH, 5, 4, SEQ_LENGTH - 1, 3, 6, 2, 9, 7]
    inputs = _inputs(lengths)
    expected = alone.predict(inputs, verbose=0)
    got = packed_logits(packed, inputs, batch_size=4, max_seq_length=SEQ_LENGTH)
    assert np.max(np.abs(got - expected)) <= 1e-5
    # A training batch: the loss is the mean over its examples, as unpacked.
    labels = np.array([0, 1, 2, 1, 0, 2, 1, 0, 1], np.int32)
    batches = _packed_batches_class()(inputs, labels, batch_size=len(lengths), max_seq_length=SEQ_LENGTH, seed=1)
    assert len(batches) == 1
    x, y, weights = batches[0]
    members = batches.table[batches.table >= 0]
    assert sorted(members.tolist()) == list(range(len(lengths)))  # every example once
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")
    per_example = keras.losses.sparse_categorical_crossentropy(labels, expected, from_logits=True)
    packed_loss = float(loss(y, packed.predict(x, verbose=0), sample_weight=weights))
    assert abs(packed_loss - float(np.mean(per_example))) <= 1e-5
    np.testing.assert_array_equal(y[weights > 0], labels[members])
    # ... and so are its gradients (dropout off): every weight's, encoder and head.
    with tf.GradientTape() as tape:
        packed_value = loss(y, packed(x, training=False), sample_weight=weights)
    packed_gradients = tape.gradient(packed_value, packed.trainable_variables)
    with tf.GradientTape() as tape:
        alone_value = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
            labels, alone(inputs, training=False)
        )
    alone_gradients = tape.gradient(alone_value, alone.trainable_variables)
    assert len(packed_gradients) == len(alone_gradients) > 10
    for got_gradient, expected_gradient in zip(packed_gradients, alone_gradients):
        difference = tf.convert_to_tensor(got_gradient) - tf.convert_to_tensor(expected_gradient)
        assert float(tf.reduce_max(tf.abs(difference))) <= 1e-5


def test_each_epoch_packs_a_new_random_order_from_the_seed():
    lengths = np.random.default_rng(0).integers(2, 9, 40)
    inputs, labels = _inputs(lengths), np.zeros(40, np.int32)
    batches = _packed_batches_class()(inputs, labels, batch_size=8, max_seq_length=SEQ_LENGTH, seed=5)
    again = _packed_batches_class()(inputs, labels, batch_size=8, max_seq_length=SEQ_LENGTH, seed=5)
    first = batches.table.copy()
    np.testing.assert_array_equal(first, again.table)
    batches.on_epoch_end()
    assert len(batches) == 5 and batches.table.shape == first.shape and not np.array_equal(batches.table, first)
    assert batches.rows < 8  # several examples a row
