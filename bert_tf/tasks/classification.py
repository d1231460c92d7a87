"""Sentence and sentence-pair classification, and regression (e.g. SST-2, MRPC, MNLI, STS-B).

`[CLS] text_a [SEP] (text_b [SEP])` goes through the encoder; a
`BertClassifier` reads the pooled [CLS] output. Tokenization and packing run
inside tf.data with the in-graph tokenizer.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from bert_tf import file_io
from bert_tf.data import packed_rows, prefetching
from bert_tf.data.examples import TextExample
from bert_tf.data.finetuning_data import TextExamplesReader
from bert_tf.data.finetuning_readers import count_unseen_labels, label_list_from_examples, warn_unseen_labels
from bert_tf.data.length_buckets import DEFAULT_BUCKET_WIDTH
from bert_tf.errors import DataError
from bert_tf.models import ENCODER_INPUT_NAMES, BertClassifier
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import FEATURE_INDEX_KEY, FinetuningTask, length_bucketed_dataset, sharded
from bert_tf.tasks.registry import register_task


@register_task
class ClassificationTask(FinetuningTask):
    """Classification of a sentence or a pair (`label_list` given) or regression (`label_list` None).

    Args:
      tokenizer: a `TaskTokenizer`.
      seq_length: packed length; longer pairs are trimmed.
      label_list: class names in id order; None for regression (one score).
      sentence_pair: whether examples have a `text_b`.
      dropout_rate: before the output layer; None = the encoder's.
      bucket_width: batches grouped by length and padded to a multiple of it (`bert_tf.data.length_buckets`);
        0 or None: the same batches, every one padded to `seq_length`.
      group_by_length: training batches of near-equal lengths instead of random ones (less padding; see
        `bert_tf.data.length_buckets` for what it costs in accuracy).
      packing: batches of rows filled with whole examples (`bert_tf.data.packed_rows`): the model takes
        `input_example_ids` and gives logits per example slot [rows, slots, classes]; the loss is the mean over
        the batch's examples.
    """

    names = ("classification", "sentence_pair_classification", "regression")
    label_keys = ("label",)
    exports_as_classifier = True
    packs_rows = True

    @classmethod
    def examples_reader(cls, config, data) -> TextExamplesReader:
        pairs = {"classification": False, "sentence_pair_classification": True}.get(config.task)
        return TextExamplesReader(config.task, data, pairs=pairs, regression=config.task == "regression")

    @classmethod
    def from_config(cls, config, tokenizer, labels, reader) -> ClassificationTask:
        options = config.head_and_batch_options()
        return cls(
            tokenizer,
            config.max_seq_length,
            labels,
            sentence_pair=reader.sentence_pair,
            packing=config.packing,
            **options,
        )

    @classmethod
    def has_labels(cls, task: str) -> bool:
        return task != "regression"

    @classmethod
    def labels_from_examples(cls, task: str, examples) -> list:
        labels = label_list_from_examples(examples)
        if len(labels) < 2:
            raise DataError(f"The training data has only the label(s) {labels}; classification needs at least two.")
        return labels

    @classmethod
    def headline_metric(cls, task: str) -> str:
        return "pearson" if task == "regression" else "accuracy"

    @classmethod
    def distillation_loss(cls, task: str) -> str:
        return "regression" if task == "regression" else "classification"

    def __init__(
        self,
        tokenizer,
        seq_length: int,
        label_list: Sequence[str] | None,
        sentence_pair: bool = False,
        dropout_rate: float | None = None,
        bucket_width: int | None = DEFAULT_BUCKET_WIDTH,
        group_by_length: bool = False,
        packing: bool = False,
    ):
        self.tokenizer = tokenizer
        self.packing = packing
        self.bucket_width = bucket_width or 0
        self.group_by_length = group_by_length
        self._lengths_cache = (None, None)
        self.seq_length = seq_length
        self.label_list = list(label_list) if label_list is not None else None
        self.sentence_pair = sentence_pair
        self.dropout_rate = dropout_rate
        if self.label_list is not None:
            if len(self.label_list) < 2:
                raise ValueError(f"Classification needs at least 2 labels, got {self.label_list}.")
            if len(set(self.label_list)) != len(self.label_list):
                raise ValueError(f"Repeated labels in the label list {self.label_list}.")
            self.label_ids = {label: i for i, label in enumerate(self.label_list)}

    @property
    def is_regression(self) -> bool:
        return self.label_list is None

    @property
    def name(self) -> str:
        if self.is_regression:
            return "regression"
        return "sentence_pair_classification" if self.sentence_pair else "classification"

    @property
    def num_outputs(self) -> int:
        return 1 if self.is_regression else len(self.label_list)

    def config(self) -> dict:
        return {
            "task": self.name,
            "label_list": self.label_list,
            "max_seq_length": self.seq_length,
            "sentence_pair": self.sentence_pair,
        }

    def build_model(self, encoder):
        slots = packed_rows.max_examples_per_row(self.seq_length) if self.packing else None
        return BertClassifier(
            encoder, num_classes=self.num_outputs, dropout_rate=self.dropout_rate, examples_per_row=slots
        )

    def compute_loss(self, features, outputs):
        """Means over the batch's examples; packed, over the filled slots (`feature_index` >= 0), as unpacked."""
        logits = ops.reshape(ops.cast(outputs, "float32"), (-1, self.num_outputs))
        if self.packing:
            weights = ops.cast(ops.reshape(features[FEATURE_INDEX_KEY], (-1,)) >= 0, "float32")
        else:
            weights = ops.ones_like(logits[:, 0])

        def mean(values):
            return ops.sum(values * weights) / ops.maximum(ops.sum(weights), 1.0)

        if self.is_regression:
            targets = ops.cast(ops.reshape(features["label"], (-1,)), "float32")
            scores = logits[:, 0]
            return {"loss": mean(ops.square(scores - targets)), "mean_absolute_error": mean(ops.abs(scores - targets))}
        labels = ops.cast(ops.reshape(features["label"], (-1,)), "int32")
        loss = mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels), "float32")
        return {"loss": loss, "accuracy": mean(correct)}

    # --- data ---------------------------------------------------------------

    def featurize(self, examples: Sequence[TextExample], training: bool) -> dict:
        """Column arrays of texts and labels; tokenization happens in the tf.data pipeline."""
        if not examples:
            raise DataError("No examples to featurize.")
        features = {"text_a": np.array([e.text_a for e in examples], dtype=object)}
        if self.sentence_pair:
            missing = next((e for e in examples if e.text_b is None), None)
            if missing is not None:
                raise DataError(f"{missing.guid}: sentence-pair example without a second text (text_b).")
            features["text_b"] = np.array([e.text_b for e in examples], dtype=object)
        labelled = all(e.label is not None for e in examples)
        if training and not labelled:
            unlabelled = next(e for e in examples if e.label is None)
            raise DataError(f"{unlabelled.guid}: training example without a label.")
        if labelled:
            if self.is_regression:
                features["label"] = np.array([float(e.label) for e in examples], dtype=np.float32)
            elif training:
                features["label"] = np.array([self._label_id(e) for e in examples], dtype=np.int32)
            else:
                # Evaluation keeps labels the model was not trained on (`warn_unseen_labels`); id -1.
                warn_unseen_labels(self._unseen_labels(examples), "examples")
                features["label"] = np.array([self.label_ids.get(str(e.label), -1) for e in examples], np.int32)
        return features

    def _label_id(self, example: TextExample) -> int:
        try:
            return self.label_ids[str(example.label)]
        except KeyError:
            raise DataError(
                f"{example.guid}: unknown label {example.label!r}; the labels are {self.label_list}."
            ) from None

    def _unseen_labels(self, examples) -> dict:
        return count_unseen_labels((str(e.label) for e in examples), self.label_ids)

    def dataset(self, features, batch_size, training, seed=None, input_context=None):
        columns = {k: (v.astype(str) if v.dtype == object else v) for k, v in features.items()}
        if self.packing:
            return self._packed_dataset(features, columns, batch_size, training, seed, input_context)
        return length_bucketed_dataset(
            columns,
            self.packed_lengths(features),
            batch_size,
            self.seq_length,
            training,
            seed=seed,
            input_context=input_context,
            bucket_width=self.bucket_width,
            group_by_length=self.group_by_length,
            sequence_keys=ENCODER_INPUT_NAMES,
            transform=self.tokenizer.pack_fn(self.seq_length),
        )

    def _packed_dataset(self, features, columns, batch_size, training, seed, input_context):
        lengths = self.packed_lengths(features)
        if training:
            seed = int(np.random.default_rng().integers(2**31)) if seed is None else seed
            tables = packed_rows.training_row_batches(lengths, batch_size, self.seq_length, seed, input_context)
        else:
            tables = sharded(packed_rows.inference_row_batches(lengths, batch_size, self.seq_length), input_context)
        label_keys = tuple(k for k in self.label_keys if k in columns)
        return packed_rows.gather_packed_batches(
            tables, columns, self.seq_length, transform=self.tokenizer.pack_fn(self.seq_length), slot_keys=label_keys
        )

    def packed_lengths(self, features: dict) -> np.ndarray:
        """[N] packed lengths (pieces incl. [CLS]/[SEP], after trimming to `seq_length`) of `features`' texts.

        Tokenizes every text once more; remembered for the last `features` (the same arrays: `is`).
        """
        import tensorflow as tf

        cached_texts, cached_lengths = self._lengths_cache
        if cached_texts is features["text_a"]:
            return cached_lengths
        texts = {k: features[k].astype(str) for k in ("text_a", "text_b") if k in features}
        pack = self.tokenizer.pack_fn(self.seq_length)
        dataset = tf.data.Dataset.from_tensor_slices(texts).batch(1024)
        dataset = dataset.map(lambda e: tf.reduce_sum(pack(e)["input_mask"], axis=1), num_parallel_calls=2)
        lengths = np.concatenate([batch.numpy() for batch in prefetching.without_autotuning(dataset)]).astype(np.int64)
        self._lengths_cache = (features["text_a"], lengths)
        return lengths

    # --- predictions and metrics -------------------------------------------

    def postprocess(self, examples, features, outputs):
        """{"scores": [N] regression values} or {"label_ids": [N], "probabilities": [N, C]}."""
        logits = np.asarray(outputs["logits"], np.float64)
        if self.is_regression:
            return {"scores": logits[:, 0]}
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return {"label_ids": logits.argmax(axis=-1), "probabilities": shifted / shifted.sum(axis=-1, keepdims=True)}

    def evaluate(self, examples, predictions):
        if any(e.label is None for e in examples):
            raise DataError(f"{next(e.guid for e in examples if e.label is None)}: evaluation example without a label.")
        if self.is_regression:
            return metrics_lib.regression_metrics([float(e.label) for e in examples], predictions["scores"])
        # A label the model was not trained on gets an id of its own that no prediction has: an error.
        ids = dict(self.label_ids)
        unseen = self._unseen_labels(examples)
        ids.update((label, len(ids) + i) for i, label in enumerate(unseen))
        labels = [ids[str(e.label)] for e in examples]
        results = metrics_lib.classification_metrics(labels, predictions["label_ids"], len(self.label_list))
        if unseen:
            results["unseen_label_examples"] = sum(unseen.values())
        return results

    def write_predictions(self, examples, predictions, output_dir, prefix):
        """`{prefix}predictions.tsv`: guid, (label,) prediction, then one probability column per class.

        predictions.tsv (of unlabelled data) also has the text(s) after the guid: `text_a` (and `text_b`).
        """
        buffer = io.StringIO()
        writer = csv.writer(buffer, delimiter="\t", lineterminator="\n")
        has_labels = all(e.label is not None for e in examples)
        texts = [] if prefix else ["text_a", "text_b"] if self.sentence_pair else ["text_a"]
        header = ["guid", *texts] + (["label"] if has_labels else []) + ["prediction"]
        if not self.is_regression:
            header += [f"probability_{label}" for label in self.label_list]
        writer.writerow(header)
        for index, example in enumerate(examples):
            row = [example.guid, *(getattr(example, name) for name in texts)] + ([example.label] if has_labels else [])
            if self.is_regression:
                row.append(f"{predictions['scores'][index]:.6g}")
            else:
                row.append(self.label_list[int(predictions["label_ids"][index])])
                row += [f"{p:.6f}" for p in predictions["probabilities"][index]]
            writer.writerow(row)
        path = os.path.join(output_dir, f"{prefix}predictions.tsv")
        file_io.write_text(path, buffer.getvalue())
        return [path]
