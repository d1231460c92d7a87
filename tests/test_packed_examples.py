"""Packed rows (several examples a row, `input_example_ids`) compute what the examples compute one by one."""

import os

import numpy as np
import tensorflow as tf

from bert_tf import BertClassifier
from bert_tf.layers import packed_examples
from tests.helpers import packed_check

IDS = np.array([[1, 1, 1, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]], "int32")


def test_position_ids_restart_at_every_example():
    expected = [[0, 1, 2, 0, 1, 0, 0, 1], [0, 1, 2, 3, 4, 5, 6, 7]]
    np.testing.assert_array_equal(packed_examples.example_position_ids(IDS), expected)


def test_attention_bias_is_block_diagonal():
    allowed = np.asarray(packed_examples.example_attention_bias(IDS))[:, 0] == 0
    np.testing.assert_array_equal(allowed[0], IDS[0][:, None] == IDS[0][None, :])
    assert allowed[1].all()
    assert not allowed[0][:6, 6:].any() and not allowed[0][6:, :6].any()  # padding and examples never mix


def test_first_token_states_pick_each_examples_first_token_and_zeros_for_empty_slots():
    sequence = np.arange(2 * 8 * 2, dtype="float32").reshape(2, 8, 2) + 1.0
    states = np.asarray(packed_examples.example_first_token_states(sequence, IDS, num_slots=4))
    np.testing.assert_array_equal(states[0], [sequence[0, 0], sequence[0, 3], sequence[0, 5], [0.0, 0.0]])
    np.testing.assert_array_equal(states[1], [sequence[1, 0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])


def check_result(result):
    assert result["same_weights"] and result["num_weights"] > 20  # every weight of the model is compared
    # The scales show the compared values are far from zero, so the tolerance is a real bound.
    assert result["logits_scale"] > 0.1 and result["grads_scale"] > 0.1
    assert result["logits_diff"] <= 1e-5, result
    # Gradients are sums over every token of several examples: bounded relative to the largest of them.
    assert result["grads_diff"] <= 1e-5 * result["grads_scale"], result


def test_packed_rows_give_the_logits_and_gradients_of_the_examples_one_by_one():
    check_result(packed_check.run())


def test_packed_rows_match_with_albert_factorised_and_shared_layers():
    check_result(packed_check.run(embedding_size=8, share_layer_weights=True))


def test_packed_rows_match_on_the_jax_backend():
    check_result(packed_check.run_on_jax("tests.helpers.packed_check"))


def test_xla_compiled_packed_logits_equal_eager_ones():
    packed, _ = packed_check.models()
    inputs, slot_examples = packed_check.packed_batch()
    compiled = tf.function(lambda x: packed(x, training=False), jit_compile=True)
    eager = np.asarray(packed(inputs, training=False))
    filled = slot_examples >= 0
    np.testing.assert_allclose(np.asarray(compiled(inputs))[filled], eager[filled], atol=1e-5)


def test_packed_and_unpacked_classifiers_share_one_checkpoint_layout(tmp_path):
    packed, _ = packed_check.models()
    path = tf.train.Checkpoint(**packed.checkpoint_items).write(os.path.join(tmp_path, "ckpt"))
    fresh_packed, single = packed_check.models()  # same seed: overwrite the weights to see the restore work
    for variable in single.trainable_variables:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    status = tf.train.Checkpoint(**single.checkpoint_items).read(path)
    status.assert_existing_objects_matched()
    inputs, slot_examples = packed_check.packed_batch()
    packed_logits = np.asarray(packed(inputs, training=False))
    second = packed_check.single_batch([1])  # the first example of row 1
    np.testing.assert_allclose(np.asarray(single(second, training=False))[0], packed_logits[1, 0], atol=1e-5)
    # The backend-neutral weights file too: written from the packed model, read into one example a row.
    from bert_tf.checkpoints import weights_file

    weights_file.write_weights_file(str(tmp_path), packed)
    for variable in single.trainable_variables:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    weights_file.load_weights_file(single, weights_file.weights_path(str(tmp_path)))
    np.testing.assert_allclose(np.asarray(single(second, training=False))[0], packed_logits[1, 0], atol=1e-5)
    assert sorted(single.input) == ["input_mask", "input_type_ids", "input_word_ids"]
    assert sorted(fresh_packed.input) == ["input_example_ids", "input_mask", "input_type_ids", "input_word_ids"]
    assert BertClassifier.from_config(packed.get_config()).examples_per_row == packed_check.SLOTS


def test_packed_outputs_docstring_example_runs():
    import doctest
    import io

    from bert_tf import BertEncoder

    (test,) = doctest.DocTestFinder(recurse=False).find(BertEncoder.packed_outputs, "packed_outputs")
    report = io.StringIO()
    result = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE).run(test, out=report.write)
    assert result.attempted >= 5 and result.failed == 0, report.getvalue()
