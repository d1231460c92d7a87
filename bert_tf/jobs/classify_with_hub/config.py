"""`HubClassifierConfig`: what `run_classify_with_hub` fine-tunes, on which data and batches; checked once."""

from __future__ import annotations

import dataclasses
import os

from bert_tf.errors import BadInputError, JobArgumentError, check_int
from bert_tf.jobs import DEFAULT_SEED


@dataclasses.dataclass(frozen=True)
class HubClassifierConfig:
    """The hub classifier job's settings, named after `experiments.classify_with_hub`'s flags.

    Args:
      export_dir: a directory with the `encoder` and `preprocess` SavedModels (`experiments.export`).
      train_file, eval_file: TSVs with a header; `text_a_column` and `label_column` name the columns (a header
        name or a 0-based index). The training data has exactly two labels (see `labels.binary_labels`).
      label_names: names of labels written as 0 and 1, in that order; None: the labels as written, sorted.
      learning_rate: Adam's (Keras' default 1e-3, as the notebook's `optimizer='adam'`).
      warmup_proportion: 0: a constant learning rate; else BERT's linear warm-up and decay.
      packing: batches of packed rows, `train_batch_size` examples each on average (the default).
      bucket_width: unpacked batches (and the saved classifier's preprocessing) are packed to the smallest
        multiple of this that holds the batch's longest text; 0: the exported length, the notebook's program.
      group_by_length: unpacked training batches of near-equal lengths instead of random ones.
      max_seq_length: the longest packed length and the packed rows' length; 0: the preprocessor's default.
    """

    export_dir: str
    train_file: str
    eval_file: str
    text_a_column: str = "text"
    label_column: str = "label"
    label_names: tuple | None = None
    num_train_epochs: int = 2
    train_batch_size: int = 32
    learning_rate: float = 1e-3
    warmup_proportion: float = 0.0
    packing: bool = True
    bucket_width: int = 16
    group_by_length: bool = False
    max_seq_length: int = 0
    max_train_examples: int = 0
    max_eval_examples: int = 0
    seed: int = DEFAULT_SEED

    def __post_init__(self):
        for name in ("encoder", "preprocess"):
            if not os.path.isdir(os.path.join(self.export_dir, name)):
                raise BadInputError(f"--export_dir={self.export_dir} has no '{name}' SavedModel.")
        for name in ("bucket_width", "max_seq_length", "max_train_examples", "max_eval_examples"):
            if getattr(self, name) < 0:
                raise JobArgumentError(f"--{name} must be >= 0, got {getattr(self, name)}.")
        check_int("num_train_epochs", self.num_train_epochs)
        check_int("train_batch_size", self.train_batch_size)
        if not 0.0 <= self.warmup_proportion <= 1.0:
            raise JobArgumentError(f"--warmup_proportion must be in [0, 1], got {self.warmup_proportion}.")
        if self.packing and self.group_by_length:
            raise JobArgumentError("--packing and --group_by_length are two orders of the batches: give one.")

    @property
    def preprocess_dir(self) -> str:
        return os.path.join(self.export_dir, "preprocess")

    @property
    def encoder_dir(self) -> str:
        return os.path.join(self.export_dir, "encoder")
