"""`FinetuningTask`: what a fine-tuning task adds to the encoder.

A task owns, for its family of data: the output model on top of a
`BertEncoder`, the loss, featurization of examples into model inputs, the
tf.data pipeline, post-processing of the model's outputs into predictions,
the metrics, and the prediction files. The training loop and the job
(`bert_tf.jobs.finetuning.job`) are shared by every task.

Every dataset element is a dict with the encoder inputs, the task's label
features (`label_keys`, training and evaluation) and `feature_index` (int32,
the position in the featurized data; -1 for the rows that pad the last
evaluation batch), so outputs computed in any order or on any number of
replicas can be put back in order.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import numpy as np

from bert_tf import prefetching
from bert_tf.data.finetuning_data import ExamplesReader
from bert_tf.tasks.task_config import FinetuningTaskConfig

FEATURE_INDEX_KEY = "feature_index"
# Distillation's weight of a row's own label: 0 for the rows that only the teacher labels (`DistillationLoss`).
LABEL_WEIGHT_KEY = "label_weight"


class FinetuningTask(abc.ABC):
    """Base class of the fine-tuning task plug-ins (classification, tagging, SQuAD).

    A plug-in is the data side of a task for `bert_tf.jobs.finetuning.job`: featurization, the tf.data pipeline,
    the loss, metrics and prediction files, and which task model (a `bert_tf.models.TaskModel`) to build.

    A subclass registers itself with `bert_tf.tasks.registry.register_task` under its `names` (the values of
    `--task`) and declares, as class attributes and class methods, what the jobs need before an instance
    exists: its config class, how it reads its examples, its label rule, and what other jobs may do with it
    (export as a text classifier, distillation, the headline metric).
    """

    #: the `--task` names this class registers under.
    names: tuple = ()
    #: the `--task` name of an instance (`config()["task"]`, recorded in task_config.json).
    name: str = ""
    #: feature keys holding the training targets.
    label_keys: tuple = ()
    #: its options: `FinetuningTaskConfig` or a subclass with the task's own fields.
    config_class = FinetuningTaskConfig
    #: a fine-tuned directory of this task exports as a servable text classifier (`bert_tf.export`).
    exports_as_classifier: bool = False
    #: the `BertEncoder` output its model's `head` reads ("" for a task without a head to distill).
    head_input: str = ""
    #: `from_config` builds a task of packed rows when the config's `packing` is True (its default resolves
    #: to it: `FinetuningTaskConfig.resolve_packing`); False: one example a row, `--packing` refused.
    packs_rows: bool = False
    #: the default --long_text (None) reads single texts in windows when one is longer than the window
    #: (`bert_tf.jobs.finetuning.inputs.resolve_long_text`); False: it truncates.
    windows_by_default: bool = False

    @classmethod
    @abc.abstractmethod
    def examples_reader(cls, config, data) -> ExamplesReader:
        """How this task reads its examples from the job's `FinetuningDataConfig` (`data`).

        Raises `JobArgumentError` naming the flag for data settings that do not fit the task.
        """

    @classmethod
    @abc.abstractmethod
    def from_config(cls, config, tokenizer, labels, reader: ExamplesReader) -> FinetuningTask:
        """The plug-in for `config`, the model's `TaskTokenizer` and the resolved `labels` (None without)."""

    @classmethod
    def has_labels(cls, task: str) -> bool:
        """Whether `--task=task` has a label vocabulary (class names or tags): no for regression and SQuAD."""
        return True

    @classmethod
    def labels_from_examples(cls, task: str, examples: Sequence) -> list:
        """The label vocabulary from the training examples, when neither a flag nor an earlier run gives one.

        Raises `DataError` for training data whose labels cannot train the task.
        """
        raise NotImplementedError(f"--task={task} needs --label_list.")

    @classmethod
    def headline_metric(cls, task: str) -> str | None:
        """The `evaluate` key that ranks models of `--task=task` (e.g. the distillation frontier's)."""
        return None

    @classmethod
    def distillation_loss(cls, task: str) -> str | None:
        """The `bert_tf.distillation.losses.DistillationLoss` kind for `--task=task`; None: not distillable."""
        return None

    def unlabeled_example(self, guid: str, text: str):
        """An example without a label from one line of plain text (distillation's `--unlabeled_file`)."""
        from bert_tf.data.examples import TextExample

        return TextExample(guid=guid, text_a=text)

    @abc.abstractmethod
    def build_model(self, encoder):
        """The task's Keras model on top of `encoder`."""

    def head(self, model):
        """The output layer of `model` (one `build_model` built), reading the encoder's `head_input`.

        What a student copies from its teacher, and what distillation's hidden-state step calls itself.
        """
        raise NotImplementedError(f"--task={self.name}: its model has no head to distill.")

    @abc.abstractmethod
    def compute_loss(self, features: dict, outputs) -> dict:
        """Training loss and batch metrics: a dict of float32 scalars with a `loss` entry."""

    @abc.abstractmethod
    def featurize(self, examples: Sequence, training: bool) -> Any:
        """Model inputs for `examples` (task-specific, consumed by `dataset` and `postprocess`)."""

    @abc.abstractmethod
    def dataset(self, features, batch_size: int, training: bool, seed: int | None = None, input_context=None):
        """A tf.data.Dataset of batches of `features`.

        Training datasets are shuffled and repeated and drop the last partial
        batch; others go once over the data in order. With an
        `tf.distribute.InputContext`, the batch size is the per-replica one
        and the data are sharded by input pipeline.
        """

    # --- the features, as `featurize` returns them -------------------------------

    def num_features(self, features) -> int:
        """How many features (model input rows) `features` holds."""
        return len(features)

    def first_features(self, features, count: int):
        """The first `count` features of `features`, in the same form."""
        raise NotImplementedError(f"--task={self.name}: its features are not sliced.")

    def with_unlabeled(self, features, unlabeled):
        """Distillation's training features: `features` followed by `unlabeled` (featurized without labels).

        The rows of `unlabeled` (None: none) have no label of their own, so the distillation loss learns them
        from the teacher alone (`bert_tf.distillation.losses.DistillationLoss`).
        """
        raise NotImplementedError(f"--task={self.name} is not distilled.")

    def with_columns(self, features, columns: dict):
        """`features` with more arrays of one row per feature (the teacher's logits), batched with the inputs."""
        raise NotImplementedError(f"--task={self.name}: its features take no more columns.")

    @abc.abstractmethod
    def postprocess(self, examples: Sequence, features, outputs: dict) -> Any:
        """Predictions from the model outputs (numpy, one row per feature, in feature order)."""

    @abc.abstractmethod
    def evaluate(self, examples: Sequence, predictions) -> dict:
        """Metrics of `predictions` against the labels of `examples`."""

    @abc.abstractmethod
    def write_predictions(self, examples: Sequence, predictions, output_dir: str, prefix: str) -> list:
        """Writes the predictions under `output_dir`; returns the written paths."""

    def cut_report(self, features) -> dict:
        """How many texts of `features` were longer than the window and what share of their pieces was dropped
        (`bert_tf.tasks.long_text.cut_report`); {}: the task does not say (it keeps every piece, as SQuAD's
        windows do)."""
        return {}

    def describe_cut(self, report: dict, phase: str) -> list:
        """Log lines for a non-empty `cut_report` of the `phase` data."""
        return []

    def config(self) -> dict:
        """What a later run needs to rebuild this task (labels, lengths), JSON-serialisable."""
        return {"task": self.name}


def sharded(dataset, input_context):
    """Shards by input pipeline when a `tf.distribute.InputContext` is given."""
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset


def packed_row_tables(lengths, batch_size: int, seq_length: int, training: bool, seed=None, input_context=None):
    """The slot tables of packed rows (`bert_tf.data.packed_rows`) over examples of `lengths` tokens: for
    training a random order each epoch drawn from `seed` (a fresh one when None), else the input order,
    sharded by input pipeline."""
    from bert_tf.data import packed_rows

    if training:
        seed = int(np.random.default_rng().integers(2**31)) if seed is None else seed
        return packed_rows.training_row_batches(lengths, batch_size, seq_length, seed, input_context)
    return sharded(packed_rows.inference_row_batches(lengths, batch_size, seq_length), input_context)


def with_feature_index(columns: dict, batch_size: int, training: bool) -> dict:
    """Adds `feature_index`; for evaluation, pads to a multiple of `batch_size`.

    Padding rows repeat the first row with `feature_index` -1 (dropped from the
    outputs), so every evaluation batch has the same static shape: no retrace
    for a short last batch, and what XLA and TPUs need.
    """
    size = len(next(iter(columns.values())))
    columns = dict(columns)
    columns[FEATURE_INDEX_KEY] = np.arange(size, dtype=np.int32)
    padding = 0 if training else -size % batch_size
    if padding:
        columns = {
            name: np.concatenate([np.asarray(values), np.repeat(np.asarray(values)[:1], padding, axis=0)])
            for name, values in columns.items()
        }
        columns[FEATURE_INDEX_KEY][size:] = -1
    return columns


def numpy_dataset(
    arrays: dict,
    batch_size: int,
    training: bool,
    seed=None,
    input_context=None,
    bucket_width: int | None = None,
    group_by_length: bool = False,
):
    """A batched tf.data pipeline over equal-length numpy arrays, with `feature_index` added.

    `bucket_width` a number (the arrays must have `input_mask`): the batches of `length_bucketed_dataset`
    (`group_by_length` there) and, for a width > 0, cut to the smallest multiple of it that holds their longest row
    (0: the same batches at the arrays' full length); None: every batch at the arrays' full length, in input
    order or, for training, shuffled example by example (SQuAD's windows).
    """
    import tensorflow as tf

    if bucket_width is not None:
        mask = np.asarray(arrays["input_mask"])
        max_seq_length = mask.shape[1]
        sequence_keys = [k for k, v in arrays.items() if np.ndim(v) >= 2 and np.shape(v)[1] == max_seq_length]
        return length_bucketed_dataset(
            arrays,
            mask.sum(axis=1),
            batch_size,
            max_seq_length,
            training,
            seed=seed,
            input_context=input_context,
            bucket_width=bucket_width,
            group_by_length=group_by_length,
            sequence_keys=sequence_keys,
        )
    size = len(next(iter(arrays.values())))
    dataset = tf.data.Dataset.from_tensor_slices(with_feature_index(arrays, batch_size, training))
    dataset = sharded(dataset, input_context)
    if training:
        dataset = dataset.shuffle(min(size, 100_000), seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.batch(batch_size, drop_remainder=True)
    return prefetching.prefetched(dataset)


def length_bucketed_dataset(
    columns: dict,
    lengths,
    batch_size: int,
    max_seq_length: int,
    training: bool,
    seed=None,
    input_context=None,
    bucket_width: int | None = 16,
    group_by_length: bool = False,
    sequence_keys=(),
    transform=None,
):
    """Batches of `columns`, each cut to the bucket length of its longest row (`bert_tf.data.length_buckets`).

    Training: endless, random batches drawn from `seed` epoch by epoch (with `group_by_length`, batches of
    near-equal lengths) and resumable from a saved iterator (`training_batch_indices`); otherwise one pass,
    shortest batches first, every batch full (filled up with `feature_index` -1 rows). `transform` runs on each
    gathered batch before `sequence_keys` are cut (e.g. the tokenizer's packer, which pads to
    `max_seq_length`). `bucket_width` 0: the same batches, uncut, so every batch keeps the static shape
    [batch_size, max_seq_length] (TPUs); the width changes the padding and nothing else, which is what makes
    `--bucket_width=0` a like-for-like comparison.
    """

    from bert_tf.data import length_buckets

    if training:
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31))
        columns = with_feature_index(columns, batch_size, training=True)
        indices = length_buckets.training_batch_indices(
            lengths, batch_size, max_seq_length, bucket_width, seed, input_context, group_by_length=group_by_length
        )
    else:
        indices = sharded(
            length_buckets.inference_batch_indices(lengths, batch_size, max_seq_length, bucket_width), input_context
        )
    if not bucket_width:
        sequence_keys = ()
    dataset = length_buckets.gather_batches(indices, columns, sequence_keys, training, transform)
    return prefetching.prefetched(dataset)
