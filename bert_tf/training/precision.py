"""Mixed precision: the Keras dtype policy and dynamic loss scaling for float16.

Set the policy before building the model: layers take the global policy when
they are created. With `mixed_float16` the loop scales the loss by a
`DynamicLossScale` so small float16 gradients do not flush to zero; bfloat16
has float32's exponent range and needs no scaling. Variables stay float32
under both mixed policies, and the model computes LayerNorm, softmax and the
logits in float32.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.training.config import PRECISION_POLICIES


def set_precision_policy(name: str) -> None:
    """Sets Keras' global dtype policy (`float32`, `mixed_bfloat16` or `mixed_float16`)."""
    if name not in PRECISION_POLICIES:
        raise ValueError(f"Unknown precision policy {name!r}; expected one of {', '.join(PRECISION_POLICIES)}.")
    keras.mixed_precision.set_global_policy(name)


def precision_note(name: str, on_cpu: bool = True, flags: frozenset[str] | None = None) -> str:
    """One line for a job's log: the policy `name` and, on a CPU, whether this one computes bfloat16 natively.

    bfloat16 is fast only with AVX-512 BF16 or AMX (`bert_tf.cpu_features.FAST_BFLOAT16_FLAGS`); elsewhere it
    is emulated and slower than float32, so float32 stays the default. `flags`: the CPU's (default: this one's).

    >>> precision_note("float32", flags=frozenset({"avx2"}))
    'Precision float32 (--mixed_precision); this CPU (AVX2) has no native bfloat16 (AVX-512 BF16 or AMX), so float32 is its fast choice.'
    """  # noqa: E501
    from bert_tf import cpu_features

    note = f"Precision {name} (--mixed_precision)"
    if not on_cpu:
        return note + "."
    flags = cpu_features.cpu_flags() if flags is None else flags
    if flags is None:
        return note + "; this CPU's features are unknown."
    return f"{note}; this CPU ({cpu_features.instruction_set_level(flags)}) {_cpu_bfloat16(name, flags)}"


def _cpu_bfloat16(name: str, flags: frozenset[str]) -> str:
    """What a CPU with `flags` does with bfloat16, and the policy to try where `name` is not its fast one."""
    from bert_tf import cpu_features

    if any(flag in flags for flag in cpu_features.FAST_BFLOAT16_FLAGS):
        if name == "mixed_bfloat16":
            return "computes bfloat16 natively."
        return (
            "computes bfloat16 natively: --mixed_precision=mixed_bfloat16 may be faster (its fine-tuning "
            "accuracy against float32: docs/finetuning.md, 'Scaling up')."
        )
    if name == "mixed_bfloat16":
        return "emulates bfloat16 (no AVX-512 BF16 or AMX): slower than float32."
    return "has no native bfloat16 (AVX-512 BF16 or AMX), so float32 is its fast choice."


def needs_loss_scaling(model: keras.Model) -> bool:
    """Whether the model computes in float16 (and so needs loss scaling)."""
    return model.dtype_policy.compute_dtype == "float16"


class DynamicLossScale(tf.Module):
    """A loss scale that halves on non-finite gradients and doubles after a run of finite ones.

    Usage in a replica step: differentiate `scale_loss(loss)`, all-reduce,
    `grads, finite = unscale(grads)`, apply the update only where `finite`,
    then `update(finite)`. The state (`scale`, `good_steps`) is checkpointed.

    Args:
      initial_scale: the starting scale (2**15, as Keras and tf-keras).
      growth_interval: consecutive finite steps before the scale doubles.
    """

    def __init__(self, initial_scale: float = 2.0**15, growth_interval: int = 2000, name: str = "loss_scale"):
        super().__init__(name=name)
        if initial_scale <= 0:
            raise ValueError(f"initial_scale must be positive, got {initial_scale}.")
        if growth_interval <= 0:
            raise ValueError(f"growth_interval must be positive, got {growth_interval}.")
        self.growth_interval = int(growth_interval)
        # Every replica computes the same new value from all-reduced gradients.
        aggregation = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.scale = tf.Variable(float(initial_scale), trainable=False, name="scale", aggregation=aggregation)
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="good_steps", aggregation=aggregation)

    def scale_loss(self, loss):
        return loss * tf.cast(self.scale, loss.dtype)

    def unscale(self, grads):
        """Divides gradients by the scale; returns them and whether all are finite."""
        inverse = 1.0 / self.scale
        grads = [None if g is None else g * tf.cast(inverse, g.dtype) for g in grads]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads if g is not None])
        return grads, finite

    def update(self, finite):
        good_steps = tf.where(finite, self.good_steps + 1, tf.zeros_like(self.good_steps))
        grow = good_steps >= self.growth_interval
        scale = tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale), tf.maximum(self.scale / 2.0, 1.0))
        self.scale.assign(scale)
        self.good_steps.assign(tf.where(grow, tf.zeros_like(good_steps), good_steps))
