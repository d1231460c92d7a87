"""One post-LayerNorm Transformer encoder block, as in the BERT paper."""

import keras
from keras import ops

from bert_tf.layers.activations import get_activation
from bert_tf.layers.attention import MultiHeadSelfAttention
from bert_tf.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerEncoderBlock(keras.layers.Layer):
    """Self-attention and a feed-forward network, each followed by dropout,
    a residual connection and LayerNorm (post-LN, as the original BERT).

    Call arguments:
      hidden_states: float [batch, seq_length, hidden_size].
      input_mask: int [batch, seq_length]; 1 for real tokens, 0 for padding.
      attention_bias: instead of `input_mask`, `padding_attention_bias(input_mask)`
        (float32 [batch, 1, 1, seq_length]), computed once for a stack of blocks.

    Returns:
      float [batch, seq_length, hidden_size].

    Example:

    >>> import numpy as np
    >>> from bert_tf.layers import TransformerEncoderBlock
    >>> block = TransformerEncoderBlock(hidden_size=8, num_heads=2, intermediate_size=16)
    >>> states = np.zeros((2, 4, 8), "float32")
    >>> tuple(block(states, np.array([[1, 1, 1, 1], [1, 1, 0, 0]], "int32")).shape)
    (2, 4, 8)
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        activation="gelu",
        hidden_dropout_rate=0.1,
        attention_dropout_rate=0.1,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.hidden_dropout_rate = hidden_dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = MultiHeadSelfAttention(
            num_heads,
            hidden_size,
            dropout_rate=attention_dropout_rate,
            initializer_range=initializer_range,
            dtype=policy,
            name="attention",
        )
        self.attention_dropout = Dropout(hidden_dropout_rate, dtype=policy, name="attention_output_dropout")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=policy, name="attention_layer_norm"
        )
        self.intermediate_dense = keras.layers.Dense(
            intermediate_size,
            activation=get_activation(activation),
            kernel_initializer=initializer,
            dtype=policy,
            name="intermediate",
        )
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=initializer, dtype=policy, name="output")
        self.output_dropout = Dropout(hidden_dropout_rate, dtype=policy, name="output_dropout")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=policy, name="output_layer_norm"
        )

    def build(self, hidden_states_shape, input_mask_shape=None, attention_bias_shape=None):
        hidden_shape = (None, None, self.hidden_size)
        self.attention.build(hidden_shape)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate_dense.build(hidden_shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(hidden_shape)
        self.built = True

    def call(self, hidden_states, input_mask=None, attention_bias=None, training=None):
        attention_output = self.attention(hidden_states, input_mask, attention_bias=attention_bias, training=training)
        attention_output = self.attention_dropout(attention_output, training=training)
        hidden_states = self.attention_layer_norm(hidden_states + attention_output)

        # The feed-forward layers see [batch * seq_length, hidden]: given a 3-D input, Dense goes
        # through tensordot on the TensorFlow backend, whose reshape between MatMul and BiasAdd
        # keeps TensorFlow's oneDNN rewriter from fusing matmul, bias and GELU into one kernel on the CPU.
        shape = ops.shape(hidden_states)
        rows = ops.reshape(hidden_states, (-1, self.hidden_size))
        feed_forward_output = ops.reshape(self.output_dense(self.intermediate_dense(rows)), shape)
        feed_forward_output = self.output_dropout(feed_forward_output, training=training)
        return self.output_layer_norm(hidden_states + feed_forward_output)

    def compute_output_shape(self, hidden_states_shape, input_mask_shape=None, attention_bias_shape=None):
        return tuple(hidden_states_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            activation=self.activation,
            hidden_dropout_rate=self.hidden_dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate,
            initializer_range=self.initializer_range,
            layer_norm_eps=self.layer_norm_eps,
        )
        return config
