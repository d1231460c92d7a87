"""The features of a BERT pretraining TFRecord (google-research/bert's `create_pretraining_data.py`).

Defined once for the writer (`bert_tf.pretraining_data`), the reader
(`pretraining_dataset`) and the inspector (`bert_tf.pretraining_data.inspection`):

    input_ids, input_mask, segment_ids              int64   [seq_length]
    masked_lm_positions, masked_lm_ids              int64   [max_predictions_per_seq]
    masked_lm_weights                               float32 [max_predictions_per_seq]
    next_sentence_labels                            int64   [1]
"""

import tensorflow as tf

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
MASKED_LM_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
LABEL_FEATURES = ("next_sentence_labels",)

FLOAT_FEATURES = ("masked_lm_weights",)
INT_FEATURES = tuple(
    name for name in SEQUENCE_FEATURES + MASKED_LM_FEATURES + LABEL_FEATURES if name not in FLOAT_FEATURES
)

# How records without masked-LM features parse (dynamic masking, or an inspector of such files).
MASKED_LM_MODES = ("required", "optional", "absent")


def feature_lengths(seq_length: int, max_predictions_per_seq: int) -> dict:
    """name -> number of values per record, for every feature."""
    return {
        **{name: seq_length for name in SEQUENCE_FEATURES},
        **{name: max_predictions_per_seq for name in MASKED_LM_FEATURES},
        **{name: 1 for name in LABEL_FEATURES},
    }


def feature_spec(seq_length: int, max_predictions_per_seq: int, masked_lm: str = "required") -> dict:
    """The `tf.io.parse_example` spec.

    Args:
      masked_lm: "required"; "optional": records without them parse to zeros
        (weight 0 = no prediction); "absent": not parsed at all.
    """
    if masked_lm not in MASKED_LM_MODES:
        raise ValueError(f"masked_lm must be one of {MASKED_LM_MODES}, got {masked_lm!r}")
    spec = {}
    for name, length in feature_lengths(seq_length, max_predictions_per_seq).items():
        if name in MASKED_LM_FEATURES and masked_lm == "absent":
            continue
        dtype = tf.float32 if name in FLOAT_FEATURES else tf.int64
        default = None
        if name in MASKED_LM_FEATURES and masked_lm == "optional":
            default = [0.0 if dtype == tf.float32 else 0] * length
        spec[name] = tf.io.FixedLenFeature([length], dtype, default_value=default)
    return spec
