"""`TrainingConfig`: the schedule of a training run (length, warm-up, optimizer, clipping, checkpoint and
evaluation intervals), the one the training jobs take, validated once when built.

    from bert_tf.training import TrainingConfig

    config = TrainingConfig(learning_rate=2e-5, num_train_epochs=3.0, warmup_proportion=0.1)
    config.in_steps(num_examples=67349, batch_size=32).num_train_steps  # 6314: ceil(3 * 67349 / 32)

Loads no TensorFlow, so entry points and configs can build and check it before a job starts TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math

from bert_tf.errors import JobArgumentError, check_int

#: The Keras dtype policies the jobs take (--mixed_precision); here, where no TensorFlow loads, for the Keras
#: programs that run without it.
PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")

# The optimizers `bert_tf.training.optimizers.create_optimizer` builds.
OPTIMIZERS = ("adamw", "lamb")


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """The schedule of a training run, the one both jobs take (the flags of the same names).

    Attributes:
      num_train_steps: total optimizer steps; None: `num_train_epochs` over the data (see `in_steps`).
      learning_rate: peak learning rate, reached after the warm-up.
      num_warmup_steps: linear warm-up steps; then linear decay to 0.
      weight_decay_rate: decoupled weight decay (not on LayerNorm and biases).
      clip_norm: global-norm gradient clipping; None (or 0) to not clip.
      adam_epsilon: Adam's epsilon, added to sqrt(v) (original BERT: 1e-6; PyTorch's AdamW: 1e-8).
      adam_bias_correction: Adam's bias correction of the moments (the original BERT has none; PyTorch's and
        Keras' AdamW have it). Without it the first updates after the warm-up's start are smaller.
      optimizer: "adamw" (BERT's) or "lamb" (You et al., 2019: layer-wise trust ratio; `bert_tf.training.lamb`).
      steps_per_loop: steps per `tf.function` call (logging interval too).
      num_microbatches: split each replica's batch into this many equal pieces whose gradients are summed
        before the one optimizer update (see docs/backends.md, "The training loop"); it must divide the
        per-replica batch size.
      save_checkpoints_steps: checkpoint interval in steps.
      keep_checkpoint_max: how many checkpoints to keep.
      eval_every_steps: evaluate every this many steps; None (or 0) for only at the end.
      max_eval_steps: batches per evaluation; None (or 0) to read the eval data once.
      num_train_epochs: the length in epochs, for a `num_train_steps` of None.
      warmup_proportion: when not None, the warm-up as a fraction of the steps instead of `num_warmup_steps`.

    `in_steps(num_examples, batch_size)` turns epochs and a warm-up proportion into steps; the loop takes a
    config in steps. Errors are `JobArgumentError`s naming a field as the flag of the same name
    (`--num_warmup_steps=...`), which is how the jobs that build it from their flags report them.
    """

    num_train_steps: int | None = None
    learning_rate: float = 1e-4
    num_warmup_steps: int = 0
    weight_decay_rate: float = 0.01
    clip_norm: float | None = 1.0
    adam_epsilon: float = 1e-6
    adam_bias_correction: bool = False
    optimizer: str = "adamw"
    steps_per_loop: int = 100
    num_microbatches: int = 1
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    eval_every_steps: int | None = None
    max_eval_steps: int | None = None
    num_train_epochs: float | None = None
    warmup_proportion: float | None = None

    def __post_init__(self):
        # 0 means "none" for these, as their flags spell it.
        for name in ("clip_norm", "eval_every_steps", "max_eval_steps"):
            if getattr(self, name) == 0 and not isinstance(getattr(self, name), bool):
                object.__setattr__(self, name, None)
        for name in ("steps_per_loop", "num_microbatches", "save_checkpoints_steps", "keep_checkpoint_max"):
            check_int(name, getattr(self, name))
        for name in ("num_train_steps", "eval_every_steps", "max_eval_steps"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name))
        if self.num_train_steps is None:
            if self.num_train_epochs is None:
                raise JobArgumentError("Give --num_train_steps or --num_train_epochs.")
            if not self.num_train_epochs > 0:
                raise JobArgumentError(f"--num_train_epochs must be positive, got {self.num_train_epochs}.")
        check_int("num_warmup_steps", self.num_warmup_steps, minimum=0)
        if self.warmup_proportion is not None:
            if not 0.0 <= self.warmup_proportion <= 1.0:
                raise JobArgumentError(f"--warmup_proportion must be in [0, 1], got {self.warmup_proportion}.")
        elif self.num_train_steps is not None and self.num_warmup_steps > self.num_train_steps:
            raise JobArgumentError(
                f"--num_warmup_steps={self.num_warmup_steps} exceeds --num_train_steps={self.num_train_steps}."
            )
        if not self.learning_rate > 0:
            raise JobArgumentError(f"--learning_rate must be positive, got {self.learning_rate!r}.")
        if self.weight_decay_rate < 0:
            raise JobArgumentError(f"--weight_decay_rate must be >= 0, got {self.weight_decay_rate!r}.")
        if not self.adam_epsilon > 0:
            raise JobArgumentError(f"--adam_epsilon must be positive, got {self.adam_epsilon!r}.")
        if self.optimizer not in OPTIMIZERS:
            raise JobArgumentError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}.")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise JobArgumentError(f"--clip_norm must be positive or None, got {self.clip_norm!r}.")

    def in_steps(self, num_examples: int | None = None, batch_size: int | None = None) -> TrainingConfig:
        """This schedule in steps: its length, warm-up and loop size, for epochs of `num_examples` examples.

        `num_train_steps`, or ceil(num_train_epochs * num_examples / batch_size) (at least 1); the warm-up is
        `warmup_proportion` of those steps when set, else `num_warmup_steps`; `steps_per_loop` is at most
        the steps.
        """
        steps = self.num_train_steps
        if steps is None:
            if not num_examples or not batch_size:
                raise JobArgumentError("--num_train_epochs needs the number of training examples and the batch size.")
            steps = max(1, int(math.ceil(num_examples * self.num_train_epochs / batch_size)))
        warmup = self.num_warmup_steps if self.warmup_proportion is None else int(steps * self.warmup_proportion)
        return dataclasses.replace(
            self,
            num_train_steps=steps,
            num_warmup_steps=warmup,
            warmup_proportion=None,
            steps_per_loop=min(self.steps_per_loop, steps),
        )


def check_microbatches(num_microbatches: int, batch_size: int, num_replicas: int = 1) -> None:
    """Raises JobArgumentError unless `num_microbatches` divides the per-replica batch of a global `batch_size`."""
    per_replica, rest = divmod(batch_size, num_replicas)
    if rest or per_replica % num_microbatches:
        raise JobArgumentError(
            f"--num_microbatches={num_microbatches} must divide the batch size per replica "
            f"({batch_size} over {num_replicas} replica(s))."
        )
