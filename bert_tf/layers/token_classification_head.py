"""A per-token classification output layer (tagging, e.g. NER)."""

import keras
from keras import ops

from bert_tf.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="bert_tf")
class TokenClassificationHead(keras.layers.Layer):
    """Dropout, then a dense layer to `num_labels` logits at every position.

    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].

    Returns:
      float32 [batch, seq_length, num_labels].
    """

    def __init__(self, num_labels, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if num_labels < 1:
            raise ValueError(f"num_labels must be at least 1, got {num_labels}.")
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            num_labels,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="logits",
        )

    def build(self, sequence_output_shape):
        self.dense.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output, training=None):
        return ops.cast(self.dense(self.dropout(sequence_output, training=training)), "float32")

    def compute_output_shape(self, sequence_output_shape):
        return tuple(sequence_output_shape[:-1]) + (self.num_labels,)

    def compute_output_spec(self, sequence_output, training=None):
        return keras.KerasTensor(self.compute_output_shape(sequence_output.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            num_labels=self.num_labels, dropout_rate=self.dropout_rate, initializer_range=self.initializer_range
        )
        return config
