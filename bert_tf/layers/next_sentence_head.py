"""The next-sentence-prediction head of BERT pretraining."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class NextSentenceHead(keras.layers.Layer):
    """Classifies whether segment B followed segment A in the corpus.

    Call arguments:
      pooled_output: float [batch, hidden_size] (the pooled [CLS] state).

    Returns:
      float32 logits [batch, 2]; as in the original BERT, class 0 means "B is
      the real next segment" and class 1 "B is a random segment".
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

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output):
        return ops.cast(self.dense(pooled_output), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return (pooled_output_shape[0], 2)

    def compute_output_spec(self, pooled_output):
        return keras.KerasTensor(self.compute_output_shape(pooled_output.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config
