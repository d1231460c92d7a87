"""The distillation's data: the fine-tuning readers' examples, and the texts that only the teacher labels.

The training, evaluation and prediction files are read and featurized as fine-tuning reads them
(`FinetuningInputs`), by the teacher's task plug-in; `--unlabeled_file` and `--augmented_copies` add training
texts without labels of their own.
"""

from __future__ import annotations

import os

from bert_tf.data.examples import TextExample
from bert_tf.data.finetuning_data import ExamplesReader
from bert_tf.distillation.augmentation import augmented_examples
from bert_tf.errors import DataError, JobArgumentError, check_utf8
from bert_tf.jobs.distillation.config import DistillationConfig
from bert_tf.jobs.finetuning import inputs as finetuning_inputs
from bert_tf.jobs.finetuning.config import FinetuningDataConfig


def check_unlabeled_file(config: DistillationConfig) -> None:
    """`--unlabeled_file`, when given, is a UTF-8 file."""
    if config.unlabeled_file:
        if not os.path.isfile(config.unlabeled_file):
            raise DataError(f"--unlabeled_file: file not found: {config.unlabeled_file}")
        check_utf8(config.unlabeled_file, "unlabeled_file")


def read_inputs(inputs, reader: ExamplesReader, data: FinetuningDataConfig, config, seed, *, do_eval, do_predict):
    """Reads and featurizes the data into `inputs` (a new `FinetuningInputs`).

    Returns the features of the texts that only the teacher labels (`config`'s, a `DistillationConfig`; `seed`
    draws the augmented copies), or None without any.
    """
    train_examples = reader.read("train", data.train_file)
    inputs.add_phase("train", train_examples)
    unlabeled = teacher_only_examples(config, reader, inputs.task_object, train_examples, seed)
    unlabeled_features = inputs.task_object.featurize(unlabeled, training=False) if unlabeled else None
    if do_eval:
        inputs.add_phase("eval", reader.read("eval", data.eval_file))
    if do_predict:
        inputs.add_phase("predict", reader.read("predict", data.predict_file))
    return unlabeled_features


def teacher_only_examples(config: DistillationConfig, reader, task_object, train_examples, seed: int) -> list:
    """The `--unlabeled_file` examples, then `--augmented_copies` altered copies of the training texts."""
    examples = _read_unlabeled(config.unlabeled_file, reader, task_object) if config.unlabeled_file else []
    if config.augmented_copies:
        if not all(isinstance(example, TextExample) for example in train_examples):
            raise JobArgumentError(
                f"--augmented_copies alters texts (classification, sentence pairs, regression); the teacher's "
                f"task is {task_object.name}."
            )
        examples += augmented_examples(train_examples, config.augmented_copies, seed)
    return examples


def _read_unlabeled(path: str, reader: ExamplesReader, task_object) -> list:
    """Examples without labels: a `.txt` file has one text (tagging: one sentence of words) per line."""
    if not path.endswith(".txt"):
        return [finetuning_inputs.without_label(e) for e in reader.read("predict", path)]
    if reader.sentence_pair:
        raise JobArgumentError(
            f"--unlabeled_file={path}: a .txt file has single texts; sentence pairs need a file with the "
            "training data's columns."
        )
    examples = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            guid = f"{os.path.basename(path)}:{number}"
            examples.append(task_object.unlabeled_example(guid, text))
    if not examples:
        raise DataError(f"--unlabeled_file: {path} has no text.")
    return examples
