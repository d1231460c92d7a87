"""Tests of bert_tf.training.lamb: LAMB's update against a numpy computation, its exclusions, clipping,
checkpoint layout and the optimizer choice of `TrainingConfig`."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import TrainingConfig, create_optimizer
from bert_tf.training.lamb import Lamb
from bert_tf.training.optimization import AdamWeightDecay


def _variable(value, name):
    return tf.Variable(np.asarray(value, np.float32), name=name)


def _lamb_step(w, g, m, v, t, lr, decay, adapt, beta_1=0.9, beta_2=0.999, eps=1e-6):
    """You et al. (2019), Algorithm 2, with decoupled decay and the trust ratio ||w|| / ||update||, in float64."""
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g * g
    update = (m / (1 - beta_1**t)) / (np.sqrt(v / (1 - beta_2**t)) + eps) + decay * w
    ratio = 1.0
    if adapt and np.linalg.norm(w) > 0 and np.linalg.norm(update) > 0:
        ratio = np.linalg.norm(w) / np.linalg.norm(update)
    return w - lr * ratio * update, m, v


def test_two_steps_match_the_hand_computation_with_clipping_and_exclusions():
    start = {
        "layer/kernel": np.array([[0.5, -1.0], [2.0, 0.25]]),
        "layer/bias": np.array([0.1, -0.2]),
        "layer_norm/gamma": np.array([1.0, 1.0]),
        "zero/kernel": np.zeros(2),  # ||w|| = 0: the ratio is 1
    }
    grads = [
        [np.array([[0.3, -0.4], [1.2, 0.5]]), np.array([0.6, -0.1]), np.array([0.2, 0.3]), np.array([0.4, 0.4])],
        [np.array([[-0.1, 0.2], [0.05, 0.3]]), np.array([0.2, 0.2]), np.array([-0.1, 0.1]), np.array([0.1, -0.3])],
    ]
    variables = [_variable(value, name) for name, value in start.items()]
    optimizer = Lamb(variables, learning_rate=0.05, weight_decay_rate=0.01, clip_norm=1.0)
    assert dict(zip(optimizer.variable_names, optimizer.adapt_mask)) == {
        "layer/kernel:0": True,
        "layer/bias:0": False,
        "layer_norm/gamma:0": False,
        "zero/kernel:0": True,
    }
    weights = [value.astype(np.float64) for value in start.values()]
    moments = [(np.zeros_like(w), np.zeros_like(w)) for w in weights]
    decays = [0.01, 0.0, 0.0, 0.01]
    for t, step_grads in enumerate(grads, start=1):
        norm = optimizer.apply_gradients([tf.constant(g, tf.float32) for g in step_grads])
        # All-reduced gradients come in; the global norm is clipped to 1 before the moments.
        global_norm = np.sqrt(sum((g**2).sum() for g in step_grads))
        assert float(norm) == pytest.approx(global_norm, rel=1e-6)
        scale = min(1.0, 1.0 / global_norm)
        for i, (g, adapt) in enumerate(zip(step_grads, optimizer.adapt_mask)):
            weights[i], m, v = _lamb_step(
                weights[i], g * scale, *moments[i], t=t, lr=0.05, decay=decays[i], adapt=adapt
            )
            moments[i] = (m, v)
        for variable, expected, (m, v), state_m, state_v in zip(variables, weights, moments, optimizer.m, optimizer.v):
            # float32: 1 - 0.999**t alone is off by 1e-5 relative, so steps of 0.05 carry errors near 1e-6.
            np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-5, atol=2e-6, err_msg=variable.name)
            np.testing.assert_allclose(state_m.numpy(), m, rtol=1e-5, atol=1e-8)
            np.testing.assert_allclose(state_v.numpy(), v, rtol=1e-5, atol=1e-10)
    assert int(optimizer.iterations.numpy()) == 2


def test_trust_ratio_makes_the_step_independent_of_the_gradient_scale():
    steps = []
    for gradient_scale in (0.1, 10.0):
        weight = _variable([3.0, 4.0], "dense/kernel")
        optimizer = Lamb([weight], learning_rate=0.1, weight_decay_rate=0.0, clip_norm=None)
        optimizer.apply_gradients([tf.constant([gradient_scale, 2 * gradient_scale])])
        steps.append(np.array([3.0, 4.0]) - weight.numpy())
    # ||step|| = lr * ||w|| = 0.5 in both cases, along the same direction.
    for step in steps:
        assert np.linalg.norm(step) == pytest.approx(0.5, rel=1e-5)
    np.testing.assert_allclose(steps[0], steps[1], rtol=1e-4)


def test_lamb_keeps_adams_checkpoint_layout_and_resumes_exactly(tmp_path):
    weight = _variable([1.0, 2.0], "w/kernel")
    optimizer = Lamb([weight], learning_rate=0.1)
    optimizer.apply_gradients([tf.constant([0.3, -0.1])])
    path = tf.train.Checkpoint(optimizer=optimizer, weight=weight).save(str(tmp_path / "ckpt"))
    saved = {name for name, _ in tf.train.list_variables(path) if name.startswith("optimizer/")}
    assert saved == {
        "optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE",
        "optimizer/m/0/.ATTRIBUTES/VARIABLE_VALUE",
        "optimizer/v/0/.ATTRIBUTES/VARIABLE_VALUE",
    }
    optimizer.apply_gradients([tf.constant([-0.2, 0.4])])

    fresh_weight = _variable([0.0, 0.0], "w/kernel")
    fresh = Lamb([fresh_weight], learning_rate=0.1)
    tf.train.Checkpoint(optimizer=fresh, weight=fresh_weight).read(path).assert_existing_objects_matched()
    fresh.apply_gradients([tf.constant([-0.2, 0.4])])
    # The bias correction counts from the restored step: the resumed second step is the uninterrupted one.
    np.testing.assert_array_equal(fresh_weight.numpy(), weight.numpy())
    np.testing.assert_array_equal(fresh.m[0].numpy(), optimizer.m[0].numpy())


def test_training_config_chooses_the_optimizer():
    weight = _variable([1.0], "w/kernel")
    assert type(create_optimizer([weight], 1e-3, 10, optimizer="lamb")) is Lamb
    assert type(create_optimizer([weight], 1e-3, 10)) is AdamWeightDecay
    assert TrainingConfig(num_train_steps=10, optimizer="lamb").optimizer == "lamb"
    with pytest.raises(ValueError, match="--optimizer must be one of adamw, lamb"):
        TrainingConfig(num_train_steps=10, optimizer="sgd")
