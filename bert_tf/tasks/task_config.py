"""`FinetuningTaskConfig`: the options every fine-tuning task has; a plug-in with more subclasses it.

    from bert_tf.tasks.task_config import FinetuningTaskConfig
    config = FinetuningTaskConfig("classification", max_seq_length=128, bucket_width=16)

Each plug-in (`bert_tf.tasks.registry`) names its config class (`FinetuningTask.config_class`); the SQuAD one
is `bert_tf.tasks.squad.SquadConfig`. The fields are the flags of `experiments.finetune` of the same names, and
are checked once, when the config is built, naming the flag. Loads no TensorFlow.
"""

from __future__ import annotations

import dataclasses

from bert_tf.errors import JobArgumentError, check_int
from bert_tf.tasks import registry
from bert_tf.tasks.long_text import LongTextConfig


def choose_packing(packing: bool | None, reasons: list) -> bool:
    """Whether a job runs packed rows: `packing` None (the flag left out) packs unless `reasons` (why this job's
    rows cannot be packed) holds one; False does not; True does, and is refused where there is a reason.

    Raises:
      JobArgumentError: `packing=True` with `reasons`, naming them.
    """
    if packing is None:
        return not reasons
    if packing and reasons:
        raise JobArgumentError(f"--packing is not possible here: {'; '.join(reasons)}; leave it out.")
    return packing


def describe_packing(packing: bool | None, reasons: list) -> str:
    """One line for a job's log: the batches `choose_packing` gives, and why."""
    if choose_packing(packing, reasons):
        return "Batches of packed rows (--nopacking: one example a row, padded)."
    if packing is False:
        return "Batches of one example a row (--nopacking)."
    return f"Batches of one example a row, not packed rows: {'; '.join(reasons)}."


@dataclasses.dataclass(frozen=True)
class FinetuningTaskConfig:
    """The task and the options every task has (the flags of the same names).

    Attributes:
      task: the registered name of the plug-in (`--task`, `bert_tf.tasks.registry.task_names()`).
      max_seq_length: packed sequence length (WordPieces incl. [CLS]/[SEP]).
      dropout_rate: dropout before the output layer; None: the model's hidden_dropout_prob.
      bucket_width: training, evaluation and prediction batches are padded to the smallest multiple of it
        that holds their longest sequence (capped at max_seq_length), so a batch costs its tokens rather than
        max_seq_length, with at most max_seq_length / bucket_width compiled shapes; 0 turns it off (the same
        batches, every one at max_seq_length). Not for SQuAD, whose windows are fixed.
      group_by_length: training batches of near-equal lengths instead of random ones (less padding, slower
        learning on small data; `bert_tf.data.length_buckets`).
      packing: rows of max_seq_length tokens filled with whole examples in random order, each computed as if
        alone (`bert_tf.data.packed_rows`), instead of one example a row; a batch then holds train_batch_size
        examples on average. None (the default): packed wherever the task's plug-in packs rows
        (`FinetuningTask.packs_rows`: classification, sentence pairs, regression, tagging, SQuAD) and no option rules
        it out (group_by_length, num_microbatches > 1): `resolve_packing` decides, `packing_note` says why. True:
        packed, and an option or task that cannot be is refused; False: one example a row.
      long_text_config: texts longer than the window (`bert_tf.tasks.long_text`: --long_text, --window_stride,
        --window_pooling, --max_windows). Its default mode (None) is decided by the data
        (`bert_tf.jobs.finetuning.inputs.resolve_long_text`): windows for single texts of classification and
        regression when one is longer than the window, else truncate. Windows pack as other examples do.
    """

    task: str
    max_seq_length: int = 128
    dropout_rate: float | None = None
    bucket_width: int = 16
    group_by_length: bool = False
    packing: bool | None = None
    long_text_config: LongTextConfig = LongTextConfig()

    def __post_init__(self):
        if self.task not in registry.task_names():
            raise JobArgumentError(f"--task must be one of {', '.join(registry.task_names())}, got {self.task!r}.")
        check_int("max_seq_length", self.max_seq_length)
        check_int("bucket_width", self.bucket_width, minimum=0)
        if self.dropout_rate is not None and not 0.0 <= self.dropout_rate < 1.0:
            raise JobArgumentError(f"--dropout_rate must be in [0, 1), got {self.dropout_rate}.")
        if self.packing and self.group_by_length:
            raise JobArgumentError("--packing and --group_by_length are two orders of the batches: give one.")
        self.long_text_config.check_window(self.max_seq_length)

    def resolve_packing(self, num_microbatches: int = 1) -> FinetuningTaskConfig:
        """This config with `packing` True or False (unchanged if it is one already; see the attribute).

        The default (None) packs unless `unpacked_reasons` gives a reason; an explicit `packing=True` with a
        reason is refused.

        Raises:
          JobArgumentError: `packing=True` where it cannot be, naming the flags.
        """
        packing = choose_packing(self.packing, self.unpacked_reasons(num_microbatches))
        return self if packing == self.packing else dataclasses.replace(self, packing=packing)

    def unpacked_reasons(self, num_microbatches: int = 1) -> list:
        """Why this config's batches cannot be packed rows (empty: they can): the task's plug-in computes one
        example a row, `group_by_length` orders the batches instead, or `num_microbatches` > 1
        splits a batch's rows (whose examples vary in number)."""
        reasons = []
        if not registry.task_class(self.task).packs_rows:
            reasons.append(f"--task={self.task} computes one example a row")
        if num_microbatches > 1:
            reasons.append("--num_microbatches splits each batch's rows")
        if self.group_by_length:
            reasons.append("--group_by_length orders the batches by length")
        return reasons

    def packing_note(self, num_microbatches: int = 1) -> str:
        """One line for the job's log: the batches `resolve_packing` gives this config, and why."""
        return describe_packing(self.packing, self.unpacked_reasons(num_microbatches))

    def refuse_long_text(self) -> None:
        """A task that keeps its own windows (SQuAD) refuses --long_text other than truncate."""
        if self.long_text_config.long_text not in (None, "truncate"):
            raise JobArgumentError(
                f"--long_text={self.long_text_config.long_text} is supported for classification and regression "
                f"of single texts and for tagging, not --task={self.task}."
            )

    def head_and_batch_options(self) -> dict:
        """The keyword arguments of the common options that the classification and tagging plug-ins take."""
        return dict(
            dropout_rate=self.dropout_rate, bucket_width=self.bucket_width, group_by_length=self.group_by_length
        )
