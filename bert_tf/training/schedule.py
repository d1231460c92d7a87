"""BERT's learning-rate schedule as one function of the step, for every training path.

    from keras import ops
    from bert_tf.training.schedule import warmup_polynomial_decay

    lr = warmup_polynomial_decay(ops.cast(step, "float32"), ops, learning_rate=1e-4, num_train_steps=1000,
                                 num_warmup_steps=100)

The custom loop's optimizer (`bert_tf.training.optimization.WarmupPolynomialDecay`, TensorFlow) wraps it; the
Keras 3 `fit` path (`bert_tf.jobs.keras_fit`, any backend) and the tf_keras `hub.KerasLayer` job
(`bert_tf.jobs.classify_with_hub`) take it as `warmup_linear_decay` in their framework's schedule class.
Backend-free: `ops` is the array namespace of `step` (`keras.ops`, or `tensorflow`), of which it uses `minimum`
and `where`.
"""

from __future__ import annotations


def warmup_polynomial_decay(
    step,
    ops,
    *,
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: int = 0,
    end_learning_rate: float = 0.0,
    power: float = 1.0,
):
    """The learning rate after `step` updates (a float32 scalar tensor), as google-research/bert computes it.

    lr(step) = learning_rate * step / num_warmup_steps                                  if step < num_warmup_steps
             = (learning_rate - end) * (1 - min(step, N) / N) ** power + end            otherwise,
    with N = `num_train_steps`: the decay is measured from step 0, so the first update of a run with warm-up
    uses a learning rate of 0, and the rate right after the warm-up is `learning_rate * (1 - warmup / N)`.

    Example:

    >>> import numpy as np
    >>> [round(float(warmup_polynomial_decay(np.float32(s), np, learning_rate=1.0, num_train_steps=10,
    ...       num_warmup_steps=2)), 2) for s in (0, 1, 2, 5, 10, 12)]
    [0.0, 0.5, 0.8, 0.5, 0.0, 0.0]
    """
    progress = ops.minimum(step, float(num_train_steps)) / float(num_train_steps)
    decayed = (learning_rate - end_learning_rate) * (1.0 - progress) ** power + end_learning_rate
    if num_warmup_steps == 0:
        return decayed
    warmup = learning_rate * step / float(num_warmup_steps)
    return ops.where(step < float(num_warmup_steps), warmup, decayed)


def warmup_linear_decay(base_class, ops, *, learning_rate: float, num_train_steps: int, warmup_proportion: float):
    """`warmup_polynomial_decay` (linear, warm-up over `warmup_proportion` of the steps) as a framework's schedule.

    The one schedule of the `fit` programs (`bert_tf.jobs.keras_fit`, `bert_tf.jobs.classify_with_hub`).

    Args:
      base_class: `keras.optimizers.schedules.LearningRateSchedule` (Keras 3) or tf_keras' class of that name.
      ops: the array namespace of the framework's steps: `keras.ops` or `tensorflow`.

    Example:

    >>> import keras
    >>> schedule = warmup_linear_decay(keras.optimizers.schedules.LearningRateSchedule, keras.ops,
    ...                                learning_rate=1.0, num_train_steps=10, warmup_proportion=0.2)
    >>> round(float(schedule(5)), 2)
    0.5
    """
    config = dict(
        learning_rate=learning_rate,
        num_train_steps=num_train_steps,
        num_warmup_steps=int(warmup_proportion * num_train_steps),
    )

    class WarmupLinearDecay(base_class):
        def __call__(self, step):
            return warmup_polynomial_decay(ops.cast(step, "float32"), ops, **config)

        def get_config(self):
            return dict(config)

    return WarmupLinearDecay()
