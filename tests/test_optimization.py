"""Tests of bert_tf.training.optimization: BERT's AdamW, its schedule and clipping."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertEncoder, BertPretrainer
from bert_tf.training import AdamWeightDecay, WarmupPolynomialDecay, create_optimizer


def _variable(value, name):
    # A tf.Variable: its name may hold a scope ("dense/bias"), a Keras Variable's may not.
    return tf.Variable(np.asarray(value, np.float32), name=name)


def _bert_adam_step(w, g, m, v, lr, beta_1=0.9, beta_2=0.999, eps=1e-6, decay=0.0, bias_correction=False, t=1):
    """The original BERT update in numpy (optionally with Adam's bias correction)."""
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g * g
    m_hat, v_hat = (m / (1 - beta_1**t), v / (1 - beta_2**t)) if bias_correction else (m, v)
    update = m_hat / (np.sqrt(v_hat) + eps) + decay * w
    return w - lr * update, m, v


def test_weight_decay_skips_layer_norm_and_bias_variables(tiny_config):
    model = BertPretrainer(BertEncoder(tiny_config))
    optimizer = AdamWeightDecay(model.trainable_variables, weight_decay_rate=0.01)
    decayed = dict(zip(optimizer.variable_names, optimizer.decay_mask))
    assert len(decayed) == len(model.trainable_variables)
    for name in (
        "transformer_layer_0/attention_layer_norm/gamma",
        "transformer_layer_1/output_layer_norm/beta",
        "embeddings/layer_norm/gamma",
        "masked_lm/layer_norm/beta",
        "masked_lm/output_bias",
        "transformer_layer_0/attention/query/bias",
        "pooler/bias",
        "next_sentence/logits/bias",
    ):
        assert decayed[name] is False, name
    for name in (
        "transformer_layer_0/attention/query/kernel",
        "transformer_layer_1/intermediate/kernel",
        "embeddings/word_embeddings/embeddings",
        "embeddings/position_embeddings",
        "pooler/kernel",
        "masked_lm/transform/kernel",
        "next_sentence/logits/kernel",
    ):
        assert decayed[name] is True, name
    # Every variable is either decayed or a LayerNorm/bias one.
    for name, decay in decayed.items():
        assert decay == (("layer_norm" not in name) and ("bias" not in name)), name


def test_decay_is_decoupled_and_applied_only_where_allowed():
    kernel, bias = _variable([1.0, -2.0], "dense/kernel"), _variable([3.0, 4.0], "dense/bias")
    optimizer = AdamWeightDecay([kernel, bias], learning_rate=0.1, weight_decay_rate=0.5, clip_norm=None)
    optimizer.apply_gradients([tf.zeros(2), tf.zeros(2)])
    # Zero gradients: Adam's term is 0, so only the decay (lr * rate * w) moves the kernel.
    np.testing.assert_allclose(kernel.numpy(), [1.0 - 0.1 * 0.5 * 1.0, -2.0 + 0.1 * 0.5 * 2.0], rtol=1e-6)
    np.testing.assert_array_equal(bias.numpy(), [3.0, 4.0])


@pytest.mark.parametrize("bias_correction", [False, True])
def test_update_matches_the_reference_formula(bias_correction):
    w0 = np.array([0.5, -1.0, 2.0], np.float32)
    grads = [np.array([0.1, -0.3, 0.2], np.float32), np.array([-0.2, 0.05, 0.4], np.float32)]
    weight = _variable(w0, "layer/kernel")
    optimizer = AdamWeightDecay(
        [weight], learning_rate=0.01, weight_decay_rate=0.01, clip_norm=None, bias_correction=bias_correction
    )
    w, m, v = w0.astype(np.float64), np.zeros(3), np.zeros(3)
    for t, g in enumerate(grads, start=1):
        optimizer.apply_gradients([tf.constant(g)])
        w, m, v = _bert_adam_step(w, g, m, v, lr=0.01, decay=0.01, bias_correction=bias_correction, t=t)
        np.testing.assert_allclose(weight.numpy(), w, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(optimizer.m[0].numpy(), m, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(optimizer.v[0].numpy(), v, rtol=1e-5, atol=1e-10)
    assert int(optimizer.iterations.numpy()) == 2


def test_gradients_are_clipped_to_the_global_norm():
    a, b = _variable([0.0, 0.0], "a/kernel"), _variable([0.0], "b/kernel")
    optimizer = AdamWeightDecay([a, b], learning_rate=0.0, weight_decay_rate=0.0, clip_norm=1.0)
    norm = optimizer.apply_gradients([tf.constant([3.0, 0.0]), tf.constant([4.0])])
    assert float(norm) == pytest.approx(5.0)
    # m = (1 - beta_1) * clipped gradient, and the clipped gradient is g / 5.
    np.testing.assert_allclose(optimizer.m[0].numpy(), [0.1 * 0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(optimizer.m[1].numpy(), [0.1 * 0.8], rtol=1e-6)

    small = AdamWeightDecay([_variable([0.0], "c/kernel")], learning_rate=0.0, clip_norm=1.0)
    small.apply_gradients([tf.constant([0.5])])
    np.testing.assert_allclose(small.m[0].numpy(), [0.05], rtol=1e-6)  # below the norm: unchanged


def test_skipped_update_changes_nothing():
    weight = _variable([1.0, 2.0], "x/kernel")
    optimizer = AdamWeightDecay([weight], learning_rate=0.1)
    optimizer.apply_gradients([tf.constant([np.inf, 1.0])], apply_update=tf.constant(False))
    np.testing.assert_array_equal(weight.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(optimizer.m[0].numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(optimizer.v[0].numpy(), [0.0, 0.0])
    assert int(optimizer.iterations.numpy()) == 0


def test_schedule_warms_up_linearly_then_decays_linearly_to_zero():
    schedule = WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    expected = {0: 0.0, 5: 5e-4, 9: 9e-4, 10: 1e-3 * 0.9, 55: 1e-3 * 0.45, 99: 1e-5, 100: 0.0, 150: 0.0}
    for step, lr in expected.items():
        assert float(schedule(step)) == pytest.approx(lr, abs=1e-9), step
    no_warmup = WarmupPolynomialDecay(2e-5, num_train_steps=10)
    assert float(no_warmup(0)) == pytest.approx(2e-5)
    assert float(no_warmup(5)) == pytest.approx(1e-5)
    squared = WarmupPolynomialDecay(1.0, num_train_steps=10, power=2.0, end_learning_rate=0.1)
    assert float(squared(5)) == pytest.approx(0.9 * 0.25 + 0.1)
    assert WarmupPolynomialDecay.from_config(schedule.get_config()).get_config() == schedule.get_config()


def test_every_training_path_uses_the_one_schedule():
    # The custom loop's schedule and the `fit` programs' (Keras 3 ops; tf_keras' TensorFlow ops) wrap one
    # function of the step.
    from bert_tf.training.schedule import warmup_linear_decay

    loop = WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    base_class = keras.optimizers.schedules.LearningRateSchedule
    schedules = [
        warmup_linear_decay(base_class, ops, learning_rate=1e-3, num_train_steps=100, warmup_proportion=0.1)
        for ops in (keras.ops, tf)
    ]
    for other in schedules:
        for step in (0, 5, 10, 55, 99, 100, 150):
            assert float(other(step)) == pytest.approx(float(loop(step)), abs=1e-12), step


def test_schedule_rejects_impossible_settings():
    with pytest.raises(ValueError, match="num_warmup_steps"):
        WarmupPolynomialDecay(1e-4, num_train_steps=10, num_warmup_steps=11)
    with pytest.raises(ValueError, match="num_train_steps"):
        WarmupPolynomialDecay(1e-4, num_train_steps=0)


def test_create_optimizer_uses_the_schedule_on_its_update_count():
    weight = _variable([1.0], "w/kernel")
    optimizer = create_optimizer([weight], learning_rate=1e-2, num_train_steps=10, num_warmup_steps=2)
    assert float(optimizer.current_learning_rate) == 0.0
    optimizer.apply_gradients([tf.constant([1.0])])
    # The first update of a warm-up uses lr 0 (as the original BERT): only the moments move.
    np.testing.assert_array_equal(weight.numpy(), [1.0])
    assert float(optimizer.current_learning_rate) == pytest.approx(5e-3)
    optimizer.apply_gradients([tf.constant([1.0])])
    assert weight.numpy()[0] < 1.0


def test_optimizer_state_round_trips_through_a_checkpoint(tmp_path):
    weight = _variable([1.0, 2.0], "w/kernel")
    optimizer = AdamWeightDecay([weight], learning_rate=0.1)
    optimizer.apply_gradients([tf.constant([0.3, -0.1])])
    path = tf.train.Checkpoint(optimizer=optimizer).save(str(tmp_path / "ckpt"))
    saved = {name for name, _ in tf.train.list_variables(path) if name.startswith("optimizer/")}
    # Only the optimizer's own state: the model's variable is not saved again under it.
    assert saved == {
        "optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE",
        "optimizer/m/0/.ATTRIBUTES/VARIABLE_VALUE",
        "optimizer/v/0/.ATTRIBUTES/VARIABLE_VALUE",
    }

    fresh = AdamWeightDecay([_variable([0.0, 0.0], "w/kernel")], learning_rate=0.1)
    tf.train.Checkpoint(optimizer=fresh).read(path).assert_existing_objects_matched()
    assert int(fresh.iterations.numpy()) == 1
    np.testing.assert_array_equal(fresh.m[0].numpy(), optimizer.m[0].numpy())
    np.testing.assert_array_equal(fresh.v[0].numpy(), optimizer.v[0].numpy())
