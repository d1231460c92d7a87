"""Bidirectional multi-head self-attention with a padding mask."""

import math

import keras
from keras import ops

# Added to the scores of padding positions. Scores are float32 here, so this
# drives their softmax weight to exactly zero.
_MASK_PENALTY = -1e9


@keras.saving.register_keras_serializable(package="bert_tf")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over all (non-padding) positions.

    The query, key, value and output projections are [hidden, hidden] dense
    layers, the layout of the original BERT checkpoints. Scores and softmax are
    computed in float32 whatever the compute dtype, for mixed precision.

    Call arguments:
      hidden_states: float [batch, seq_length, hidden_size].
      input_mask: int or bool [batch, seq_length]; 1 for real tokens, 0 for padding.

    Returns:
      float [batch, seq_length, hidden_size].
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
                hidden_size, kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy, name=name)

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output")
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy, name="attention_dropout")

    def build(self, hidden_states_shape, input_mask_shape=None):
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build((None, None, self.hidden_size))
        self.built = True

    def _split_heads(self, x):
        batch_size, seq_length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch_size, seq_length, self.num_heads, self.head_size))

    def call(self, hidden_states, input_mask, training=None):
        query = self._split_heads(self.query(hidden_states))
        key = self._split_heads(self.key(hidden_states))
        value = self._split_heads(self.value(hidden_states))

        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
        scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(self.head_size))
        key_is_padding = ops.logical_not(ops.cast(input_mask, "bool"))[:, None, None, :]
        scores = ops.where(key_is_padding, _MASK_PENALTY, scores)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.dropout(probs, training=training)

        context = ops.einsum("bhqk,bkhd->bqhd", probs, value)
        batch_size, seq_length = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        context = ops.reshape(context, (batch_size, seq_length, self.hidden_size))
        return self.output_dense(context)

    def compute_output_shape(self, hidden_states_shape, input_mask_shape=None):
        return tuple(hidden_states_shape)

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, hidden_size=self.hidden_size,
                      dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
        return config
