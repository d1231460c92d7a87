"""Token classification (tagging, e.g. NER on CoNLL-2003) with one tag per word.

Each word is split into WordPieces; the word's tag is the target of its
first piece and the other pieces are ignored by the loss, as in the BERT
paper. A sentence longer than `seq_length - 2` pieces is split into several
features at word boundaries (--long_text=truncate, the default), or read in
overlapping windows (--long_text=windows) where each word is trained and tagged
only in the window where its first piece has the most context (SQuAD's rule,
`bert_tf.tasks.long_text.max_context_windows`); the predictions of the parts
are joined. Either way the features are rows like any other, so they pack.
Metrics are word-level tag accuracy and entity (span) precision/recall/F1.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from bert_tf import file_io
from bert_tf.data import packed_rows
from bert_tf.data.examples import TaggingExample
from bert_tf.data.finetuning_data import ConllExamplesReader
from bert_tf.data.finetuning_readers import count_unseen_labels, tag_list_from_examples, warn_unseen_labels
from bert_tf.data.length_buckets import DEFAULT_BUCKET_WIDTH
from bert_tf.errors import DataError, JobArgumentError
from bert_tf.models import BertTokenClassifier
from bert_tf.tasks import long_text as long_text_lib
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import FinetuningTask, numpy_dataset, packed_row_tables
from bert_tf.tasks.registry import register_task

IGNORED_LABEL = -1


@dataclasses.dataclass
class TaggingFeatures:
    """`inputs`: encoder inputs (+ `label_ids` [N, S], -1 where ignored);
    `example_index` [N]; `word_index` [N, S]: the word whose first piece is at
    that position (and is tagged there), else -1; `num_pieces` and `kept_pieces`
    [sentences]: each sentence's pieces and those the model reads (the cut report's)."""

    inputs: dict
    example_index: np.ndarray
    word_index: np.ndarray
    num_pieces: np.ndarray | None = None
    kept_pieces: np.ndarray | None = None

    def __len__(self):
        return len(self.example_index)


@register_task
class TaggingTask(FinetuningTask):
    """Tags words with one of `tag_list` (e.g. ["O", "B-PER", "I-PER", ...]).

    Args:
      tokenizer: a `TaskTokenizer`.
      seq_length: packed length per feature.
      tag_list: tag names in id order.
      dropout_rate: before the output layer; None = the encoder's.
      bucket_width: batches grouped by length and padded to a multiple of it (`bert_tf.data.length_buckets`);
        0 or None: the same batches, every one padded to `seq_length`.
      group_by_length: training batches of near-equal lengths instead of random ones (less padding; see
        `bert_tf.data.length_buckets` for what it costs in accuracy).
      packing: batches of rows filled with whole sentences (`bert_tf.data.packed_rows`), each tagged as if
        alone; the loss stays the mean over the batch's tagged words.
      long_text: a `LongTextConfig`: a sentence longer than the window split at word boundaries (truncate, the
        default) or read in overlapping windows (windows; `window_stride`); head_tail is refused.
    """

    name = "token_classification"
    names = (name,)
    label_keys = ("label_ids",)
    head_input = "sequence_output"
    packs_rows = True

    @classmethod
    def examples_reader(cls, config, data) -> ConllExamplesReader:
        return ConllExamplesReader(config.task, data)

    @classmethod
    def from_config(cls, config, tokenizer, labels, reader) -> TaggingTask:
        return cls(
            tokenizer,
            config.max_seq_length,
            labels,
            packing=config.packing,
            long_text=config.long_text_config,
            **config.head_and_batch_options(),
        )

    @classmethod
    def labels_from_examples(cls, task: str, examples) -> list:
        return tag_list_from_examples(examples)

    @classmethod
    def headline_metric(cls, task: str) -> str:
        return "entity_f1"

    @classmethod
    def distillation_loss(cls, task: str) -> str:
        return "tagging"

    def unlabeled_example(self, guid: str, text: str):
        """One sentence of whitespace-separated words, untagged."""
        return TaggingExample(guid=guid, words=tuple(text.split()), labels=None)

    def __init__(
        self,
        tokenizer,
        seq_length: int,
        tag_list: Sequence[str],
        dropout_rate: float | None = None,
        bucket_width: int | None = DEFAULT_BUCKET_WIDTH,
        group_by_length: bool = False,
        packing: bool = False,
        long_text: long_text_lib.LongTextConfig | None = None,
    ):
        self.long_text = long_text_lib.truncate_unless_given(long_text)
        if self.long_text.long_text == "head_tail":
            raise JobArgumentError(
                "--long_text=head_tail drops the middle of a long sentence, whose words tagging must all tag: give "
                "--long_text=truncate (split at word boundaries) or --long_text=windows."
            )
        if seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3 for tagging, got {seq_length}.")
        if not tag_list:
            raise ValueError("Tagging needs a non-empty tag list.")
        if len(set(tag_list)) != len(tag_list):
            raise ValueError(f"Repeated tags in the tag list {list(tag_list)}.")
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.tag_list = list(tag_list)
        self.tag_ids = {tag: i for i, tag in enumerate(self.tag_list)}
        self.dropout_rate = dropout_rate
        self.bucket_width = bucket_width or 0
        self.group_by_length = group_by_length
        self.packing = packing
        # Words without any piece (only deleted characters) get the "outside" tag.
        self.default_tag = "O" if "O" in self.tag_ids else self.tag_list[0]

    def config(self) -> dict:
        return {
            "task": self.name,
            "label_list": self.tag_list,
            "max_seq_length": self.seq_length,
            "long_text": self.long_text.recorded(),
        }

    def build_model(self, encoder):
        return BertTokenClassifier(
            encoder, num_labels=len(self.tag_list), dropout_rate=self.dropout_rate, packed=self.packing
        )

    def head(self, model):
        return model.token_classifier

    def compute_loss(self, features, outputs):
        logits = ops.cast(outputs, "float32")
        labels = ops.cast(features["label_ids"], "int32")
        weights = ops.cast(ops.greater_equal(labels, 0), "float32")
        safe_labels = ops.maximum(labels, 0)
        per_token = keras.losses.sparse_categorical_crossentropy(safe_labels, logits, from_logits=True)
        total = ops.maximum(ops.sum(weights), 1.0)
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), safe_labels), "float32")
        return {"loss": ops.sum(per_token * weights) / total, "accuracy": ops.sum(correct * weights) / total}

    # --- data ---------------------------------------------------------------

    def featurize(self, examples: Sequence[TaggingExample], training: bool) -> TaggingFeatures:
        if not examples:
            raise DataError("No sentences to featurize.")
        labelled = all(e.labels is not None for e in examples)
        if training and not labelled:
            raise DataError(f"{next(e.guid for e in examples if e.labels is None)}: training sentence without tags.")
        if labelled and not training:
            warn_unseen_labels(self._unseen_tags(examples), "words")
        flat_words = [w for e in examples for w in e.words]
        flat_pieces = iter(self.tokenizer.word_pieces(flat_words))
        room = self.seq_length - 2
        rows = {"input_word_ids": [], "label_ids": [], "word_index": [], "example_index": []}
        num_pieces, kept_pieces = [], []
        for example_index, example in enumerate(examples):
            tag_ids = None
            if labelled and training:
                tag_ids = [self._tag_id(example, i) for i in range(len(example.words))]
            elif labelled:  # a tag the model was not trained on is left out of the loss (IGNORED_LABEL)
                tag_ids = [self.tag_ids.get(tag, IGNORED_LABEL) for tag in example.labels]
            word_pieces = [self.tokenizer.flat_pieces(next(flat_pieces)) for _ in example.words]
            num_pieces.append(sum(len(pieces) for pieces in word_pieces))
            word_pieces = [pieces[:room] for pieces in word_pieces]  # a word of more pieces than a row keeps a row
            kept_pieces.append(sum(len(pieces) for pieces in word_pieces))
            cut = self._windows if self.long_text.windows else self._split_at_words
            for piece_ids, labels, words in cut(word_pieces, tag_ids):
                self._append(rows, example_index, piece_ids, labels, words)

        word_ids = np.asarray(rows["input_word_ids"], np.int32)
        mask = (np.asarray(rows["word_index"]) != -2).astype(np.int32)
        inputs = {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": np.zeros_like(word_ids)}
        if labelled:
            inputs["label_ids"] = np.asarray(rows["label_ids"], np.int32)
        word_index = np.asarray(rows["word_index"], np.int32)
        return TaggingFeatures(
            inputs=inputs,
            example_index=np.asarray(rows["example_index"], np.int32),
            word_index=np.where(word_index == -2, -1, word_index),
            num_pieces=np.asarray(num_pieces, np.int64),
            kept_pieces=np.asarray(kept_pieces, np.int64),
        )

    def _split_at_words(self, word_pieces, tag_ids):
        """--long_text=truncate: (pieces, labels, word numbers) of consecutive parts of a sentence, each as many
        whole words as fit in a row; each part is tagged alone."""
        room = self.seq_length - 2
        chunk_ids, chunk_labels, chunk_words = [], [], []
        for word_number, pieces in enumerate(word_pieces):
            if chunk_ids and len(chunk_ids) + len(pieces) > room:
                yield chunk_ids, chunk_labels, chunk_words
                chunk_ids, chunk_labels, chunk_words = [], [], []
            for i, piece in enumerate(pieces):
                chunk_ids.append(piece)
                chunk_words.append(word_number if i == 0 else -1)
                chunk_labels.append(tag_ids[word_number] if tag_ids is not None and i == 0 else IGNORED_LABEL)
        yield chunk_ids, chunk_labels, chunk_words

    def _windows(self, word_pieces, tag_ids):
        """--long_text=windows: (pieces, labels, word numbers) of each window of a sentence (`window_starts`);
        a word's number and label sit only in the window where its first piece has the most context
        (`max_context_windows`), so each word is trained and tagged once."""
        room = self.seq_length - 2
        piece_ids = [piece for pieces in word_pieces for piece in pieces]
        words = np.asarray(
            [w if i == 0 else -1 for w, pieces in enumerate(word_pieces) for i in range(len(pieces))], np.int64
        )
        labels = np.full(len(piece_ids), IGNORED_LABEL)
        if tag_ids is not None:
            labels[words >= 0] = np.asarray(tag_ids)[words[words >= 0]]
        starts = long_text_lib.window_starts(len(piece_ids), room, self.long_text.stride(room))
        owner = long_text_lib.max_context_windows(starts, room, len(piece_ids))
        for window, start in enumerate(starts):
            span = slice(start, start + room)
            own = owner[span] == window
            yield (
                piece_ids[span],
                np.where(own, labels[span], IGNORED_LABEL).tolist(),
                np.where(own, words[span], -1).tolist(),
            )

    def cut_report(self, features: TaggingFeatures) -> dict:
        return long_text_lib.cut_report(features.num_pieces, features.kept_pieces, self.seq_length - 2)

    def describe_cut(self, report: dict, phase: str) -> list:
        hint = (
            "Most sentences are longer than the window: --long_text=truncate tags each part of a sentence split at "
            "word boundaries alone; --long_text=windows tags each word from the overlapping window where it has "
            "the most context."
        )
        return long_text_lib.describe_cut(report, phase, self.long_text.long_text, self.seq_length - 2, hint)

    def _tag_id(self, example: TaggingExample, word_number: int) -> int:
        tag = example.labels[word_number]
        if tag not in self.tag_ids:
            raise DataError(
                f"{example.guid}: word {word_number + 1} ({example.words[word_number]!r}) has unknown "
                f"tag {tag!r}; the tags are {self.tag_list}."
            )
        return self.tag_ids[tag]

    def _unseen_tags(self, examples) -> dict:
        return count_unseen_labels((tag for e in examples for tag in e.labels), self.tag_ids)

    def _append(self, rows, example_index, piece_ids, labels, words):
        """Adds `[CLS] pieces [SEP] [PAD]...`; word_index -2 marks padding (turned into the mask)."""
        padding = self.seq_length - len(piece_ids) - 2
        tokenizer = self.tokenizer
        rows["input_word_ids"].append(
            [tokenizer.cls_id] + piece_ids + [tokenizer.sep_id] + [tokenizer.pad_id] * padding
        )
        rows["label_ids"].append([IGNORED_LABEL] + labels + [IGNORED_LABEL] * (padding + 1))
        rows["word_index"].append([-1] + words + [-1] + [-2] * padding)
        rows["example_index"].append(example_index)

    def first_features(self, features: TaggingFeatures, count: int) -> TaggingFeatures:
        return dataclasses.replace(
            features,
            inputs={name: values[:count] for name, values in features.inputs.items()},
            example_index=features.example_index[:count],
            word_index=features.word_index[:count],
        )

    def with_unlabeled(self, features: TaggingFeatures, unlabeled: TaggingFeatures | None) -> TaggingFeatures:
        """The rows of `unlabeled` have every tag ignored (`IGNORED_LABEL`); the rows are for training only, so
        `example_index` just counts them and `word_index` is 0."""
        inputs = dict(features.inputs)
        if unlabeled is not None:
            extra = dict(unlabeled.inputs, label_ids=np.full_like(unlabeled.inputs["input_word_ids"], IGNORED_LABEL))
            inputs = {name: np.concatenate([inputs[name], extra[name]]) for name in inputs}
        return dataclasses.replace(
            features,
            inputs=inputs,
            example_index=np.arange(len(inputs["input_word_ids"]), dtype=np.int32),
            word_index=np.zeros_like(inputs["input_word_ids"]),
        )

    def with_columns(self, features: TaggingFeatures, columns: dict) -> TaggingFeatures:
        """Per-token arrays (outputs of length-bucketed batches, as long as their longest) are padded with 0 to
        the features' length."""
        seq_length = features.inputs["input_word_ids"].shape[1]
        padded = {
            name: np.pad(values, [(0, 0), (0, seq_length - values.shape[1])] + [(0, 0)] * (values.ndim - 2))
            if np.ndim(values) >= 2
            else values
            for name, values in columns.items()
        }
        return dataclasses.replace(features, inputs=dict(features.inputs, **padded))

    def dataset(self, features, batch_size, training, seed=None, input_context=None):
        if self.packing:  # rows of whole sentences (or windows), each tagged as alone; the loss is per tag as ever
            lengths = features.inputs["input_mask"].sum(axis=1)
            tables = packed_row_tables(lengths, batch_size, self.seq_length, training, seed, input_context)
            # Every column but the encoder inputs is per token: tags (padded as ignored), a teacher's logits (0).
            token_keys = {
                k: IGNORED_LABEL if k in self.label_keys else 0
                for k in features.inputs
                if k not in packed_rows.ENCODER_KEYS
            }
            return packed_rows.gather_packed_batches(tables, features.inputs, self.seq_length, token_keys=token_keys)
        return numpy_dataset(
            features.inputs, batch_size, training, seed, input_context, self.bucket_width, self.group_by_length
        )

    # --- predictions and metrics -------------------------------------------

    def postprocess(self, examples, features, outputs):
        """A list with one tuple of predicted tags per example."""
        predicted_ids = np.asarray(outputs["logits"]).argmax(axis=-1)
        tags = [[self.default_tag] * len(e.words) for e in examples]
        rows, positions = np.nonzero(features.word_index >= 0)
        for row, position in zip(rows.tolist(), positions.tolist()):
            example_tags = tags[features.example_index[row]]
            example_tags[features.word_index[row, position]] = self.tag_list[predicted_ids[row, position]]
        return [tuple(t) for t in tags]

    def evaluate(self, examples, predictions):
        if any(e.labels is None for e in examples):
            raise DataError(f"{next(e.guid for e in examples if e.labels is None)}: evaluation sentence without tags.")
        # A tag the model was not trained on is never predicted: those words count as errors.
        results = metrics_lib.tagging_metrics([e.labels for e in examples], predictions)
        unseen = self._unseen_tags(examples)
        if unseen:
            results["unseen_label_words"] = sum(unseen.values())
        return results

    def write_predictions(self, examples, predictions, output_dir, prefix):
        """`{prefix}predictions.txt` in CoNLL form: word, (gold tag,) predicted tag; blank line between sentences."""
        lines = []
        for example, tags in zip(examples, predictions):
            for i, (word, tag) in enumerate(zip(example.words, tags)):
                gold = [example.labels[i]] if example.labels is not None else []
                lines.append("\t".join([word] + gold + [tag]))
            lines.append("")
        path = os.path.join(output_dir, f"{prefix}predictions.txt")
        file_io.write_text(path, "\n".join(lines) + "\n")
        return [path]
