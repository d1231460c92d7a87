"""The masked-language-model head of BERT pretraining."""

import keras
from keras import ops

from bert_tf.layers.activations import get_activation
from bert_tf.layers.gather import gather_positions


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the original tokens at the masked positions.

    Dense transform + activation + LayerNorm, then a projection onto the
    vocabulary that shares its matrix with the word embeddings, plus an output
    bias. Logits are computed only at `masked_lm_positions`, not for the whole
    sequence.

    Args:
      token_embedding: the encoder's word-embedding layer (`keras.layers.Embedding`)
        whose matrix is reused as the output projection. It is not part of
        `get_config()`: the model that owns both passes it again when rebuilt.

    Call arguments:
      sequence_output: float [batch, seq_length, any width] (the transform maps it to the embeddings' width,
        `hidden_size` = `token_embedding.output_dim`; ALBERT's is smaller than the encoder's).
      masked_lm_positions: int [batch, num_predictions].

    Returns:
      float32 logits [batch, num_predictions, vocab_size].

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from bert_tf.layers import MaskedLMHead
    >>> word_embeddings = keras.layers.Embedding(100, 8)
    >>> word_embeddings.build()
    >>> head = MaskedLMHead(word_embeddings)
    >>> sequence_output = np.zeros((2, 6, 8), "float32")
    >>> tuple(head(sequence_output, np.array([[1, 4], [2, 0]], "int32")).shape)  # 2 predictions per sequence
    (2, 2, 100)
    """

    def __init__(self, token_embedding, activation="gelu", initializer_range=0.02, layer_norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.activation = activation
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.vocab_size = token_embedding.input_dim
        self.hidden_size = token_embedding.output_dim

        self.transform = keras.layers.Dense(
            self.hidden_size,
            activation=get_activation(activation),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="transform",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm"
        )

    def build(self, sequence_output_shape=None, masked_lm_positions_shape=None):
        # The transform maps the encoder's width to the embeddings' (they differ in ALBERT).
        input_size = sequence_output_shape[-1] if sequence_output_shape else self.hidden_size
        self.transform.build((None, None, input_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        hidden = gather_positions(sequence_output, masked_lm_positions)
        hidden = self.layer_norm(self.transform(hidden))
        batch_size, num_predictions = ops.shape(hidden)[0], ops.shape(hidden)[1]
        embedding_matrix = ops.cast(self.token_embedding.embeddings, self.compute_dtype)
        # One [batch * predictions, hidden] x [hidden, vocab] matmul. A batched einsum against the
        # shared matrix made TensorFlow compute the embedding gradient as one [hidden, vocab]
        # product per batch row and then sum them: a third of the CPU training step for bert_mini.
        logits = ops.matmul(ops.reshape(hidden, (-1, self.hidden_size)), ops.transpose(embedding_matrix))
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return ops.reshape(logits, (batch_size, num_predictions, self.vocab_size))

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return (sequence_output_shape[0], masked_lm_positions_shape[1], self.vocab_size)

    def compute_output_spec(self, sequence_output, masked_lm_positions):
        return keras.KerasTensor(
            self.compute_output_shape(sequence_output.shape, masked_lm_positions.shape), dtype="float32"
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            activation=self.activation, initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps
        )
        return config
