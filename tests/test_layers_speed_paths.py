"""The faster code paths of the layers give the results of the plain ones (issue 13)."""

import os
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

from bert_tf import layers
from bert_tf.layers.attention import padding_attention_bias
from bert_tf.layers.dropout import Dropout, dropout_threshold, fast_dropout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_dropout_realizes_the_documented_rate_and_keeps_the_mean():
    x = np.full((256, 4096), 2.0, "float32")
    y = np.asarray(fast_dropout(x, 0.1, keras.random.SeedGenerator(3)))
    threshold = dropout_threshold(0.1)
    assert threshold == 6554
    expected_rate = threshold / 65536
    # 5 standard deviations of a binomial fraction over 2**20 elements.
    assert abs(np.mean(y == 0) - expected_rate) < 5 * np.sqrt(expected_rate * (1 - expected_rate) / x.size)
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 2.0 * 65536 / (65536 - threshold), rtol=1e-6)
    assert abs(np.mean(y) - 2.0) < 0.01


def test_dropout_masks_follow_the_seed_state_and_change_every_call():
    x = np.ones((8, 33), "float32")  # an odd element count: the last 32-bit word is half used
    first = np.asarray(Dropout(0.5, seed=7)(x, training=True))
    again = np.asarray(Dropout(0.5, seed=7)(x, training=True))
    np.testing.assert_array_equal(first, again)
    layer = Dropout(0.5, seed=7)
    assert not np.array_equal(np.asarray(layer(x, training=True)), np.asarray(layer(x, training=True)))


def test_dropout_masks_are_independent_between_neighbours_seeds_and_calls():
    # The hashed words must not repeat a pattern along the counter or between seeds: for
    # independent Bernoulli(1/2) drops every pair statistic is 1/4 (5 sigma over 2**19 pairs).
    x = np.ones((512, 2048), "float32")
    generator = keras.random.SeedGenerator(0)
    first = np.asarray(fast_dropout(x, 0.5, generator)).ravel() == 0
    second = np.asarray(fast_dropout(x, 0.5, generator)).ravel() == 0
    other_seed = np.asarray(fast_dropout(x, 0.5, keras.random.SeedGenerator(1))).ravel() == 0
    tolerance = 5 * np.sqrt(0.25 * 0.75 / (first.size // 2))
    for offset in (1, 2, 3, 16, 2048):  # within a 32-bit word, across words, across rows
        assert abs(np.mean(first[:-offset] & first[offset:]) - 0.25) < tolerance, offset
    for a, b in ((first, second), (first, other_seed), (second, other_seed)):
        assert abs(np.mean(a & b) - 0.25) < tolerance
    # Each 16-bit half of a word drops on its own, at the documented rate.
    assert abs(np.mean(first[0::2]) - 0.5) < tolerance and abs(np.mean(first[1::2]) - 0.5) < tolerance


def test_dropout_is_the_identity_at_inference_and_at_rate_zero():
    x = np.random.default_rng(0).normal(size=(4, 5)).astype("float32")
    np.testing.assert_array_equal(np.asarray(Dropout(0.3)(x, training=False)), x)
    np.testing.assert_array_equal(np.asarray(Dropout(0.0)(x, training=True)), x)


def test_dropout_keeps_the_keras_config_and_seed_variable():
    layer = Dropout(0.25, seed=5, name="attention_dropout")
    reference = keras.layers.Dropout(0.25, seed=5, name="attention_dropout")
    assert layer.get_config() == dict(reference.get_config())
    assert [v.path.split("/")[-1] for v in layer.variables] == [v.path.split("/")[-1] for v in reference.variables]


def test_dropout_gradient_is_the_same_mask():
    layer = Dropout(0.4, seed=11)
    x = tf.constant(np.random.default_rng(1).normal(size=(6, 10)).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
    grad = tape.gradient(y, x).numpy()
    np.testing.assert_allclose(grad * x.numpy(), y.numpy(), rtol=1e-6, atol=1e-7)


def test_attention_with_precomputed_bias_equals_attention_with_mask():
    attention = layers.MultiHeadSelfAttention(num_heads=2, hidden_size=16, dropout_rate=0.0)
    rng = np.random.default_rng(2)
    hidden = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    with_mask = np.asarray(attention(hidden, mask))
    with_bias = np.asarray(attention(hidden, attention_bias=padding_attention_bias(mask)))
    np.testing.assert_array_equal(with_mask, with_bias)
    changed = hidden.copy()
    changed[0, 4:] = 100.0
    np.testing.assert_allclose(np.asarray(attention(changed, mask))[0, :4], with_mask[0, :4], rtol=1e-5, atol=1e-6)


def test_masked_lm_logits_equal_the_per_position_products():
    embedding = keras.layers.Embedding(40, 8)
    embedding.build()
    head = layers.MaskedLMHead(embedding)
    rng = np.random.default_rng(3)
    sequence = rng.normal(size=(3, 7, 8)).astype("float32")
    positions = np.array([[0, 2], [6, 1], [3, 3]], "int32")
    head.build()
    head.output_bias.assign(rng.normal(size=(40,)).astype("float32"))
    logits = np.asarray(head(sequence, positions))
    hidden = np.asarray(head.layer_norm(head.transform(sequence[np.arange(3)[:, None], positions])))
    expected = np.einsum("bph,vh->bpv", hidden, np.asarray(embedding.embeddings)) + np.asarray(head.output_bias)
    assert logits.shape == (3, 2, 40)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_dropout_on_the_jax_backend_without_tensorflow():
    code = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "import numpy as np\n"
        "from bert_tf.layers.dropout import Dropout\n"
        "dropout = Dropout(0.1, seed=1)\n"
        "y = np.asarray(dropout(np.ones((512, 512), 'float32'), training=True))\n"
        "z = np.asarray(dropout(np.ones((512, 512), 'float32'), training=True))\n"
        "print(float(np.mean((y == 0) & (z == 0))) < 0.02, round(float(np.mean(y == 0)), 2),"
        " sorted(round(float(v), 4) for v in np.unique(y)))\n"
    )
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    # Each call draws a new mask: two masks at rate 0.1 share about 1% of their zeros, not 10%.
    assert result.stdout.strip().splitlines()[-1] == "True 0.1 [0.0, 1.1111]"


def test_mlm_cross_entropy_and_hits_equal_keras_loss_and_argmax():
    from bert_tf.models.bert_pretrainer import sparse_cross_entropy_with_hits

    rng = np.random.default_rng(4)
    logits = (rng.normal(size=(6, 5, 300)) * 4).astype("float32")
    labels = rng.integers(0, 300, (6, 5)).astype("int32")
    labels[0, :] = logits[0].argmax(-1)  # some hits, at least one row of them
    loss, hits = sparse_cross_entropy_with_hits(labels, logits)
    reference = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    np.testing.assert_allclose(np.asarray(loss), np.asarray(reference), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(hits), (logits.argmax(-1) == labels).astype("float32"))
    assert np.asarray(hits)[0].all() and np.asarray(hits).mean() < 0.5
    with tf.GradientTape() as tape:
        tensor = tf.constant(logits)
        tape.watch(tensor)
        value = tf.reduce_sum(sparse_cross_entropy_with_hits(labels, tensor)[0])
    softmax = np.exp(logits - logits.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    np.testing.assert_allclose(tape.gradient(value, tensor).numpy(), softmax - np.eye(300)[labels], atol=1e-6)


def test_fused_attention_branch_computes_the_einsum_path(monkeypatch):
    """The `ops.dot_product_attention` branch (taken on a GPU with JAX) gives the einsum path's outputs."""
    from bert_tf.layers import attention

    assert not attention.fused_attention_available()  # TensorFlow on a CPU keeps the einsum path
    layer = attention.MultiHeadSelfAttention(num_heads=4, hidden_size=64, initializer_range=0.5, dtype="mixed_bfloat16")
    rng = np.random.default_rng(7)
    states = rng.normal(size=(3, 12, 64)).astype("float32")
    mask = np.ones((3, 12), "int32")
    mask[1, 8:] = 0
    mask[2, 2:] = 0
    einsum = np.asarray(layer(states, mask), "float32")
    assert not layer._fused(training=False)

    monkeypatch.setattr(attention, "fused_attention_available", lambda: True)
    assert layer._fused(training=False) and not layer._fused(training=True)  # dropout 0.1 keeps the einsum path
    fused = np.asarray(layer(states, mask), "float32")
    assert np.abs(einsum).mean() > 1.0  # weights drawn wide, so bfloat16's tolerance is small beside the values
    np.testing.assert_allclose(fused, einsum, rtol=2e-2, atol=0.1)
    # Padding still gets no weight: changing what it holds leaves the real positions as they were.
    other = states.copy()
    other[2, 2:] = 9.0
    np.testing.assert_allclose(np.asarray(layer(other, mask), "float32")[2, :2], fused[2, :2], rtol=2e-2, atol=0.1)
    assert attention.MultiHeadSelfAttention(4, 64, dropout_rate=0.0, dtype="mixed_bfloat16")._fused(training=True)
    assert not attention.MultiHeadSelfAttention(4, 64, dtype="float32")._fused(training=False)
