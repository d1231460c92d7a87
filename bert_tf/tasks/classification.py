"""Sentence and sentence-pair classification, and regression (e.g. SST-2, MRPC, MNLI, STS-B).

`[CLS] text_a [SEP] (text_b [SEP])` goes through the encoder; a
`BertClassifier` reads the pooled [CLS] output. Tokenization and packing run
inside tf.data with the in-graph tokenizer. A single text longer than the window is truncated, cut to its head
and tail, or read in windows whose logits a `DocumentClassifier` pools (`bert_tf.tasks.long_text`).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from bert_tf import file_io, prefetching
from bert_tf.data import packed_rows
from bert_tf.data.examples import TextExample
from bert_tf.data.finetuning_data import TextExamplesReader
from bert_tf.data.finetuning_readers import count_unseen_labels, label_list_from_examples, warn_unseen_labels
from bert_tf.data.length_buckets import DEFAULT_BUCKET_WIDTH
from bert_tf.errors import DataError, JobArgumentError
from bert_tf.models import ENCODER_INPUT_NAMES, BertClassifier, DocumentClassifier
from bert_tf.models.document_classifier import DOCUMENT_IDS_KEY, WINDOW_DOCUMENT_IDS_KEY
from bert_tf.tasks import long_text as long_text_lib
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import (
    FEATURE_INDEX_KEY,
    LABEL_WEIGHT_KEY,
    FinetuningTask,
    length_bucketed_dataset,
    packed_row_tables,
    sharded,
)
from bert_tf.tasks.registry import register_task

# Featurized columns that the cut report reads and the model never sees.
CUT_KEYS = ("num_pieces", "kept_pieces", "over_max_windows")
NUM_WINDOWS_KEY = "num_windows"


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
        the batch's examples. With windows, a batch's documents' windows fill its rows, and the model pools
        them into logits per document [documents, classes].
      long_text: a `LongTextConfig`: texts longer than the window truncated (also its default, None; the
        fine-tuning job decides that default by the data first), cut to head and tail, or read in windows
        (features [documents, windows, seq_length]; a batch counts documents).
    """

    names = ("classification", "sentence_pair_classification", "regression")
    label_keys = ("label",)
    exports_as_classifier = True
    head_input = "pooled_output"
    packs_rows = True
    windows_by_default = True

    @classmethod
    def examples_reader(cls, config, data) -> TextExamplesReader:
        pairs = {"classification": False, "sentence_pair_classification": True}.get(config.task)
        return TextExamplesReader(config.task, data, pairs=pairs, regression=config.task == "regression")

    @classmethod
    def from_config(cls, config, tokenizer, labels, reader) -> ClassificationTask:
        options = config.head_and_batch_options()
        if reader.sentence_pair and config.long_text_config.long_text not in (None, "truncate"):
            raise JobArgumentError(
                f"--long_text={config.long_text_config.long_text} is for single texts, not sentence pairs."
            )
        return cls(
            tokenizer,
            config.max_seq_length,
            labels,
            sentence_pair=reader.sentence_pair,
            packing=config.packing,
            long_text=config.long_text_config,
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
        long_text: long_text_lib.LongTextConfig | None = None,
    ):
        self.tokenizer = tokenizer
        self.long_text = long_text_lib.truncate_unless_given(long_text)
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
            "long_text": self.long_text.recorded(),
        }

    @property
    def window(self) -> int:
        """The pieces of text one sequence holds: max_seq_length less [CLS] and the [SEP](s)."""
        return self.seq_length - (3 if self.sentence_pair else 2)

    @property
    def pools_by_attention(self) -> bool:
        """Whether the model learns how to pool a document's windows (--window_pooling=attention), weights a
        checkpoint fine-tuned with another pooling lacks."""
        return self.long_text.windows and self.long_text.window_pooling == "attention"

    def build_model(self, encoder):
        slots = packed_rows.max_examples_per_row(self.seq_length) if self.packing else None
        if self.long_text.windows:
            return DocumentClassifier(
                encoder,
                self.num_outputs,
                dropout_rate=self.dropout_rate,
                pooling=self.long_text.window_pooling,
                examples_per_row=slots,
            )
        return BertClassifier(
            encoder, num_classes=self.num_outputs, dropout_rate=self.dropout_rate, examples_per_row=slots
        )

    def head(self, model):
        return model.classifier

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
        features.update(self._long_text_features(features))
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

    def num_features(self, features: dict) -> int:
        return len(next(iter(features.values())))

    def first_features(self, features: dict, count: int) -> dict:
        return {name: values[:count] for name, values in features.items()}

    def with_unlabeled(self, features: dict, unlabeled: dict | None) -> dict:
        """Adds `label_weight`: 1 for the rows of `features`, 0 for those of `unlabeled` (whose `label` is 0)."""
        features = dict(features, **{LABEL_WEIGHT_KEY: np.ones(self.num_features(features), np.float32)})
        if unlabeled is None:
            return features
        size = self.num_features(unlabeled)
        extra = dict(unlabeled, label=np.zeros(size, features["label"].dtype))
        extra[LABEL_WEIGHT_KEY] = np.zeros(size, np.float32)
        return {name: _concatenate_documents(features[name], extra[name]) for name in features}

    def with_columns(self, features: dict, columns: dict) -> dict:
        return dict(features, **columns)

    def _label_id(self, example: TextExample) -> int:
        try:
            return self.label_ids[str(example.label)]
        except KeyError:
            raise DataError(
                f"{example.guid}: unknown label {example.label!r}; the labels are {self.label_list}."
            ) from None

    def _unseen_labels(self, examples) -> dict:
        return count_unseen_labels((str(e.label) for e in examples), self.label_ids)

    def _long_text_features(self, features: dict) -> dict:
        """`num_pieces` and `kept_pieces` [N] (the cut report's), and with windows the windows' encoder inputs."""
        if not self.long_text.windows:
            num_pieces = self.piece_counts(features)
            budget = self.window
            return {CUT_KEYS[0]: num_pieces, CUT_KEYS[1]: np.minimum(num_pieces, budget)}
        pieces = self.tokenizer.tokenize(list(features["text_a"]))
        window, stride = self.window, self.long_text.stride(self.window)
        needed = [long_text_lib.window_starts(len(p), window, stride) for p in pieces]
        starts = [long_text_lib.capped_starts(s, self.long_text.max_windows) for s in needed]
        slots = max(len(s) for s in starts)
        shape = (len(pieces), slots, self.seq_length)
        word_ids, mask = np.full(shape, self.tokenizer.pad_id, np.int32), np.zeros(shape, np.int32)
        for document, (document_pieces, document_starts) in enumerate(zip(pieces, starts)):
            for slot, start in enumerate(document_starts):
                row = [self.tokenizer.cls_id, *document_pieces[start : start + window], self.tokenizer.sep_id]
                word_ids[document, slot, : len(row)] = row
                mask[document, slot, : len(row)] = 1
        return {
            "input_word_ids": word_ids,
            "input_mask": mask,
            "input_type_ids": np.zeros(shape, np.int32),
            NUM_WINDOWS_KEY: np.array([len(s) for s in starts], np.int64),
            CUT_KEYS[0]: np.array([len(p) for p in pieces], np.int64),
            CUT_KEYS[1]: np.array([long_text_lib.covered_pieces(s, window, len(p)) for p, s in zip(pieces, starts)]),
            CUT_KEYS[2]: np.array([len(n) > len(s) for n, s in zip(needed, starts)]),
        }

    def cut_report(self, features: dict) -> dict:
        capped = features.get(CUT_KEYS[2])
        return long_text_lib.cut_report(features[CUT_KEYS[0]], features[CUT_KEYS[1]], self.window, capped)

    def describe_cut(self, report: dict, phase: str) -> list:
        return long_text_lib.describe_cut(report, phase, self.long_text.long_text, self.window)

    def piece_counts(self, features: dict) -> np.ndarray:
        """[N] pieces of each example's text(s), untrimmed, without [CLS]/[SEP] (tokenized in tf.data)."""
        import tensorflow as tf

        texts = {k: features[k].astype(str) for k in ("text_a", "text_b") if k in features}
        tokenizer = self.tokenizer.tokenizer

        def count(batch):
            return tf.add_n([tokenizer(text).row_lengths() for text in batch.values()])

        dataset = tf.data.Dataset.from_tensor_slices(texts).batch(1024).map(count, num_parallel_calls=2)
        return np.concatenate([batch.numpy() for batch in prefetching.without_autotuning(dataset)]).astype(np.int64)

    def _pack_fn(self):
        return self.tokenizer.pack_fn(self.seq_length, head_tail=self.long_text.long_text == "head_tail")

    def dataset(self, features, batch_size, training, seed=None, input_context=None):
        if self.long_text.windows:
            return self._windows_dataset(features, batch_size, training, seed, input_context)
        columns = {k: (v.astype(str) if v.dtype == object else v) for k, v in features.items() if k not in CUT_KEYS}
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
            transform=self._pack_fn(),
        )

    def _windows_dataset(self, features, batch_size, training, seed, input_context):
        """Batches of `batch_size` documents: [documents, windows, seq_length], the windows axis cut to the
        batch's most windows (bucket width 1; with --bucket_width=0, every batch has all the window slots), or
        packed (`_packed_windows_dataset`)."""
        if self.packing:
            return self._packed_windows_dataset(features, batch_size, training, seed, input_context)
        # The windows' encoder inputs, and every column of one value (or vector) a document: labels, and a
        # distillation's label weights and teacher logits.
        skipped = (*CUT_KEYS, NUM_WINDOWS_KEY, "text_a")
        columns = {k: v for k, v in features.items() if k not in skipped}
        return length_bucketed_dataset(
            columns,
            features[NUM_WINDOWS_KEY],
            batch_size,
            features["input_mask"].shape[1],
            training,
            seed=seed,
            input_context=input_context,
            bucket_width=1 if self.bucket_width else 0,
            group_by_length=self.group_by_length,
            sequence_keys=ENCODER_INPUT_NAMES,
        )

    def _packed_windows_dataset(self, features, batch_size, training, seed, input_context):
        """Batches of `batch_size` documents whose windows fill packed rows (`document_row_batches`), with
        `window_document_ids` [rows, slots] and `document_ids` = `feature_index` [documents]; the documents'
        other columns (labels, label weights, a teacher's logits) [documents, ...]."""
        import tensorflow as tf

        real = features["input_mask"][:, :, 0] > 0  # [documents, window slots]: the windows, in document order
        windows = {k: features[k][real] for k in ENCODER_INPUT_NAMES}
        windows[WINDOW_DOCUMENT_IDS_KEY] = np.nonzero(real)[0].astype(np.int32)
        if training:
            seed = int(np.random.default_rng().integers(2**31)) if seed is None else seed
        tables = packed_rows.document_row_batches(
            features[NUM_WINDOWS_KEY],
            windows["input_mask"].sum(axis=1),
            batch_size,
            self.seq_length,
            training,
            seed or 0,
            input_context,
        )
        if not training:
            tables = sharded(tables, input_context)
        gather = packed_rows.packed_batch_function(windows, self.seq_length, slot_keys=(WINDOW_DOCUMENT_IDS_KEY,))
        skipped = set(ENCODER_INPUT_NAMES + CUT_KEYS + (NUM_WINDOWS_KEY, "text_a"))
        per_document = {k: tf.constant(v) for k, v in features.items() if k not in skipped}

        def batch(documents, table):
            values = gather(table)
            values[WINDOW_DOCUMENT_IDS_KEY] = tf.where(
                values[FEATURE_INDEX_KEY] >= 0, values[WINDOW_DOCUMENT_IDS_KEY], -1
            )
            present = documents >= 0
            for name, column in per_document.items():
                gathered = tf.gather(column, tf.maximum(documents, 0))
                filled = tf.reshape(present, [-1] + [1] * (gathered.shape.rank - 1))
                values[name] = tf.where(filled, gathered, tf.zeros_like(gathered))
            values[DOCUMENT_IDS_KEY] = values[FEATURE_INDEX_KEY] = tf.cast(documents, tf.int32)
            return values

        return prefetching.prefetched(tables.map(batch, num_parallel_calls=tf.data.AUTOTUNE))

    def _packed_dataset(self, features, columns, batch_size, training, seed, input_context):
        lengths = self.packed_lengths(features)
        tables = packed_row_tables(lengths, batch_size, self.seq_length, training, seed, input_context)
        # Every column but the texts is one value (or vector) per example: labels, a distillation's label weights
        # and teacher logits.
        slot_keys = tuple(k for k in columns if k not in ("text_a", "text_b"))
        return packed_rows.gather_packed_batches(
            tables, columns, self.seq_length, transform=self._pack_fn(), slot_keys=slot_keys
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
        pack = self._pack_fn()
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


def _concatenate_documents(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """`first` then `second` along the examples; windows' inputs [N, windows, seq_length] with the fewer window
    slots padded by empty windows (an all-zero mask, which `WindowPooling` skips)."""
    if first.ndim == 3 and first.shape[1] != second.shape[1]:
        slots = max(first.shape[1], second.shape[1])
        first, second = (np.pad(a, ((0, 0), (0, slots - a.shape[1]), (0, 0))) for a in (first, second))
    return np.concatenate([first, second])
