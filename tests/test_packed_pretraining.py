"""Packed pretraining rows (several instances a row) give the losses and gradients of the instances one a row,
and the fused attention for packed rows (JAX; cuDNN on a GPU, XLA's kernel here) gives the einsum path's."""

import json
import subprocess
import sys

from bert_tf import BertConfig, BertEncoder, BertPretrainer
from tests.helpers import packed_check, packed_pretraining_check, training_data


def check_result(result):
    assert result["same_weights"] and result["num_weights"] > 40  # every weight, both heads included
    single, packed = result["single_losses"], result["packed_losses"]
    assert set(packed) == set(single) == {"loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"}
    # Far from zero and not trivially equal: the NSP mean is over 6 filled slots of 12 (empty ones masked out).
    assert single["nsp_loss"] > 0.1 and single["mlm_loss"] > 1.0 and 0.0 < single["nsp_accuracy"] < 1.0
    assert result["losses_diff"] <= 1e-5, result
    assert result["grads_scale"] > 0.1
    assert result["grads_diff"] <= 1e-5 * result["grads_scale"], result


def test_packed_rows_give_the_unpacked_losses_and_gradients():
    check_result(packed_pretraining_check.run())


def test_packed_rows_match_on_the_jax_backend():
    check_result(packed_check.run_on_jax("tests.helpers.packed_pretraining_check"))


def test_packed_pretrainer_outputs_a_sentence_logit_pair_per_slot_and_keeps_its_config():
    config = BertConfig(vocab_size=80, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    packed = BertPretrainer(BertEncoder(config), examples_per_row=3)
    batch = packed_pretraining_check.packed_batch()
    outputs = packed({name: batch[name] for name in packed.input})
    assert tuple(outputs["sentence_logits"].shape) == (4, 3, 2)
    assert tuple(outputs["mlm_logits"].shape) == (4, 6, 80)
    assert BertPretrainer.from_config(packed.get_config()).examples_per_row == 3


_FUSED_BLOCKS = r"""
import json, sys
sys.modules["tensorflow"] = None
import jax, jax.numpy as jnp, numpy as np
from bert_tf.layers import attention, packed_examples

ids = np.array([[1, 1, 1, 2, 2, 2, 2, 3, 3, 0, 0, 0], [1] * 12, [1, 1, 1, 1, 1, 2, 2, 2, 0, 0, 0, 0]], "int32")
bias = packed_examples.example_attention_bias(ids)
rng = np.random.default_rng(3)
q, k, v = (jnp.asarray(rng.normal(scale=2.0, size=(3, 12, 4, 8)), jnp.float32) for _ in range(3))
scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) + bias
einsum = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
fused = attention._attention_over_blocks(q, k, v, bias, implementation="xla")
result = {"function_diff": float(jnp.abs(fused - einsum).max()), "scale": float(jnp.abs(einsum).max())}
# Alone: the first example's outputs from its three tokens only.
alone = attention._attention_over_blocks(q[:1, :3], k[:1, :3], v[:1, :3], bias[:1, :, :3, :3], implementation="xla")
result["alone_diff"] = float(jnp.abs(alone - fused[:1, :3]).max())
lengths, offsets = attention.segments_of_blocks(bias, max_segments=4)  # cuDNN's packed layout, from the bias
result["segment_lengths"], result["segment_offsets"] = np.asarray(lengths).tolist(), np.asarray(offsets).tolist()

layer = attention.MultiHeadSelfAttention(num_heads=4, hidden_size=32, initializer_range=0.5, dtype="mixed_bfloat16")
states = rng.normal(size=(3, 12, 32)).astype("float32")
einsum_layer = np.asarray(layer(states, attention_bias=bias), "float32")
attention.fused_attention_available = lambda: True  # the GPU branch, forced: XLA's kernel on a CPU
fused_layer = np.asarray(layer(states, attention_bias=bias), "float32")
twin = attention.MultiHeadSelfAttention(num_heads=4, hidden_size=32, dtype="float32")
twin.build((None, None, 32))
twin.set_weights(layer.get_weights())
exact = np.asarray(twin(states, attention_bias=bias))
result["layer_scale"] = float(np.abs(exact).mean())
result["einsum_layer_error"] = float(np.abs(einsum_layer - exact).mean())
result["fused_layer_error"] = float(np.abs(fused_layer - exact).mean())
print(json.dumps(result))
"""


def test_fused_attention_over_packed_blocks_equals_the_einsum_path():
    """`_attention_over_blocks` (the fused kernel a GPU takes for packed rows) with XLA's implementation gives
    the einsum path's outputs to float32 rounding, each example's as if alone; the layer's branch, forced on a
    CPU in bfloat16, is as close to float32 as the einsum path."""
    env = training_data.subprocess_env(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", _FUSED_BLOCKS],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=str(training_data.ROOT),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["scale"] > 1.0
    assert found["function_diff"] <= 1e-5 * found["scale"], found
    assert found["alone_diff"] <= 1e-5 * found["scale"], found
    # Examples and the padding as segments, -1 past the last (rows: 3 examples + padding, one, 2 + padding).
    assert found["segment_lengths"] == [[3, 4, 2, 3], [12, -1, -1, -1], [5, 3, 4, -1]]
    assert found["segment_offsets"] == [[0, 3, 7, 9, -1], [0, -1, -1, -1, -1], [0, 5, 8, -1, -1]]
    # Attending another example's token would move outputs by about layer_scale.
    assert found["einsum_layer_error"] < 0.02 * found["layer_scale"], found
    assert found["fused_layer_error"] < 1.2 * found["einsum_layer_error"], found
