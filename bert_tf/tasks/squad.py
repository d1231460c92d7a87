"""Extractive question answering: SQuAD v1.1 and v2.0.

Featurization is in `squad_features`, turning logits into answers in
`squad_postprocessing`; this module ties them to a `BertSpanLabeler`, the
loss (mean of the start and end cross-entropies) and the official metrics.
Windows pack rows as other examples do (`bert_tf.data.packed_rows`): each
window's softmax covers its own tokens only, its positions count from its own
[CLS], and the loss is the mean over windows, as one window a row gives it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from keras import ops

from bert_tf.data import packed_rows
from bert_tf.data.examples import SquadExample
from bert_tf.data.finetuning_data import SquadExamplesReader
from bert_tf.errors import JobArgumentError, check_int
from bert_tf.layers import packed_examples
from bert_tf.models import BertSpanLabeler
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import FEATURE_INDEX_KEY, FinetuningTask, numpy_dataset, packed_row_tables
from bert_tf.tasks.io_utils import write_json_atomic
from bert_tf.tasks.registry import register_task
from bert_tf.tasks.squad_features import SquadFeatures, featurize_squad
from bert_tf.tasks.squad_postprocessing import SquadPredictions, postprocess_squad
from bert_tf.tasks.task_config import FinetuningTaskConfig

# As `bert_tf.layers.packed_examples`: float32 logits plus this give a softmax weight of exactly zero.
_MASK_PENALTY = -1e9


@dataclasses.dataclass(frozen=True)
class SquadConfig(FinetuningTaskConfig):
    """SQuAD's options besides the common ones (the flags of the same names; see `SquadTask`).

    SquadConfig(max_seq_length=384, doc_stride=128, version_2_with_negative=True)
    """

    task: str = "squad"
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        for flag in ("doc_stride", "max_query_length", "max_answer_length", "n_best_size"):
            check_int(flag, getattr(self, flag))
        if self.max_query_length + 3 >= self.max_seq_length:
            raise JobArgumentError(
                f"--max_seq_length ({self.max_seq_length}) must exceed --max_query_length "
                f"({self.max_query_length}) + 3."
            )


@register_task
class SquadTask(FinetuningTask):
    """SQuAD with `run_squad.py`'s windowing and answer selection.

    Args:
      tokenizer: a `TaskTokenizer`.
      seq_length: packed length of `[CLS] question [SEP] window [SEP]`.
      doc_stride: pieces between consecutive context windows.
      max_query_length: question length cap in pieces.
      max_answer_length: answer length cap in pieces.
      n_best_size: candidates per logit list and size of the n-best lists.
      version_2_with_negative: SQuAD v2.0 (questions may have no answer).
      null_score_diff_threshold: v2.0 answers "" when the null score exceeds
        the best span's score by more than this.
      packing: batches of rows filled with whole windows (`bert_tf.data.packed_rows`), each labelled and
        scored over its own tokens as if alone; start/end positions stay relative to each window's [CLS].
    """

    name = "squad"
    names = (name,)
    label_keys = ("start_positions", "end_positions")
    config_class = SquadConfig
    packs_rows = True

    @classmethod
    def examples_reader(cls, config: SquadConfig, data) -> SquadExamplesReader:
        return SquadExamplesReader(config.task, data, config.version_2_with_negative)

    @classmethod
    def from_config(cls, config: SquadConfig, tokenizer, labels, reader) -> SquadTask:
        config.refuse_long_text()
        return cls(
            tokenizer,
            config.max_seq_length,
            doc_stride=config.doc_stride,
            max_query_length=config.max_query_length,
            max_answer_length=config.max_answer_length,
            n_best_size=config.n_best_size,
            version_2_with_negative=config.version_2_with_negative,
            null_score_diff_threshold=config.null_score_diff_threshold,
            packing=config.packing,
        )

    @classmethod
    def has_labels(cls, task: str) -> bool:
        return False

    @classmethod
    def headline_metric(cls, task: str) -> str:
        return "f1"

    def __init__(
        self,
        tokenizer,
        seq_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
        max_answer_length: int = 30,
        n_best_size: int = 20,
        version_2_with_negative: bool = False,
        null_score_diff_threshold: float = 0.0,
        packing: bool = False,
    ):
        for flag, value in (
            ("doc_stride", doc_stride),
            ("max_query_length", max_query_length),
            ("max_answer_length", max_answer_length),
            ("n_best_size", n_best_size),
        ):
            if value < 1:
                raise ValueError(f"{flag} must be positive, got {value}.")
        if max_query_length + 3 >= seq_length:
            raise ValueError(f"max_seq_length ({seq_length}) must exceed max_query_length ({max_query_length}) + 3.")
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.max_answer_length = max_answer_length
        self.n_best_size = n_best_size
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        self.packing = packing

    def config(self) -> dict:
        return {
            "task": self.name,
            "max_seq_length": self.seq_length,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "version_2_with_negative": self.version_2_with_negative,
        }

    def build_model(self, encoder):
        return BertSpanLabeler(encoder, packed=self.packing)

    def compute_loss(self, features, outputs):
        """Means over the batch's windows of the start and end cross-entropies, each a softmax over the window's
        own tokens (padding, and in packed rows the other windows, get no weight).

        One window a row: `input_mask` marks its tokens and the positions are [batch]. Packed rows:
        `input_example_ids` marks each slot's tokens, the positions are [rows, slots] from each window's [CLS],
        and empty slots (`feature_index` -1) are left out, so both give the same loss and gradients.
        """
        if self.packing:
            example_ids = ops.cast(features[packed_rows.EXAMPLE_IDS_KEY], "int32")
            example_ids = example_ids * ops.cast(features["input_mask"], "int32")
            slots = packed_rows.max_examples_per_row(self.seq_length)
            filled = ops.cast(ops.greater_equal(features[FEATURE_INDEX_KEY], 0), "float32")
        else:
            example_ids = ops.cast(features["input_mask"], "int32")
            slots = 1
            filled = ops.ones_like(ops.cast(ops.reshape(features["start_positions"], (-1, 1)), "float32"))
        # [batch, slots, seq]: the tokens of each slot's window, and each token's offset from its window's [CLS].
        owned = ops.equal(example_ids[:, None, :], ops.arange(1, slots + 1, dtype="int32")[None, :, None])
        offsets = packed_examples.example_position_ids(example_ids)[:, None, :]
        count = ops.maximum(ops.sum(filled), 1.0)
        losses, accuracies = [], []
        for key, logits_key in (("start_positions", "start_logits"), ("end_positions", "end_logits")):
            logits = ops.cast(outputs[logits_key], "float32")[:, None, :]
            logits = ops.where(owned, logits, logits + _MASK_PENALTY)
            positions = ops.reshape(ops.cast(features[key], "int32"), (-1, slots))
            target = ops.logical_and(owned, ops.equal(offsets, positions[:, :, None]))
            log_probs = ops.log_softmax(logits, axis=-1)
            per_window = -ops.sum(ops.where(target, log_probs, 0.0), axis=-1)
            losses.append(ops.sum(per_window * filled) / count)
            hit = ops.equal(ops.argmax(logits, axis=-1), ops.argmax(ops.cast(target, "int32"), axis=-1))
            accuracies.append(ops.sum(ops.cast(hit, "float32") * filled) / count)
        return {"loss": (losses[0] + losses[1]) / 2.0, "start_accuracy": accuracies[0], "end_accuracy": accuracies[1]}

    def featurize(self, examples: Sequence[SquadExample], training: bool) -> SquadFeatures:
        return featurize_squad(
            examples, self.tokenizer, self.seq_length, self.doc_stride, self.max_query_length, training=training
        )

    def dataset(self, features, batch_size, training, seed=None, input_context=None):
        if self.packing:  # rows of whole windows; start/end positions per slot, from each window's [CLS]
            lengths = features.inputs["input_mask"].sum(axis=1)
            tables = packed_row_tables(lengths, batch_size, self.seq_length, training, seed, input_context)
            slot_keys = tuple(k for k in self.label_keys if k in features.inputs)
            token_keys = {k: 0 for k in features.inputs if k not in packed_rows.ENCODER_KEYS + slot_keys}
            return packed_rows.gather_packed_batches(
                tables, features.inputs, self.seq_length, slot_keys=slot_keys, token_keys=token_keys
            )
        return numpy_dataset(features.inputs, batch_size, training, seed, input_context)

    def postprocess(self, examples, features, outputs) -> SquadPredictions:
        return postprocess_squad(
            examples,
            features,
            outputs["start_logits"],
            outputs["end_logits"],
            n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
            version_2_with_negative=self.version_2_with_negative,
            null_score_diff_threshold=self.null_score_diff_threshold,
        )

    def evaluate(self, examples, predictions: SquadPredictions):
        gold = {}
        for example in examples:
            gold[example.qas_id] = [] if example.is_impossible else [a.text for a in example.answers]
        return metrics_lib.squad_metrics(
            gold, predictions.answers, predictions.null_odds if self.version_2_with_negative else None
        )

    def write_predictions(self, examples, predictions: SquadPredictions, output_dir, prefix):
        """`{prefix}predictions.json` (id -> text), `{prefix}nbest_predictions.json`, and for
        v2.0 `{prefix}null_odds.json` (the input of the official script's --na-prob-file)."""
        paths = [
            os.path.join(output_dir, f"{prefix}predictions.json"),
            os.path.join(output_dir, f"{prefix}nbest_predictions.json"),
        ]
        write_json_atomic(paths[0], predictions.answers)
        write_json_atomic(paths[1], predictions.nbest)
        if self.version_2_with_negative:
            paths.append(os.path.join(output_dir, f"{prefix}null_odds.json"))
            write_json_atomic(paths[2], predictions.null_odds)
        return paths
