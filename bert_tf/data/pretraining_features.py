"""The features of a BERT pretraining TFRecord (google-research/bert's `create_pretraining_data.py`).

Defined once for the writer (`bert_tf.pretraining_data`), the reader
(`pretraining_dataset`) and the inspector (`bert_tf.pretraining_data.inspection`):

    input_ids, input_mask, segment_ids              int64   [seq_length]
    masked_lm_positions, masked_lm_ids              int64   [max_predictions_per_seq]
    masked_lm_weights                               float32 [max_predictions_per_seq]
    next_sentence_labels                            int64   [1]   (sentence task "nsp", the original's)
    sentence_order_labels                           int64   [1]   ("sop": ALBERT's sentence order, 1 = swapped)

Records of the "none" sentence task (RoBERTa's full sentences) have no label
feature; which label a record holds tells readers which task it was written for
(`sentence_task_of`).
"""

import tensorflow as tf

from bert_tf.data.pretraining_schema import SENTENCE_LABEL_FEATURES, SENTENCE_TASKS

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
MASKED_LM_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
LABEL_FEATURES = ("next_sentence_labels",)

FLOAT_FEATURES = ("masked_lm_weights",)


def label_features(sentence_task: str = "nsp") -> tuple:
    """The label feature of `sentence_task` ("nsp", "sop", "none"), as a 0- or 1-tuple."""
    if sentence_task not in SENTENCE_TASKS:
        raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}, got {sentence_task!r}")
    label = SENTENCE_LABEL_FEATURES[sentence_task]
    return (label,) if label else ()


def int_features(sentence_task: str = "nsp") -> tuple:
    """The int64 features of a record of `sentence_task`, in the writer's order."""
    return tuple(
        name
        for name in SEQUENCE_FEATURES + MASKED_LM_FEATURES + label_features(sentence_task)
        if name not in FLOAT_FEATURES
    )


INT_FEATURES = int_features("nsp")

# How records without masked-LM features parse (dynamic masking, or an inspector of such files).
MASKED_LM_MODES = ("required", "optional", "absent")


def sentence_task_of(feature_names) -> str:
    """The sentence task of a record with these feature names: "nsp", "sop" or "none" (no label feature)."""
    names = set(feature_names)
    for task, label in SENTENCE_LABEL_FEATURES.items():
        if label and label in names:
            return task
    return "none"


def feature_lengths(seq_length: int, max_predictions_per_seq: int, sentence_task: str = "nsp") -> dict:
    """name -> number of values per record, for every feature."""
    return {
        **{name: seq_length for name in SEQUENCE_FEATURES},
        **{name: max_predictions_per_seq for name in MASKED_LM_FEATURES},
        **{name: 1 for name in label_features(sentence_task)},
    }


def feature_spec(
    seq_length: int, max_predictions_per_seq: int, masked_lm: str = "required", sentence_task: str = "nsp"
) -> dict:
    """The `tf.io.parse_example` spec.

    Args:
      masked_lm: "required"; "optional": records without them parse to zeros
        (weight 0 = no prediction); "absent": not parsed at all.
      sentence_task: which label feature the records hold (`sentence_task_of`).
    """
    if masked_lm not in MASKED_LM_MODES:
        raise ValueError(f"masked_lm must be one of {MASKED_LM_MODES}, got {masked_lm!r}")
    spec = {}
    for name, length in feature_lengths(seq_length, max_predictions_per_seq, sentence_task).items():
        if name in MASKED_LM_FEATURES and masked_lm == "absent":
            continue
        dtype = tf.float32 if name in FLOAT_FEATURES else tf.int64
        default = None
        if name in MASKED_LM_FEATURES and masked_lm == "optional":
            default = [0.0 if dtype == tf.float32 else 0] * length
        spec[name] = tf.io.FixedLenFeature([length], dtype, default_value=default)
    return spec
