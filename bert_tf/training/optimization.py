"""BERT's optimizer: Adam with decoupled weight decay, warm-up + linear decay, global-norm clipping.

`AdamWeightDecay` follows google-research/bert's optimizer: the Adam moments
without bias correction (optional here), epsilon 1e-6 added to sqrt(v),
weight decay `rate * w` added to the update (so it is scaled by the learning
rate but not by the Adam normaliser), and no decay for LayerNorm and bias
variables. `WarmupPolynomialDecay` is its schedule: the learning rate grows
linearly from 0 over the warm-up steps, then decays polynomially (linearly by
default) to 0 at `num_train_steps`, the decay being measured from step 0.

Why not `keras.optimizers.AdamW` (each point checked on TF 2.21 / Keras 3.15):

* Keras applies `global_clipnorm` to each replica's gradients *before* its own
  all-reduce: under MirroredStrategy with two replicas holding gradients
  [0.8, 0] and [0, 0.8], SGD with `global_clipnorm=1` moved the weights by
  [-0.8, -0.8] instead of the clipped [-0.707, -0.707], so results depend on
  the number of replicas. Here the loop all-reduces first and this optimizer
  clips the global gradient.
* Keras all-reduces inside `apply_gradients`, so the caller cannot compute the
  gradients in an XLA cluster and reduce/apply them outside it (what
  MirroredStrategy needs), nor look at the reduced gradients (loss scaling).
* Keras creates its slots lazily on the first step; these are created with
  the optimizer, inside the strategy's scope, so a checkpoint restores them
  at once, and they are checkpointed as `optimizer/m/<i>`, `optimizer/v/<i>`
  and `optimizer/iterations`.

The update runs in replica context through `merge_call` + `extended.update`,
which works under the default, one-device, mirrored, multi-worker and TPU
strategies, and inside an XLA-compiled function on one device.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from bert_tf.training.schedule import warmup_polynomial_decay

DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("layer_norm", "LayerNorm", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0, then polynomial decay to `end_learning_rate`: `bert_tf.training.schedule`'s
    `warmup_polynomial_decay` as a Keras schedule, `step` being the number of updates already applied."""

    def __init__(
        self,
        learning_rate: float,
        num_train_steps: int,
        num_warmup_steps: int = 0,
        end_learning_rate: float = 0.0,
        power: float = 1.0,
    ):
        if learning_rate < 0:
            raise ValueError(f"learning_rate must be >= 0, got {learning_rate}.")
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
        if not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(
                f"num_warmup_steps must be in [0, num_train_steps={num_train_steps}], got {num_warmup_steps}."
            )
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)

    def __call__(self, step):
        return warmup_polynomial_decay(
            tf.cast(step, tf.float32),
            tf,
            learning_rate=self.learning_rate,
            num_train_steps=self.num_train_steps,
            num_warmup_steps=self.num_warmup_steps,
            end_learning_rate=self.end_learning_rate,
            power=self.power,
        )

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
        }


def variable_name(variable) -> str:
    """A Keras variable's path (`transformer_layer_0/attention/query/kernel`), else its TF name."""
    if isinstance(variable, keras.Variable):
        return variable.path
    return variable.name


def _tf_variable(variable):
    return variable.value if isinstance(variable, keras.Variable) else variable


class _Untracked:
    """Holds the model's variables without making them part of the optimizer's checkpoint."""

    def __init__(self, items):
        self.items = list(items)


class AdamWeightDecay(tf.Module):
    """Adam with decoupled weight decay and global-norm clipping (BERT's optimizer).

    Create it inside `strategy.scope()`, after the model: its slot variables
    mirror `variables` and are created here.

    Args:
      variables: the trainable variables (Keras or tf.Variables), in a fixed order.
      learning_rate: a float, or a callable mapping the update count to a rate
        (e.g. `WarmupPolynomialDecay`).
      weight_decay_rate: decoupled weight decay (0.01 in BERT).
      exclude_from_weight_decay: regular expressions; a variable whose path
        matches any of them is not decayed.
      clip_norm: clip the gradients to this global norm; None to not clip.
      bias_correction: False for the original BERT update, True for Adam's.
    """

    def __init__(
        self,
        variables: Sequence,
        learning_rate: float | Callable = 1e-4,
        weight_decay_rate: float = 0.01,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay: Sequence[str] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        clip_norm: float | None = 1.0,
        bias_correction: bool = False,
        name: str = "adam_weight_decay",
    ):
        super().__init__(name=name)
        variables = list(variables)
        if not variables:
            raise ValueError("AdamWeightDecay needs at least one variable.")
        if clip_norm is not None and clip_norm <= 0:
            raise ValueError(f"clip_norm must be positive or None, got {clip_norm}.")
        self.learning_rate = learning_rate
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay)
        self.clip_norm = clip_norm
        self.bias_correction = bool(bias_correction)

        self._variables = _Untracked(_tf_variable(v) for v in variables)
        self.variable_names = [variable_name(v) for v in variables]
        self.decay_mask = [
            self.weight_decay_rate > 0
            and not any(re.search(pattern, name) for pattern in self.exclude_from_weight_decay)
            for name in self.variable_names
        ]
        # Variables whose update a subclass rescales (`_adapt_update`: LAMB's trust ratio); none in Adam.
        self.adapt_mask = [False] * len(self.variable_names)

        strategy = tf.distribute.get_strategy()
        self.iterations = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="iterations", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA
        )
        self.m, self.v = [], []
        for var, var_name in zip(self._variables.items, self.variable_names):
            slot_name = var_name.split(":")[0].replace("/", "_")
            with strategy.extended.colocate_vars_with(var):
                self.m.append(tf.Variable(tf.zeros(var.shape, var.dtype), trainable=False, name=slot_name + "_m"))
                self.v.append(tf.Variable(tf.zeros(var.shape, var.dtype), trainable=False, name=slot_name + "_v"))

    @property
    def variables_to_train(self) -> list:
        return list(self._variables.items)

    def learning_rate_at(self, step):
        if callable(self.learning_rate):
            return tf.cast(self.learning_rate(step), tf.float32)
        return tf.constant(self.learning_rate, tf.float32)

    @property
    def current_learning_rate(self):
        return self.learning_rate_at(self.iterations)

    def apply_gradients(self, grads: Sequence, apply_update=None):
        """Clips `grads` to the global norm and applies one update.

        Args:
          grads: one gradient per variable, in the constructor's order, already
            summed over replicas (None for a variable without gradient).
          apply_update: optional scalar bool tensor; when False the variables,
            moments and update count are left unchanged (a skipped step of
            dynamic loss scaling).

        Returns:
          The global norm of `grads` before clipping.
        """
        variables = self._variables.items
        if len(grads) != len(variables):
            raise ValueError(f"Expected {len(variables)} gradients, got {len(grads)}.")
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for g, v in zip(grads, variables)]
        global_norm = tf.linalg.global_norm(grads)
        # The clipping factor of tf.clip_by_global_norm (NaN for a non-finite norm), applied to each gradient
        # inside its variable's update rather than to all of them up front (see `_distributed_apply`).
        clip_scale = None
        if self.clip_norm is not None:
            clip_norm = tf.constant(self.clip_norm, tf.float32)
            clip_scale = clip_norm * tf.minimum(1.0 / global_norm, tf.constant(1.0, tf.float32) / clip_norm)
            clip_scale += global_norm - global_norm
        # Read in replica context: each device gets the schedule from its own copy of `iterations`.
        step = tf.cast(self.iterations, tf.float32)
        learning_rate = self.learning_rate_at(step)
        args = (grads, clip_scale, learning_rate, step) + (() if apply_update is None else (apply_update,))
        replica_context = tf.distribute.get_replica_context()
        if replica_context is None:
            self._distributed_apply(tf.distribute.get_strategy(), *args)
        else:
            replica_context.merge_call(self._distributed_apply, args=args)
        return global_norm

    def _distributed_apply(self, strategy, grads, clip_scale, learning_rate, step, apply_update=None):
        extended = strategy.extended
        conditional = () if apply_update is None else (apply_update,)
        # One variable after another: left to itself, the executor starts every variable's update at once and
        # holds their temporaries (clipped gradient, new moments, update) together, several times the model's
        # size; in a chain they live one variable at a time, which lowers the step's memory peak. The arithmetic
        # is unchanged.
        previous = []
        for var, grad, m, v, decay, adapt in zip(
            self._variables.items, grads, self.m, self.v, self.decay_mask, self.adapt_mask
        ):
            with tf.control_dependencies(previous):
                updated = extended.update(
                    var,
                    self._update_variable,
                    args=(grad, clip_scale, learning_rate, step) + conditional,
                    kwargs={"m": m, "v": v, "decay": decay, "adapt": adapt},
                    group=False,
                )
            previous = tf.nest.flatten(strategy.experimental_local_results(updated))
        with tf.control_dependencies(previous):
            if apply_update is None:
                extended.update(self.iterations, lambda iterations: iterations.assign_add(1), group=False)
            else:
                extended.update(
                    self.iterations,
                    lambda iterations, apply: iterations.assign_add(tf.cast(apply, tf.int64)),
                    args=(apply_update,),
                    group=False,
                )

    def _update_variable(
        self, var, grad, clip_scale, learning_rate, step, apply_update=None, *, m, v, decay, adapt=False
    ):
        if clip_scale is not None:
            grad = grad * tf.cast(clip_scale, grad.dtype)
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
        if self.bias_correction:
            t = step + 1.0
            m_hat = next_m / (1.0 - tf.pow(self.beta_1, t))
            v_hat = next_v / (1.0 - tf.pow(self.beta_2, t))
        else:
            m_hat, v_hat = next_m, next_v
        update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
        if decay:
            update += self.weight_decay_rate * var
        if adapt:
            update = self._adapt_update(var, update)
        # The three writes as one op, which the next variable's update waits for.
        if apply_update is None:
            return tf.group(m.assign(next_m), v.assign(next_v), var.assign_sub(learning_rate * update))
        # tf.where rather than a multiply: a skipped step may carry inf/NaN gradients.
        return tf.group(
            m.assign(tf.where(apply_update, next_m, m)),
            v.assign(tf.where(apply_update, next_v, v)),
            var.assign_sub(tf.where(apply_update, learning_rate * update, tf.zeros_like(update))),
        )
