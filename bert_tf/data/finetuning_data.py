"""Where a fine-tuning job's examples come from: the readers a task plug-in picks, with the job's data settings.

    reader = TextExamplesReader("classification", data_config, pairs=False)
    train_examples = reader.read("train", data_config.train_file)

`data_config` is a `bert_tf.jobs.finetuning.config.FinetuningDataConfig` (or anything with its fields). Each task
plug-in (`bert_tf.tasks`) returns one of these from its `examples_reader`: `TextExamplesReader` (TSV/CSV/JSONL
or TFDS text), `ConllExamplesReader` (CoNLL columns), `SquadExamplesReader` (SQuAD JSON). The parsing itself is
in `finetuning_readers`; a reader binds it to the columns and splits of the job and checks that they fit the
task, naming the flag. Errors are `JobArgumentError`s naming the flag, or `DataError`s naming the file and line.
"""

from __future__ import annotations

from bert_tf.data import finetuning_readers
from bert_tf.errors import DataError, JobArgumentError


class ExamplesReader:
    """Reads the examples of one phase ("train", "eval" or "predict"; labels optional for "predict").

    Attributes:
      label_names: the labels in id order when the source names them itself (a TFDS ClassLabel), else None.
      sentence_pair: whether the examples are pairs of texts.
    """

    label_names = None
    sentence_pair = False

    def read(self, phase: str, path: str | None) -> list:
        raise NotImplementedError

    def columns_used(self) -> dict:
        """The data settings (`FinetuningDataConfig` field -> value) this reader resolved from a default.

        A fine-tuned directory records these instead of the None that stood for the default.
        """
        return {}


def refuse_tfds(data, task: str) -> None:
    """A file-only task refuses `--tfds_name`, naming the flag."""
    if data.tfds_name:
        raise JobArgumentError(
            f"--tfds_name is supported for text classification and regression, not --task={task}; "
            "use --train_file/--eval_file/--predict_file."
        )


class TextExamplesReader(ExamplesReader):
    """Texts (or pairs) with a class or a score: TSV/CSV/JSONL files, or a prepared TFDS dataset.

    Args:
      task: the `--task` name (for the messages).
      data: the job's data settings.
      pairs: True: the examples are pairs (`text_b` required); False: single texts (`--text_b_column` refused);
        None: either, as `--text_b_column` or the TFDS dataset says.
      regression: the labels are numbers, not class names.
    """

    def __init__(self, task: str, data, pairs: bool | None, regression: bool = False):
        self.tfds_name = tfds_name = data.tfds_name
        self.tfds_data_dir = data.tfds_data_dir
        self.file_format = data.file_format
        self.has_header = data.has_header
        self.regression = regression
        text_a_column, text_b_column, label_column = data.text_a_column, data.text_b_column, data.label_column
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
            if pairs is False and self.text_b:
                raise JobArgumentError(
                    f"{tfds_name} has sentence pairs ({self.text_a!r}, {self.text_b!r}); use "
                    "--task=sentence_pair_classification."
                )
            if pairs and not self.text_b:
                raise JobArgumentError(f"{tfds_name} has single sentences; use --task=classification.")
            self.label_names = finetuning_readers.read_tfds_label_names(tfds_name, self.tfds_data_dir, self.label)
            if (self.label_names is None) != regression:
                kind = "a numeric (regression)" if self.label_names is None else "a class"
                raise JobArgumentError(f"{tfds_name} has {kind} label {self.label!r}; it does not fit --task={task}.")
        else:
            self.text_a = text_a_column if text_a_column is not None else "text_a"
            self.text_b = text_b_column if text_b_column is not None else ("text_b" if pairs else None)
            self.label = label_column if label_column is not None else "label"
            if pairs is False and text_b_column is not None:
                raise JobArgumentError(f"--text_b_column is for sentence pairs, not --task={task}.")
        self.sentence_pair = bool(pairs) or (pairs is None and bool(self.text_b))

    def columns_used(self) -> dict:
        if self.tfds_name:
            # A TFDS dataset's text features stay None (its own, which also picks its evaluation split).
            return {"label_column": self.label}
        return {
            "text_a_column": self.text_a,
            "text_b_column": self.text_b if self.sentence_pair else None,
            "label_column": self.label,
        }

    def read(self, phase: str, path: str | None) -> list:
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


class ConllExamplesReader(ExamplesReader):
    """Words with tags from CoNLL column files (`--conll_word_column`, `--conll_label_column`)."""

    def __init__(self, task: str, data):
        refuse_tfds(data, task)
        self.word_column = data.conll_word_column
        self.label_column = data.conll_label_column

    def read(self, phase: str, path: str | None) -> list:
        return finetuning_readers.read_conll(
            path, word_column=self.word_column, label_column=self.label_column, require_labels=phase != "predict"
        )


class SquadExamplesReader(ExamplesReader):
    """Questions with contexts and answers from SQuAD JSON (v2.0: questions may have no answer)."""

    def __init__(self, task: str, data, version_2_with_negative: bool = False):
        refuse_tfds(data, task)
        self.version_2_with_negative = version_2_with_negative

    def read(self, phase: str, path: str | None) -> list:
        return finetuning_readers.read_squad(
            path, training=phase == "train", version_2_with_negative=self.version_2_with_negative
        )
