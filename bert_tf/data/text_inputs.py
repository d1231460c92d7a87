"""Texts (single or pairs) -> the encoder's packed int32 inputs, through tf.data: for feature extraction and probing.

from bert_tf.data.text_inputs import pack_texts
inputs = pack_texts(TaskTokenizer("vocab.txt"), ["a text", "a question"], [None, "its context"], 128)
inputs["input_word_ids"].shape  # (2, 128)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bert_tf import prefetching
from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES


def pack_texts(
    tokenizer, texts_a: Sequence[str], texts_b: Sequence[str | None], max_seq_length: int, head_tail: bool = False
) -> dict:
    """Tokenizes and packs texts (pairs where `texts_b` has one) into int32 [num_texts, max_seq_length] inputs.

    `tokenizer` is a `bert_tf.tasks.TaskTokenizer` (anything with its `pack_fn`); `head_tail` (single texts): a
    longer text keeps its first and last pieces instead of its first (`TaskTokenizer.pack_fn`).
    """
    import tensorflow as tf

    columns = {"text_a": np.array(texts_a, dtype=str)}
    if any(b is not None for b in texts_b):
        columns["text_b"] = np.array([b or "" for b in texts_b], dtype=str)
        columns["has_text_b"] = np.array([b is not None for b in texts_b])
    dataset = (
        tf.data.Dataset.from_tensor_slices(columns)
        .batch(1024)
        .map(tokenizer.pack_fn(max_seq_length, head_tail=head_tail))
    )
    parts = [
        {name: batch[name].numpy() for name in ENCODER_INPUT_NAMES} for batch in prefetching.without_autotuning(dataset)
    ]
    return {name: np.concatenate([part[name] for part in parts]) for name in ENCODER_INPUT_NAMES}
