"""The fine-tuning job's data config and default schedule, and the checks of the data flags against the phases.

    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    data = FinetuningDataConfig(train_file="train.tsv", eval_file="dev.tsv", text_a_column="sentence")

The task's own options are its `bert_tf.tasks.FinetuningTaskConfig` (or a plug-in's subclass of it); the
schedule is a `bert_tf.training.TrainingConfig`. Loads no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bert_tf.errors import JobArgumentError, check_int, check_utf8

# The schedule of `run_finetuning(training_config=None)` (and of distillation), and the defaults of
# experiments.finetune's flags (a `bert_tf.training.TrainingConfig`'s fields): google-research/bert's
# run_classifier.py, except for Adam's bias correction and epsilon, which are PyTorch's and Keras' AdamW's: the
# original's uncorrected moments take several times larger steps over the first few hundred updates, which on
# short fine-tuning runs helps some tasks and hurts others, so the default is the update users compare against
# (`--noadam_bias_correction --adam_epsilon=1e-6` is the original).
DEFAULT_SCHEDULE = dict(
    learning_rate=5e-5,
    num_train_epochs=3.0,
    warmup_proportion=0.1,
    weight_decay_rate=0.01,
    clip_norm=1.0,
    adam_bias_correction=True,
    adam_epsilon=1e-8,
    steps_per_loop=100,
    save_checkpoints_steps=1000,
    keep_checkpoint_max=5,
)

Column = str | int | None


@dataclasses.dataclass(frozen=True)
class FinetuningDataConfig:
    """The training, evaluation and prediction data (the flags of the same names).

    Attributes:
      train_file, eval_file, predict_file: TSV/CSV/JSONL (classification,
        regression), CoNLL columns (token_classification) or SQuAD JSON.
      tfds_name, tfds_data_dir, tfds_*_split: a prepared TFDS text dataset
        instead of files (classification and regression).
      text_a_column, text_b_column, label_column: columns of the text files
        (names or 0-based indices; keys for JSONL), or TFDS feature names.
      file_format, has_header: of the text files (format default: from the extension).
      label_list: class names or tags in id order; default: from a previous
        run's `task_config.json`, the TFDS label names, or the training data.
      conll_word_column, conll_label_column: CoNLL files' columns.
      train_batch_size, eval_batch_size: global batch sizes (over all replicas).
      predict_batch_size: None: `eval_batch_size`.
    """

    train_file: str | None = None
    eval_file: str | None = None
    predict_file: str | None = None
    tfds_name: str | None = None
    tfds_data_dir: str | None = None
    tfds_train_split: str = "train"
    tfds_eval_split: str | None = None
    tfds_predict_split: str | None = None
    text_a_column: Column = None
    text_b_column: Column = None
    label_column: Column = None
    file_format: str | None = None
    has_header: bool = True
    label_list: Sequence[str] | None = None
    conll_word_column: int = 0
    conll_label_column: int = -1
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int | None = None

    def __post_init__(self):
        for flag in ("train_batch_size", "eval_batch_size"):
            check_int(flag, getattr(self, flag))
        if self.predict_batch_size is not None:
            check_int("predict_batch_size", self.predict_batch_size)
        if self.label_list is not None:
            object.__setattr__(self, "label_list", tuple(self.label_list))
        if self.tfds_name:
            for flag in ("train_file", "eval_file", "predict_file"):
                if getattr(self, flag):
                    raise JobArgumentError(f"Give either --tfds_name or --{flag}, not both.")


def check_data_sources(data: FinetuningDataConfig, do_train: bool, do_eval: bool, do_predict: bool) -> None:
    """Refuses a phase without its data, and a data file that is missing or not UTF-8, naming the flag."""
    if data.tfds_name:
        return  # FinetuningDataConfig refuses files besides it.
    for wanted, flag, value in (
        (do_train, "train_file", data.train_file),
        (do_eval, "eval_file", data.eval_file),
        (do_predict, "predict_file", data.predict_file),
    ):
        if wanted and not value:
            raise JobArgumentError(f"--do_{flag.split('_')[0]} needs --{flag} (or --tfds_name).")
        if wanted:
            # The readers' decode errors name no line; fine-tuning files are small enough to check first.
            check_utf8(value, flag)
