"""Dropout with a cheaper mask: 16 random bits per element instead of a float draw.

`keras.layers.Dropout` draws one float32 uniform number per element, then
compares, selects and scales, forward and backward. On a CPU that mask was
30-45% of BERT's training step. Here one stateless draw of 32-bit words is
reinterpreted as two 16-bit integers per element, compared with an integer
threshold, and applied as one multiply by a {0, scale} mask (whose gradient
is the same multiply).

Keep probability: an element is dropped when its 16-bit number is below
`threshold = round(rate * 65536)`, so the realized drop rate is
`threshold / 65536` (0.1 -> 0.100006; never off by more than 2**-17) and
kept elements are scaled by `65536 / (65536 - threshold)`, which keeps the
expectation of the output equal to the input exactly. Masks differ from
`keras.layers.Dropout`'s for the same seed; inference (training=False) is
the identity as before.
"""

import keras
from keras import ops

_BITS = 16
_RANGE = 1 << _BITS


def dropout_threshold(rate: float) -> int:
    """The integer in [0, 65536] below which a 16-bit random number drops its element."""
    return int(round(float(rate) * _RANGE))


def _keep_mask(inputs, threshold, seed_generator):
    """Boolean mask shaped like `inputs`: a uniform 16-bit number per element is >= `threshold`."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        shape, num_elements = tf.shape(inputs), tf.size(inputs)
        # Stateless TF random ops take int32 seeds under XLA; Keras keeps the state in int64.
        seed = tf.cast(tf.math.floormod(seed_generator.next(), tf.int32.max - 1), tf.int32)
        words = tf.random.stateless_uniform([(num_elements + 1) // 2], seed=seed, minval=None, maxval=None,
                                            dtype=tf.uint32)
        bits = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:num_elements]
        return tf.reshape(bits, shape) >= tf.constant(threshold, tf.uint16)
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        bits = jax.random.bits(seed_generator.next(), inputs.shape, jnp.uint16)
        return bits >= jnp.uint16(threshold)
    bits = keras.random.randint(ops.shape(inputs), 0, _RANGE, dtype="int32", seed=seed_generator)
    return ops.greater_equal(bits, threshold)


def fast_dropout(inputs, rate, seed_generator):
    """Zeroes each element with probability ~`rate`, scaling the rest to keep the mean.

    Args:
      inputs: float tensor of any shape.
      rate: the drop probability, in [0, 1).
      seed_generator: a `keras.random.SeedGenerator`; one draw per call.

    Returns:
      A tensor like `inputs`.
    """
    threshold = dropout_threshold(rate)
    if threshold <= 0:
        return inputs
    if threshold >= _RANGE:
        return ops.zeros_like(inputs)
    scale = _RANGE / (_RANGE - threshold)
    # A {0, scale} multiply: cheaper than a select, and its gradient is the same multiply.
    mask = ops.cast(_keep_mask(inputs, threshold, seed_generator), inputs.dtype) * ops.cast(scale, inputs.dtype)
    return inputs * mask


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with the 16-bit mask of `fast_dropout` (no `noise_shape`).

    Same arguments, config, seed generator and variable path as the Keras
    layer, so checkpoints (which save the seed states) are unchanged.
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        if noise_shape is not None:
            raise ValueError("bert_tf Dropout does not support noise_shape.")
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return fast_dropout(inputs, self.rate, self.seed_generator)
        return inputs
