"""A learned scalar mix of layers (Peters et al., 2018; Tenney et al., 2019): `gamma * sum_l softmax(w)_l h_l`."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class ScalarMix(keras.layers.Layer):
    """Mixes `num_layers` stacked representations with softmax-normalised weights and a scale.

    The weights start equal (logits 0) and the scale at 1, so an untrained mix is the mean of the layers.
    `mixing_weights()` gives the normalised weights; their centre of gravity `sum_l l * s_l` is the
    "expected layer" of Tenney et al.

    Call arguments:
      stacked: float [batch, num_layers, ...] (layer 0 first).

    Returns:
      float [batch, ...].

    Example:

    >>> import numpy as np
    >>> mix = ScalarMix(num_layers=3)
    >>> stacked = np.arange(6, dtype="float32").reshape(1, 3, 2)  # layers [0, 1], [2, 3], [4, 5]
    >>> np.asarray(mix(stacked)).tolist()
    [[2.0, 3.0]]
    >>> np.asarray(mix.mixing_weights(), "float64").round(3).tolist()
    [0.333, 0.333, 0.333]
    """

    def __init__(self, num_layers, **kwargs):
        super().__init__(**kwargs)
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}.")
        self.num_layers = num_layers

    def build(self, stacked_shape):
        self.layer_logits = self.add_weight(shape=(self.num_layers,), initializer="zeros", name="layer_logits")
        self.gamma = self.add_weight(shape=(), initializer="ones", name="gamma")
        self.built = True

    def mixing_weights(self):
        """[num_layers] softmax-normalised weights (sum 1)."""
        return ops.softmax(self.layer_logits)

    def call(self, stacked):
        weights = ops.cast(self.mixing_weights(), self.compute_dtype)
        weights = ops.reshape(weights, (1, self.num_layers) + (1,) * (len(stacked.shape) - 2))
        return ops.cast(self.gamma, self.compute_dtype) * ops.sum(stacked * weights, axis=1)

    def compute_output_shape(self, stacked_shape):
        return (stacked_shape[0],) + tuple(stacked_shape[2:])

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config
