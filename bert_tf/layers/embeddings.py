"""Word + position + token-type embeddings, as the input of the BERT encoder."""

import keras
from keras import ops

from bert_tf.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
    """Sums word, absolute position and token-type embeddings, then LayerNorm and dropout.

    Call arguments:
      input_word_ids: int [batch, seq_length].
      input_type_ids: int [batch, seq_length].
      position_ids: optional int [batch, seq_length]; default 0, 1, 2, ... in every row (a packed row of
        several examples restarts them per example: `bert_tf.layers.packed_examples`).

    Returns:
      float [batch, seq_length, hidden_size].

    `token_embedding` is public: the masked-LM head ties its output projection
    to `token_embedding.embeddings`.

    Example:

    >>> import numpy as np
    >>> from bert_tf.layers import BertEmbeddings
    >>> embeddings = BertEmbeddings(vocab_size=100, hidden_size=8, max_position_embeddings=16, type_vocab_size=2)
    >>> word_ids = np.array([[2, 17, 42, 3]], "int32")
    >>> tuple(embeddings(word_ids, np.zeros_like(word_ids)).shape)
    (1, 4, 8)
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings,
        type_vocab_size,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        dropout_rate=0.1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.dropout_rate = dropout_rate

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.token_embedding = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=initializer, dtype=self.dtype_policy, name="word_embeddings"
        )
        self.type_embedding = keras.layers.Embedding(
            type_vocab_size,
            hidden_size,
            embeddings_initializer=initializer,
            dtype=self.dtype_policy,
            name="token_type_embeddings",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        self.token_embedding.build()
        self.type_embedding.build()
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, position_ids=None, training=None):
        if position_ids is None:
            seq_length = ops.shape(input_word_ids)[1]
            # Looked up per position like the word ids rather than broadcast over the batch: the broadcast's
            # gradient is a sum over the batch, for which XLA:GPU lays the whole residual stream out batch-minor
            # and then transposes it around every product.
            position_ids = ops.broadcast_to(ops.arange(seq_length, dtype="int32")[None, :], ops.shape(input_word_ids))
        position_embeddings = ops.take(ops.cast(self.position_embeddings, self.compute_dtype), position_ids, axis=0)
        embeddings = self.token_embedding(input_word_ids) + self.type_embedding(input_type_ids) + position_embeddings
        return self.dropout(self.layer_norm(embeddings), training=training)

    def compute_output_shape(self, input_word_ids_shape, input_type_ids_shape=None, position_ids_shape=None):
        return tuple(input_word_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            initializer_range=self.initializer_range,
            layer_norm_eps=self.layer_norm_eps,
            dropout_rate=self.dropout_rate,
        )
        return config
