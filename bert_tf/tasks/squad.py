"""Extractive question answering: SQuAD v1.1 and v2.0.

Featurization is in `squad_features`, turning logits into answers in
`squad_postprocessing`; this module ties them to a `BertSpanLabeler`, the
loss (mean of the start and end cross-entropies) and the official metrics.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import keras
from keras import ops

from bert_tf.data.examples import SquadExample
from bert_tf.data.finetuning_data import SquadExamplesReader
from bert_tf.errors import JobArgumentError, check_int
from bert_tf.models import BertSpanLabeler
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tasks.base import FinetuningTask, numpy_dataset
from bert_tf.tasks.io_utils import write_json_atomic
from bert_tf.tasks.registry import register_task
from bert_tf.tasks.squad_features import SquadFeatures, featurize_squad
from bert_tf.tasks.squad_postprocessing import SquadPredictions, postprocess_squad
from bert_tf.tasks.task_config import FinetuningTaskConfig


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
    """

    name = "squad"
    names = (name,)
    label_keys = ("start_positions", "end_positions")
    config_class = SquadConfig

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

    def config(self) -> dict:
        return {
            "task": self.name,
            "max_seq_length": self.seq_length,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "version_2_with_negative": self.version_2_with_negative,
        }

    def build_model(self, encoder):
        return BertSpanLabeler(encoder)

    def compute_loss(self, features, outputs):
        losses, accuracies = [], []
        for key, logits_key in (("start_positions", "start_logits"), ("end_positions", "end_logits")):
            logits = ops.cast(outputs[logits_key], "float32")
            positions = ops.cast(ops.reshape(features[key], (-1,)), "int32")
            losses.append(ops.mean(keras.losses.sparse_categorical_crossentropy(positions, logits, from_logits=True)))
            accuracies.append(
                ops.mean(ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), positions), "float32"))
            )
        return {"loss": (losses[0] + losses[1]) / 2.0, "start_accuracy": accuracies[0], "end_accuracy": accuracies[1]}

    def featurize(self, examples: Sequence[SquadExample], training: bool) -> SquadFeatures:
        return featurize_squad(
            examples, self.tokenizer, self.seq_length, self.doc_stride, self.max_query_length, training=training
        )

    def dataset(self, features, batch_size, training, seed=None, input_context=None):
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
