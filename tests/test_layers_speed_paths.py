"""The faster code paths of the layers give the results of the plain ones (issue 13)."""

import json
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


_JAX_FAST_PATHS = """
import contextlib, io, json, sys
sys.modules["tensorflow"] = None
import jax, jax.numpy as jnp, numpy as np
from jax.ad_checkpoint import print_saved_residuals
from bert_tf.layers import activations, attention

result = {}
# gelu_new: the gradient of the tanh GELU, with only the input kept for the backward pass.
x = jnp.asarray(np.random.default_rng(0).normal(scale=3.0, size=(64, 32)), jnp.float32)
weights = jnp.arange(32, dtype=jnp.float32)
def ours(x):
    return (activations.gelu_new(x).astype(jnp.float32) * weights).sum()
def autodiff(x):
    return (jax.nn.gelu(x, approximate=True).astype(jnp.float32) * weights).sum()
result["gelu_gradient_error"] = float(jnp.abs(jax.grad(ours)(x) - jax.grad(autodiff)(x)).max())
result["gelu_gradient_scale"] = float(jnp.abs(jax.grad(autodiff)(x)).max())
result["gelu_values_equal"] = bool(jnp.array_equal(activations.gelu_new(x), jax.nn.gelu(x, approximate=True)))
bf16 = x.astype(jnp.bfloat16)
bf16_gradient = jax.grad(lambda v: activations.gelu_new(v).astype(jnp.float32).sum())(bf16)
result["gelu_bf16_gradient_dtype"] = str(bf16_gradient.dtype)
for name, fn in (("ours", ours), ("autodiff", autodiff)):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print_saved_residuals(fn, bf16)
    result[name + "_residuals"] = [line for line in printed.getvalue().splitlines() if "[64,32]" in line]

# The fused attention branch (JAX on a GPU; forced here on the CPU, where it runs XLA's kernel with the lengths).
layer = attention.MultiHeadSelfAttention(num_heads=4, hidden_size=64, initializer_range=0.5, dtype="mixed_bfloat16")
rng = np.random.default_rng(7)
states = rng.normal(size=(3, 12, 64)).astype("float32")
mask = np.ones((3, 12), "int32")
mask[1, 8:] = 0
mask[2, 2:] = 0
einsum = np.asarray(layer(states, mask), "float32")
result["fused_before_patch"] = layer._fused(training=False)
attention.fused_attention_available = lambda: True
result["fused_inference"] = layer._fused(training=False)
result["fused_training_with_dropout"] = layer._fused(training=True)
fused = np.asarray(layer(states, mask), "float32")
real = mask.astype(bool)
result["mean_abs"] = float(np.abs(einsum[real]).mean())
# Both bfloat16 paths against the layer in float32 with the same weights (the einsum path rounds its scores
# to bfloat16; the fused kernel keeps them in float32).
twin = attention.MultiHeadSelfAttention(num_heads=4, hidden_size=64, dtype="float32")
twin.build((None, None, 64))
twin.set_weights(layer.get_weights())
exact = np.asarray(twin(states, mask))[real]
result["einsum_error"] = float(np.abs(einsum[real] - exact).mean())
result["fused_error"] = float(np.abs(fused[real] - exact).mean())
other = states.copy()
other[2, 2:] = 9.0
changed = np.asarray(layer(other, mask), "float32")
result["padding_content_error"] = float(np.abs(changed[real] - fused[real]).max())
holes = mask.copy()
holes[0, 3] = 0  # padding before real tokens: lengths cannot say it
poisoned = np.asarray(layer(states, holes), "float32")
result["hole_row_nan"] = bool(np.isnan(poisoned[0, : holes[0].sum()]).all())
result["other_rows_finite"] = bool(np.isfinite(poisoned[1:]).all())
empty = mask.copy()
empty[1] = 0  # an all-padding row (a filler example in a padded batch) is not a hole: it stays finite
result["empty_row_finite"] = bool(np.isfinite(np.asarray(layer(states, empty), "float32")).all())
print(json.dumps(result))
"""


def test_jax_fast_paths_gelu_gradient_and_attention_over_lengths():
    """JAX's fast paths: gelu_new's custom gradient and the fused attention branch that masks by lengths.

    gelu_new keeps only its input for the backward pass (what lets XLA:GPU fold it into the product's
    epilogue) and gives autodiff's gradient; the fused branch (taken on a GPU with JAX, forced here) gives the
    einsum path's outputs at real positions, ignores what padding holds, and turns a row whose padding comes
    before a real token into NaN instead of attending the wrong positions.
    """
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    result = subprocess.run(
        [sys.executable, "-c", _JAX_FAST_PATHS], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["gelu_values_equal"]
    assert found["gelu_gradient_scale"] > 30.0 and found["gelu_gradient_error"] < 1e-4
    assert found["gelu_bf16_gradient_dtype"] == "bfloat16"
    assert found["ours_residuals"] == ["bf16[64,32] from the argument x"], found["ours_residuals"]
    assert len(found["autodiff_residuals"]) > 1  # autodiff keeps the tanh (and more) besides the input

    assert not found["fused_before_patch"]  # a CPU keeps the einsum path
    assert found["fused_inference"] and not found["fused_training_with_dropout"]
    assert found["mean_abs"] > 1.0  # weights drawn wide, so bfloat16's tolerance is small beside the values
    # As close to float32 as the einsum path, give or take rounding; attending a padded position would be ~mean_abs.
    assert found["fused_error"] < 1.2 * found["einsum_error"] and found["einsum_error"] < 0.02 * found["mean_abs"], (
        found
    )
    assert found["padding_content_error"] == 0.0
    assert found["hole_row_nan"] and found["other_rows_finite"] and found["empty_row_finite"]
