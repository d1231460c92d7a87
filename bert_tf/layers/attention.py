"""Bidirectional multi-head self-attention with a padding mask."""

import functools
import math

import keras
from keras import ops

from bert_tf.layers.dropout import Dropout

# Added to the scores of padding positions. Scores are float32 here, so this
# drives their softmax weight to exactly zero.
_MASK_PENALTY = -1e9


def padding_attention_bias(input_mask):
    """The additive float32 [batch, 1, 1, seq_length] score bias for a padding mask.

    0 for real tokens and -1e9 for padding: adding it gives real positions
    exactly the softmax weights of masking the scores, at the cost of one
    broadcast add, and the encoder computes it once for all its layers.

    Args:
      input_mask: int or bool [batch, seq_length]; 1 for real tokens, 0 for padding.
    """
    is_padding = ops.logical_not(ops.cast(input_mask, "bool"))
    return ops.cast(is_padding, "float32")[:, None, None, :] * _MASK_PENALTY


@functools.cache
def fused_attention_available():
    """True on the JAX backend with a CUDA GPU, where `jax.nn.dot_product_attention` runs cuDNN's fused kernel.

    Elsewhere the einsum path below is kept: on CPUs and TensorFlow the fused op is the same products
    through another graph, so exported models and every CPU result stay as they are.
    """
    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.devices()[0].platform == "gpu"


def _attention_over_lengths(query, key, value, attention_bias):
    """JAX's fused attention, masking padding by each row's length: float [batch, seq, heads, head_size].

    cuDNN's padding mask by sequence lengths reads no [batch, 1, seq, seq] bias and computes no bias
    gradient. Lengths say what the mask says when padding comes after the real tokens,
    as every BERT input pipeline writes it; a row with padding before a real token cannot be said that way, so
    its outputs turn to NaN (and so does a loss over them) rather than attending the wrong positions. The query
    is expected already scaled; positions past a row's length come out as zeros. A row of padding only (a dummy
    example filling up a batch) has length 0 and is not a hole.

    Args:
      query, key, value: float [batch, seq, heads, head_size].
      attention_bias: `padding_attention_bias(input_mask)`, float [batch, 1, 1, seq].
    """
    import jax
    import jax.numpy as jnp

    is_real = attention_bias[:, 0, 0, :] == 0
    lengths = jnp.sum(is_real, axis=-1, dtype=jnp.int32)
    padding_last = jnp.all(is_real == (jnp.arange(is_real.shape[-1]) < lengths[:, None]), axis=-1)
    query = query * jnp.where(padding_last, 1.0, jnp.nan).astype(query.dtype)[:, None, None, None]
    return jax.nn.dot_product_attention(
        query,
        key,
        value,
        scale=1.0,
        query_seq_lengths=lengths,
        key_value_seq_lengths=lengths,
        implementation="cudnn" if jax.devices()[0].platform == "gpu" else "xla",
    )


def _attention_over_blocks(query, key, value, attention_bias, implementation=None):
    """JAX's fused attention under a per-query bias, such as packed examples' block-diagonal one.

    The bias goes to `jax.nn.dot_product_attention` as a boolean mask (a position takes part where its bias is
    0), which cuDNN reads as a [batch, 1, seq, seq] additive bias broadcast over heads (its own large negative
    number); every query keeps at least one key (padding attends to padding), so no row is all masked. The
    query is expected already scaled. Returns float [batch, seq, heads, head_size].

    Args:
      query, key, value: float [batch, seq, heads, head_size].
      attention_bias: float [batch, 1, seq, seq], 0 where a query may attend a key and about -1e9 elsewhere.
      implementation: "cudnn" or "xla"; None: cuDNN on a GPU, XLA elsewhere (what a CPU test compares).
    """
    import jax

    if implementation is None:
        implementation = "cudnn" if jax.devices()[0].platform == "gpu" else "xla"
    return jax.nn.dot_product_attention(
        query, key, value, mask=attention_bias == 0, scale=1.0, implementation=implementation
    )


def segments_of_blocks(attention_bias, max_segments: int):
    """(lengths, offsets) of the contiguous blocks of a block-diagonal bias, as cuDNN's packed layout reads them.

    Each run of tokens that attend to exactly each other is one segment (a packed row's examples, and its padding,
    which attends to itself). Returns int32 lengths [batch, max_segments] and start offsets
    [batch, max_segments + 1], -1 past a row's last segment; a row with more than `max_segments` segments would
    lose the rest, so pass the examples a row plus one (its padding).

    Args:
      attention_bias: float [batch, 1, seq, seq], 0 where a query may attend a key (`example_attention_bias`).
    """
    import jax.numpy as jnp

    allowed = attention_bias[:, 0] == 0
    previous_allowed = jnp.diagonal(allowed, offset=-1, axis1=1, axis2=2)  # [batch, seq - 1]: i attends i - 1
    starts = jnp.concatenate([jnp.ones_like(previous_allowed[:, :1]), jnp.logical_not(previous_allowed)], axis=1)
    segment = jnp.cumsum(starts.astype(jnp.int32), axis=1) - 1  # [batch, seq]
    member = segment[:, :, None] == jnp.arange(max_segments, dtype=jnp.int32)  # [batch, seq, max_segments]
    lengths = jnp.sum(member, axis=1, dtype=jnp.int32)
    first = jnp.argmax(member, axis=1).astype(jnp.int32)
    offsets = jnp.where(lengths > 0, first, -1)
    lengths = jnp.where(lengths > 0, lengths, -1)
    return lengths, jnp.concatenate([offsets, jnp.full_like(offsets[:, :1], -1)], axis=1)


def attention_over_segments(query, key, value, attention_bias, max_segments: int):
    """cuDNN's fused attention over a packed row's segments (Hopper or later; JAX's private cuDNN entry point).

    The same outputs as `_attention_over_blocks`, but the kernel reads segment lengths and offsets
    (`segments_of_blocks`) instead of a [batch, 1, seq, seq] bias, so it computes no bias gradient. Not taken by
    default: `benchmarks/train_throughput.py --attention=segments` puts it in place of `_attention_over_blocks`.
    """
    from jax._src.cudnn import fused_attention_stablehlo as cudnn

    lengths, offsets = segments_of_blocks(attention_bias, max_segments)
    return cudnn.dot_product_attention(
        query,
        key,
        value,
        q_seqlen=lengths,
        kv_seqlen=lengths,
        q_offsets=offsets,
        kv_offsets=offsets,
        scale=1.0,
        mask_type=cudnn.MaskType.PADDING,
    )


@keras.saving.register_keras_serializable(package="bert_tf")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over all (non-padding) positions.

    The query, key, value and output projections are [hidden, hidden] dense
    layers, the layout of the original BERT checkpoints. Scores and softmax are
    computed in float32 whatever the compute dtype, for mixed precision.

    Call arguments:
      hidden_states: float [batch, seq_length, hidden_size].
      input_mask: int or bool [batch, seq_length]; 1 for real tokens, 0 for padding.
      attention_bias: instead of `input_mask`, `padding_attention_bias(input_mask)` (float32
        [batch, 1, 1, seq_length]), so a stack of layers computes it once; or a per-query bias
        [batch, 1, seq_length, seq_length], such as the block-diagonal one of packed examples
        (`bert_tf.layers.packed_examples.example_attention_bias`).

    On JAX with a GPU in half precision and without dropout on the probabilities, the layer takes cuDNN's
    fused kernel: with a padding bias, each row's length is its padding mask, so padding must come after the
    real tokens, as BERT's input pipelines write it (`_attention_over_lengths`); with a per-query bias, the
    bias itself is the kernel's mask (`_attention_over_blocks`).

    Returns:
      float [batch, seq_length, hidden_size].

    Example (what padding holds does not change the real positions' outputs):

    >>> import numpy as np
    >>> from bert_tf.layers import MultiHeadSelfAttention
    >>> attention = MultiHeadSelfAttention(num_heads=2, hidden_size=8)
    >>> states = np.random.default_rng(0).normal(size=(1, 4, 8)).astype("float32")
    >>> mask = np.array([[1, 1, 1, 0]], "int32")
    >>> other = states.copy(); other[:, 3] = 5.0
    >>> bool(np.allclose(attention(states, mask)[:, :3], attention(other, mask)[:, :3], atol=1e-6))
    True
    """

    def __init__(self, num_heads, hidden_size, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads}).")
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.head_size = hidden_size // num_heads
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

        def dense(name):
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output")
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy, name="attention_dropout")

    def build(self, hidden_states_shape, input_mask_shape=None, attention_bias_shape=None):
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build((None, None, self.hidden_size))
        self.built = True

    def _fused(self, training):
        """Whether this call takes a fused kernel: no dropout on the probabilities, half precision, a GPU."""
        return (
            (not training or self.dropout_rate == 0)
            and self.compute_dtype in ("bfloat16", "float16")
            and fused_attention_available()
        )

    def call(self, hidden_states, input_mask=None, attention_bias=None, training=None):
        if attention_bias is None:
            if input_mask is None:
                raise ValueError("MultiHeadSelfAttention needs input_mask or attention_bias.")
            attention_bias = padding_attention_bias(input_mask)
        batch_size, seq_length = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        # The projections see [batch * seq_length, hidden] rows, as the feed-forward layers do: their bias
        # gradients are then sums over one axis, which XLA:GPU reduces without transposing the activations.
        rows = ops.reshape(hidden_states, (-1, self.hidden_size))

        def split_heads(x):
            return ops.reshape(x, (batch_size, seq_length, self.num_heads, self.head_size))

        # Scaling the query rather than the [batch, heads, seq, seq] scores touches fewer numbers; with
        # BERT's head size 64 the factor 1/8 is exact either way.
        query = split_heads(self.query(rows) * ops.cast(1.0 / math.sqrt(self.head_size), self.compute_dtype))
        key = split_heads(self.key(rows))
        value = split_heads(self.value(rows))

        if self._fused(training) and attention_bias.shape[2] == 1:
            context = _attention_over_lengths(query, key, value, attention_bias)
        elif self._fused(training):
            context = _attention_over_blocks(query, key, value, attention_bias)
        else:
            scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
            # Keras casts float call arguments to the compute dtype; the bias is 0 or about -1e9 in any of them.
            scores = ops.cast(scores, "float32") + ops.cast(attention_bias, "float32")
            probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
            probs = self.dropout(probs, training=training)
            context = ops.einsum("bhqk,bkhd->bqhd", probs, value)
        output = self.output_dense(ops.reshape(context, (-1, self.hidden_size)))
        return ops.reshape(output, (batch_size, seq_length, self.hidden_size))

    def compute_output_shape(self, hidden_states_shape, input_mask_shape=None, attention_bias_shape=None):
        return tuple(hidden_states_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_size=self.hidden_size,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
