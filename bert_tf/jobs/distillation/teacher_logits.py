"""The teacher's logits on the training data, computed once and kept in an `.npy` file.

One inference pass before training instead of a teacher forward pass in every step of every epoch, and the
same targets on every resume: the logits travel with the batches as the `teacher_logits` column.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
from absl import logging

from bert_tf import file_io
from bert_tf.jobs.distillation.config import DistillationConfig
from bert_tf.jobs.finetuning.config import FinetuningDataConfig

TEACHER_LOGITS_KEY = "teacher_logits"
# In a student's directory: the teacher's logits on the training data, kept for a resumed run.
TEACHER_LOGITS_DIR = "teacher_logits"


def with_teacher_logits(task_object, teacher_model, features, unlabeled_features, batch_size, strategy, logits_file):
    """The training features (with the unlabeled ones appended) and the teacher's logits as a column.

    `logits_file`: None, or an `.npy` file to read the logits from (if it has one row per feature) or to
    write them to.
    """
    features = task_object.with_unlabeled(features, unlabeled_features)
    num_features = task_object.num_features(features)
    logits = read_logits(logits_file, num_features)
    if logits is None:
        logits = _teacher_outputs(task_object, teacher_model, features, batch_size, strategy)["logits"]
        logging.info("The teacher labelled %d training features.", num_features)
        if logits_file:
            _write_logits(logits_file, logits)
    else:
        logging.info("The teacher's logits on %d training features: %s", num_features, logits_file)
    return task_object.with_columns(features, {TEACHER_LOGITS_KEY: logits.astype(np.float32)})


def _teacher_outputs(task_object, teacher_model, features, batch_size, strategy) -> dict:
    from bert_tf.tasks.inference import predict_outputs

    dataset = task_object.dataset(features, batch_size, training=False)
    return predict_outputs(
        teacher_model,
        dataset,
        strategy=strategy,
        num_features=task_object.num_features(features),
        label="The teacher labels the data",
    )


def teacher_logits_key(config: DistillationConfig, data: FinetuningDataConfig, seed: int | None) -> str:
    """A name for the teacher's logits on the training data: another teacher, data, length or augmentation,
    another name. Files are known by path, size and modification time; `seed` counts only where it draws the
    augmented copies."""
    import hashlib

    def identity(path):
        stat = os.stat(path)
        return [os.path.abspath(path), stat.st_size, stat.st_mtime_ns]

    teacher_files = sorted(
        entry.path for entry in os.scandir(config.teacher_dir) if entry.is_file(follow_symlinks=True)
    )
    key = {
        "teacher": [identity(path) for path in teacher_files],
        "data": dataclasses.asdict(data),
        "train_file": identity(data.train_file) if data.train_file else None,
        "unlabeled_file": identity(config.unlabeled_file) if config.unlabeled_file else None,
        "augmented_copies": [config.augmented_copies, seed] if config.augmented_copies else 0,
        "max_seq_length": config.max_seq_length,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def teacher_logits_file(directory: str, config: DistillationConfig, data: FinetuningDataConfig, seed) -> str:
    """Where `directory` keeps the teacher's logits for `config` and `data` (`teacher_logits_key`)."""
    return os.path.join(directory, TEACHER_LOGITS_DIR, teacher_logits_key(config, data, seed) + ".npy")


def read_logits(path, num_features):
    """The logits kept in `path`, or None if there is no such file or it is not one row per feature."""
    if not path or not os.path.isfile(path):
        return None
    try:
        logits = np.load(path)
    except (OSError, ValueError):
        return None
    return logits if logits.shape[:1] == (num_features,) else None


def _write_logits(path, logits) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with file_io.atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, logits)
