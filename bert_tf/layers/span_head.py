"""Start/end logits for extractive question answering (SQuAD)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class SpanHead(keras.layers.Layer):
    """A dense layer to two logits per token: answer start and answer end.

    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].

    Returns:
      (start_logits, end_logits), each float32 [batch, seq_length].
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="logits",
        )

    def build(self, sequence_output_shape):
        self.dense.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output):
        logits = ops.cast(self.dense(sequence_output), "float32")
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, sequence_output_shape):
        shape = tuple(sequence_output_shape[:-1])
        return shape, shape

    def compute_output_spec(self, sequence_output):
        shape = tuple(sequence_output.shape[:-1])
        return keras.KerasTensor(shape, dtype="float32"), keras.KerasTensor(shape, dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config
