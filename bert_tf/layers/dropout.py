"""Dropout with a cheaper mask: 16 random bits per element instead of a float draw.

`keras.layers.Dropout` draws one float32 uniform number per element, then
compares, selects and scales, forward and backward, which makes the masks a
large share of BERT's CPU training step. Here each 32-bit random word gives two 16-bit
numbers, compared with an integer threshold, and the mask is applied as one
multiply by {0, scale} (whose gradient is the same multiply).

On TensorFlow the words come from a counter-based hash rather than Philox:
word i is `fmix32(fmix32(i * 0x9E3779B9 ^ k0) + k1)` (MurmurHash3's
finalizer, twice, keyed by the layer's 64-bit stateless seed `(k0, k1)`),
which is a few 32-bit multiplies and shifts per word where Philox runs 10 rounds
of 32x32->64-bit products. A hash is ample for
dropout, which needs independent, evenly spread bits, not cryptographic
strength (tests/test_layers_speed_paths.py checks the rate, the neighbour and
call-to-call independence). JAX draws `jax.random.bits` from an "rbg" key (XLA's
RngBitGenerator) made of the 64-bit seed and its keyed copy.

Replicas: under a `tf.distribute` strategy (mirrored, multi-worker, TPU) the
seed state is one mirrored variable, so every replica would draw the same
mask for its different examples (so would `keras.layers.Dropout`: Keras'
`SeedGenerator` state is mirrored too). On TensorFlow the replica's id in its
sync group is folded into the key, `k0 ^ replica_id * 0x9E3779B9` (replica 0,
and so every one-device run, keeps its key, so their masks and kill-and-resume
are unchanged); tests/test_dropout_replicas.py checks it on two logical CPUs.
On JAX the mask is drawn for the whole array in one jitted computation; under
Keras' data-parallel distribution that array is the global batch, so its
shards get different parts of one mask (untested: JAX runs on one device here).

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


def _replica_id_tf():
    """The replica's id in its sync group (uint32 scalar), or None outside a multi-replica strategy."""
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return None
    return tf.cast(context.replica_id_in_sync_group, tf.uint32)


def _hashed_words_tf(num_words, seed, replica_id=None):
    """uint32 [num_words]: word i is the keyed double fmix32 hash of i (see the module docstring).

    Args:
      num_words: scalar int32 tensor.
      seed: int64 [2] stateless seed, as `keras.random.SeedGenerator.next()` gives.
      replica_id: None, or a uint32 scalar folded into the key's first half (0 leaves the key as it is).
    """
    import tensorflow as tf

    def fmix32(x):
        x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16)) * tf.constant(0x85EBCA6B, tf.uint32)
        x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 13)) * tf.constant(0xC2B2AE35, tf.uint32)
        return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))

    key = tf.cast(tf.bitwise.bitwise_and(tf.cast(seed, tf.int64), 0xFFFFFFFF), tf.uint32)
    if replica_id is not None:
        key = key ^ tf.stack([replica_id * tf.constant(0x9E3779B9, tf.uint32), tf.constant(0, tf.uint32)])
    counter = tf.bitcast(tf.range(num_words, dtype=tf.int32), tf.uint32)
    mixed = fmix32(tf.bitwise.bitwise_xor(counter * tf.constant(0x9E3779B9, tf.uint32), key[0]))
    return fmix32(mixed + key[1])


def _keep_mask(inputs, threshold, seed_generator):
    """Boolean mask shaped like `inputs`: a uniform 16-bit number per element is >= `threshold`."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        shape, num_elements = tf.shape(inputs), tf.size(inputs)
        words = _hashed_words_tf((num_elements + 1) // 2, seed_generator.next(), _replica_id_tf())
        bits = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:num_elements]
        return tf.reshape(bits, shape) >= tf.constant(threshold, tf.uint16)
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        # XLA's RngBitGenerator ("rbg": Philox where XLA runs it) rather than jax.random's default threefry,
        # whose rounds cost a GPU training step more time than the masks are worth.
        seed = jnp.asarray(seed_generator.next(), jnp.uint32)
        key = jax.random.wrap_key_data(jnp.concatenate([seed, seed ^ jnp.uint32(0x9E3779B9)]), impl="rbg")
        return jax.random.bits(key, inputs.shape, jnp.uint16) >= jnp.uint16(threshold)
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

    Example (the identity at inference; in training about `rate` of the elements are zeroed, the rest scaled):

    >>> import numpy as np
    >>> from bert_tf.layers import Dropout
    >>> dropout = Dropout(0.25, seed=1)
    >>> ones = np.ones((100, 100), "float32")
    >>> bool(np.array_equal(dropout(ones), ones))
    True
    >>> dropped = np.asarray(dropout(ones, training=True))
    >>> sorted(set(dropped.ravel().tolist())), bool(0.2 < (dropped == 0).mean() < 0.3)
    ([0.0, 1.3333333730697632], True)
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        if noise_shape is not None:
            raise ValueError("bert_tf Dropout does not support noise_shape.")
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return fast_dropout(inputs, self.rate, self.seed_generator)
        return inputs
