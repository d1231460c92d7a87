"""The files a fine-tuning job writes besides checkpoints: the model directory's and the guard of predictions.

    from bert_tf.jobs.finetuning.files import task_record
    record = task_record(task, do_lower_case=True, data=data_config)   # task_config.json's content

A fine-tuned `output_dir` holds `bert_config.json`, `vocab.txt` and `task_config.json` (`task_record`), so it
is itself a model directory that a later evaluation, prediction, export or distillation reads alone.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from bert_tf import file_io
from bert_tf.checkpoints.model_source import TASK_CONFIG_NAME, ResolvedModel
from bert_tf.errors import JobArgumentError
from bert_tf.jobs.finetuning.config import FinetuningDataConfig

# The data settings a later evaluation or prediction in the same output_dir reuses (`read_task_config`).
RECORDED_DATA_SETTINGS = (
    "text_a_column",
    "text_b_column",
    "label_column",
    "file_format",
    "has_header",
    "conll_word_column",
    "conll_label_column",
)


def task_record(task_object, do_lower_case: bool, data: FinetuningDataConfig) -> dict:
    """What a fine-tuned directory's task_config.json holds: the task's own config (its "task" name, labels,
    lengths), the casing and the data settings, so a later evaluation, prediction or export needs only the
    directory."""
    return dict(
        task_object.config(),
        do_lower_case=do_lower_case,
        data={name: getattr(data, name) for name in RECORDED_DATA_SETTINGS},
    )


def write_finetuned_model_files(
    output_dir: str, source: ResolvedModel, task_object, data: FinetuningDataConfig
) -> None:
    """Writes bert_config.json, vocab.txt and task_config.json into `output_dir`."""
    from bert_tf.checkpoints.model_dir import write_model_files as write_config_and_vocab

    write_config_and_vocab(output_dir, source.config, source.vocab_file)
    file_io.write_json(os.path.join(output_dir, TASK_CONFIG_NAME), task_record(task_object, source.do_lower_case, data))


def check_no_earlier_predictions(output_dir: str) -> None:
    """Refuses to replace the `predictions.*` of an earlier run silently."""
    earlier = sorted(glob.glob(os.path.join(glob.escape(output_dir), "predictions.*")))
    if earlier:
        raise JobArgumentError(
            f"--output_dir: {earlier[0]} exists (an earlier --do_predict); pass --overwrite_predictions to "
            "replace it, or move it away."
        )


def write_classifier_model_dir(
    output_dir: str,
    model,
    vocab_file: str,
    label_list: Sequence[str],
    max_seq_length: int,
    do_lower_case: bool,
    **data_settings,
) -> str:
    """Writes `model` (a `BertClassifier`) as a fine-tuned classification model directory; returns its path.

    The layout is `experiments.finetune`'s: `bert_config.json`, `vocab.txt`, a checkpoint,
    `weights.safetensors` and `task_config.json` (`label_list` in id order, the packed length, the casing and
    the data columns in `data_settings`, e.g. `text_a_column="text"`).
    """
    from bert_tf.checkpoints.model_dir import write_model_dir
    from bert_tf.tasks.classification import ClassificationTask

    write_model_dir(output_dir, model, vocab_file=vocab_file)
    task = ClassificationTask(None, max_seq_length, label_list, dropout_rate=model.dropout_rate)
    record = task_record(task, do_lower_case, FinetuningDataConfig(**data_settings))
    file_io.write_json(os.path.join(output_dir, TASK_CONFIG_NAME), record)
    return os.path.abspath(output_dir)
