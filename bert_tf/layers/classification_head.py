"""A classification (or regression) output layer on the pooled [CLS] state."""

import keras
from keras import ops

from bert_tf.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(keras.layers.Layer):
    """Dropout, then a dense layer to `num_classes` logits.

    With `num_classes=1` the single output is a regression score.

    Call arguments:
      pooled_output: float [batch, hidden_size].

    Returns:
      float32 [batch, num_classes].
    """

    def __init__(self, num_classes, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if num_classes < 1:
            raise ValueError(f"num_classes must be at least 1, got {num_classes}.")
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="logits",
        )

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        return ops.cast(self.dense(self.dropout(pooled_output, training=training)), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return (pooled_output_shape[0], self.num_classes)

    def compute_output_spec(self, pooled_output, training=None):
        return keras.KerasTensor(self.compute_output_shape(pooled_output.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            num_classes=self.num_classes, dropout_rate=self.dropout_rate, initializer_range=self.initializer_range
        )
        return config
