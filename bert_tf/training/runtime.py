"""The set-up every training job repeats: seeds and determinism, the dtype policy, the strategy.

    runtime = RuntimeConfig(distribution_strategy="mirrored", mixed_precision="mixed_bfloat16",
                            deterministic=True, seed=1)
    with training_runtime(runtime, batch_sizes={"train_batch_size": 32}) as strategy:
        result = train(strategy, ...)

`RuntimeConfig` holds the flags of that set-up (`--distribution_strategy`,
`--num_gpus`, `--tpu`, `--jit_compile`, `--mixed_precision`,
`--deterministic`, `--seed`, `--preemption_grace_seconds`) and checks them when it is built;
`training_runtime` applies them in the order TensorFlow needs (the strategy
is created before any op runs, as a multi-worker strategy must configure
collective ops first) and restores Keras' global dtype policy on exit.
Errors name the flag, as `JobArgumentError`s (bad input for `bert_tf.cli`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping

import keras

from bert_tf.errors import JobArgumentError
from bert_tf.training import distribution
from bert_tf.training.config import PRECISION_POLICIES
from bert_tf.training.determinism import enable_determinism
from bert_tf.training.precision import set_precision_policy


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """Where and how a training job runs (the flags of the same names).

    Attributes:
      distribution_strategy: one of `distribution.STRATEGIES`.
      num_gpus: GPUs to use; None: all visible (one for `one_device`); 0: CPU.
      tpu: the TPU address, with (and only with) `distribution_strategy="tpu"`.
      jit_compile: XLA-compile the training (and prediction) steps.
      mixed_precision: Keras dtype policy, one of `PRECISION_POLICIES`.
      deterministic: seeded, deterministic TensorFlow ops (needs `seed`).
      seed: seed of initialisation, dropout and data order; None for none.
      preemption_grace_seconds: on SIGTERM, training stops after the current step with a checkpoint and
        must have exited this many seconds later (`bert_tf.training.preemption`); 0: SIGTERM ends the job
        at once, as by default.
    """

    distribution_strategy: str = "one_device"
    num_gpus: int | None = None
    tpu: str | None = None
    jit_compile: bool = False
    mixed_precision: str = "float32"
    deterministic: bool = False
    seed: int | None = None
    preemption_grace_seconds: float = 30.0

    def __post_init__(self):
        strategy = self.distribution_strategy
        if strategy not in distribution.STRATEGIES:
            raise JobArgumentError(
                f"--distribution_strategy={strategy!r}: expected one of {', '.join(distribution.STRATEGIES)}."
            )
        if strategy == "tpu" and not self.tpu:
            raise JobArgumentError("--distribution_strategy=tpu needs --tpu (a TPU name, grpc://host:port or 'local').")
        if self.tpu and strategy != "tpu":
            raise JobArgumentError(f"--tpu={self.tpu!r} is only used with --distribution_strategy=tpu.")
        if self.mixed_precision not in PRECISION_POLICIES:
            raise JobArgumentError(
                f"--mixed_precision={self.mixed_precision!r}: expected one of {', '.join(PRECISION_POLICIES)}."
            )
        if self.deterministic and self.seed is None:
            raise JobArgumentError("--deterministic needs a --seed.")
        grace = self.preemption_grace_seconds
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < float("inf"):
            raise JobArgumentError(f"--preemption_grace_seconds must be a number of seconds >= 0, got {grace!r}.")

    def preemption_watcher(self):
        """The `PreemptionWatcher` the jobs pass to `train` (None with `preemption_grace_seconds=0`)."""
        if not self.preemption_grace_seconds:
            return None
        from bert_tf.training.preemption import PreemptionWatcher

        return PreemptionWatcher(self.preemption_grace_seconds)


@contextlib.contextmanager
def training_runtime(
    runtime: RuntimeConfig,
    *,
    batch_sizes: Mapping[str, int] | None = None,
    error: type = JobArgumentError,
    always_seed: bool = False,
) -> Iterator:
    """Sets up seeds, the dtype policy and the strategy of `runtime`; yields the strategy.

    Args:
      runtime: the checked `RuntimeConfig`.
      batch_sizes: {flag name: global batch size}; each must divide over the
        strategy's replicas.
      error: the exception type (taking a message) raised for a strategy
        that cannot be created and for a batch size that does not divide.
      always_seed: also seed Keras (initialisation, dropout) with
        `runtime.seed` when not `deterministic`; with `deterministic`,
        `enable_determinism(seed)` always seeds.

    The global dtype policy is restored when the block exits, also on an
    error; determinism, once enabled, stays on for the process.
    """
    if runtime.deterministic:
        enable_determinism(runtime.seed)
    elif always_seed and runtime.seed is not None:
        keras.utils.set_random_seed(runtime.seed)
    previous_policy = keras.mixed_precision.global_policy()
    set_precision_policy(runtime.mixed_precision)
    try:
        try:
            strategy = distribution.get_strategy(
                runtime.distribution_strategy, num_gpus=runtime.num_gpus, tpu=runtime.tpu
            )
        except ValueError as e:
            raise error(f"--distribution_strategy={runtime.distribution_strategy}: {e}") from None
        replicas = strategy.num_replicas_in_sync
        for name, value in (batch_sizes or {}).items():
            if value % replicas:
                raise error(
                    f"--{name}={value} is not divisible by the {replicas} replicas of the "
                    f"{runtime.distribution_strategy} strategy."
                )
        yield strategy
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
