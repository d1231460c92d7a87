"""The end of every input pipeline in the package: prefetch, with tf.data's autotuning model turned off.

With autotuning on, each iterator runs a thread that re-optimises the pipeline between sleeps. Destroying the
iterator (the end of `fit` or of an evaluation, a training loop or a tool finishing) waits for that thread,
which does not always wake up for the cancellation, so the end of a pipeline can stall for seconds where
it should take none. The pipelines here need no tuning: each
has one parallel map (or interleave), and with the model off `AUTOTUNE` parallelism resolves to the machine's
core count (cycle length for interleave), which is what it would settle on.
"""

from __future__ import annotations


def without_autotuning(dataset):
    """`dataset` with `tf.data.Options().autotune.enabled = False` (see the module docstring).

    >>> import tensorflow as tf
    >>> without_autotuning(tf.data.Dataset.range(3)).options().autotune.enabled
    False
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def prefetched(dataset):
    """`dataset.prefetch(tf.data.AUTOTUNE)` without the autotuning model: the last step of a pipeline.

    >>> import tensorflow as tf
    >>> [int(x) for x in prefetched(tf.data.Dataset.range(3))]
    [0, 1, 2]
    """
    import tensorflow as tf

    return without_autotuning(dataset.prefetch(tf.data.AUTOTUNE))
