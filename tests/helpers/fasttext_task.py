"""A task plug-in in one module, as docs/finetuning.md's "Adding a task" shows: fastText-style labelled lines.

Each line of a data file is `__label__<name> <text>` (fastText's supervised format; a line without the prefix
is an unlabelled text, for prediction). Importing the module registers `--task=fasttext_classification`;
nothing else in the package names it. The model, loss, metrics and prediction files are
`ClassificationTask`'s; the plug-in adds its config (the label prefix), its reader and its label rule.
"""

from __future__ import annotations

import dataclasses
import os

from bert_tf.data.examples import TextExample
from bert_tf.data.finetuning_data import ExamplesReader, refuse_tfds
from bert_tf.errors import DataError, JobArgumentError
from bert_tf.tasks.classification import ClassificationTask
from bert_tf.tasks.registry import register_task
from bert_tf.tasks.task_config import FinetuningTaskConfig


@dataclasses.dataclass(frozen=True)
class FasttextConfig(FinetuningTaskConfig):
    """The common options and the prefix that marks a line's label."""

    task: str = "fasttext_classification"
    label_prefix: str = "__label__"

    def __post_init__(self):
        super().__post_init__()
        if not self.label_prefix or self.label_prefix != self.label_prefix.strip():
            raise JobArgumentError(f"--label_prefix must be a non-empty word, got {self.label_prefix!r}.")


class FasttextReader(ExamplesReader):
    """`__label__pos great film` lines: the label, then the text."""

    def __init__(self, task: str, data, label_prefix: str):
        refuse_tfds(data, task)
        self.label_prefix = label_prefix

    def read(self, phase: str, path: str | None) -> list:
        examples = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                first, _, rest = line.strip().partition(" ")
                where = f"{os.path.basename(path)}:{number}"
                if first.startswith(self.label_prefix):
                    label, text = first[len(self.label_prefix) :], rest.strip()
                else:
                    label, text = None, line.strip()
                if not text or (label is None and phase != "predict"):
                    raise DataError(f"{where}: expected '{self.label_prefix}<label> <text>', got {line.strip()!r}")
                examples.append(TextExample(guid=where, text_a=text, label=label))
        if not examples:
            raise DataError(f"{path} has no lines.")
        return examples


@register_task
class FasttextTask(ClassificationTask):
    """Single-text classification of fastText-style lines; labels sorted by name, at least two."""

    names = ("fasttext_classification",)
    name = "fasttext_classification"
    config_class = FasttextConfig

    @classmethod
    def examples_reader(cls, config: FasttextConfig, data) -> FasttextReader:
        return FasttextReader(config.task, data, config.label_prefix)

    @classmethod
    def labels_from_examples(cls, task: str, examples) -> list:
        labels = sorted({example.label for example in examples})
        if len(labels) < 2:
            raise DataError(f"The training data has only the label(s) {labels}; --task={task} needs two.")
        return labels
