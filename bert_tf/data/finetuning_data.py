"""Where a fine-tuning job's examples come from: files or a prepared TFDS dataset, with the job's column settings.

    source = FinetuningDataSource("classification", data_config, version_2_with_negative=False)
    train_examples = source.read("train", data_config.train_file)

`data_config` is a `bert_tf.jobs.finetune.FinetuningDataConfig` (or anything with its fields). The readers
themselves are in `finetuning_readers`; this class picks the reader, the columns and the TFDS splits for a task
type, and checks that they fit it (a sentence-pair dataset for a single-sentence task is refused, naming the
flag). Errors are `ValueError`s naming the flag, or `DataError`s naming the file and line.
"""

from __future__ import annotations

from bert_tf.data import finetuning_readers
from bert_tf.errors import DataError, JobArgumentError


class FinetuningDataSource:
    """Reads the examples of one phase from a file or from TFDS, with the column settings of the job."""

    def __init__(self, task_type: str, data, version_2_with_negative: bool = False):
        task = self.task_type = task_type
        self.tfds_name = tfds_name = data.tfds_name
        self.tfds_data_dir = tfds_data_dir = data.tfds_data_dir
        self.file_format = data.file_format
        self.has_header = data.has_header
        self.conll_word_column = data.conll_word_column
        self.conll_label_column = data.conll_label_column
        self.version_2_with_negative = version_2_with_negative
        text_a_column, text_b_column, label_column = data.text_a_column, data.text_b_column, data.label_column
        self.label_names = None
        self.regression = task == "regression"
        if tfds_name:
            default_a, default_b, default_eval = (
                finetuning_readers.tfds_defaults(tfds_name)
                if text_a_column is None
                else (text_a_column, text_b_column, "validation")
            )
            self.splits = {
                "train": data.tfds_train_split,
                "eval": data.tfds_eval_split or default_eval,
                "predict": data.tfds_predict_split or "test",
            }
            self.text_a = text_a_column or default_a
            self.text_b = text_b_column if text_b_column is not None else default_b
            self.label = label_column or "label"
            if task == "classification" and self.text_b:
                raise JobArgumentError(
                    f"{tfds_name} has sentence pairs ({self.text_a!r}, {self.text_b!r}); use "
                    "--task=sentence_pair_classification."
                )
            if task == "sentence_pair_classification" and not self.text_b:
                raise JobArgumentError(f"{tfds_name} has single sentences; use --task=classification.")
            self.label_names = finetuning_readers.read_tfds_label_names(tfds_name, tfds_data_dir, self.label)
            if (self.label_names is None) != self.regression:
                kind = "a numeric (regression)" if self.label_names is None else "a class"
                raise JobArgumentError(f"{tfds_name} has {kind} label {self.label!r}; it does not fit --task={task}.")
        else:
            self.text_a = text_a_column if text_a_column is not None else "text_a"
            pair_default = "text_b" if task == "sentence_pair_classification" else None
            self.text_b = text_b_column if text_b_column is not None else pair_default
            self.label = label_column if label_column is not None else "label"
            if task == "classification" and text_b_column is not None:
                raise JobArgumentError("--text_b_column is for --task=sentence_pair_classification (or regression).")
        self.sentence_pair = task == "sentence_pair_classification" or (task == "regression" and bool(self.text_b))

    def read(self, phase: str, path: str | None):
        """Examples for "train", "eval" or "predict" (labels optional for "predict")."""
        require_labels = phase != "predict"
        if self.tfds_name:
            examples, _ = finetuning_readers.read_tfds_text_examples(
                self.tfds_name,
                self.splits[phase],
                self.tfds_data_dir,
                self.text_a,
                self.text_b if self.sentence_pair else None,
                self.label,
            )
            if require_labels and any(e.label is None for e in examples):
                raise DataError(
                    f"{self.tfds_name} split {self.splits[phase]!r} has unlabelled examples "
                    "(GLUE test splits do); evaluate on a labelled split (--tfds_eval_split)."
                )
            return examples
        if self.task_type == "squad":
            return finetuning_readers.read_squad(
                path, training=phase == "train", version_2_with_negative=self.version_2_with_negative
            )
        if self.task_type == "token_classification":
            return finetuning_readers.read_conll(
                path,
                word_column=self.conll_word_column,
                label_column=self.conll_label_column,
                require_labels=require_labels,
            )
        return finetuning_readers.read_text_examples(
            path,
            self.text_a,
            self.text_b if self.sentence_pair else None,
            self.label,
            file_format=self.file_format,
            has_header=self.has_header,
            regression=self.regression,
            require_labels=require_labels,
        )
