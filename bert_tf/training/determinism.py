"""Reproducible runs: seeded initialisation and deterministic TensorFlow ops."""

import keras
import tensorflow as tf


def enable_determinism(seed: int) -> None:
    """Seeds Python, NumPy, TensorFlow and Keras, and makes TF ops deterministic.

    Call it before building the model and the datasets. Together with a seeded
    input pipeline, two runs with the same seed produce the same weights, and
    a run resumed from a checkpoint matches an uninterrupted one. Some GPU ops
    have no deterministic kernel and then raise an error instead of running.
    """
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
