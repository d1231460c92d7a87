"""The cuts of `bert_tf.tasks.long_text` as TensorFlow ops on ragged piece ids, for graphs that tokenize.

    pieces = tokenizer(tf.constant(texts))                     # int32 [documents, (pieces)]
    head_and_tail(pieces, budget=126)                          # head_tail's cut: [documents, (<= 126 pieces)]
    document_windows(pieces, window=126, stride=64, max_windows=16)   # [documents, (windows), (<= 126 pieces)]
    max_context_window(starts, num_pieces, document, position, window=126)   # a piece's max-context window

Each gives, for a text of any length (an empty one too), what the Python rules give (`head_tail_split`,
`window_starts`, `capped_starts`, `max_context_windows`), so fine-tuning's tf.data pipeline (head_tail), the
servable classifier (`bert_tf.export.classifier_module`: head_tail and windows) and the servable tagger
(`bert_tf.export.tagger_module`: windows) cut a text as `experiments.finetune` does. Only
TensorFlow ops on static Python settings: no autograph needed.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.tasks.long_text import head_tail_split


def head_and_tail(pieces: tf.RaggedTensor, budget: int) -> tf.RaggedTensor:
    """[documents, (pieces)] -> the same rows, each longer than `budget` cut to its first and last pieces
    (`head_tail_split(budget)`); shorter rows whole."""
    head, tail = head_tail_split(budget)
    lengths = pieces.row_lengths()[:, tf.newaxis]
    positions = tf.ragged.range(pieces.row_lengths())
    keep = (positions < head) | (positions >= lengths - tail) | (lengths <= head + tail)
    return tf.ragged.boolean_mask(pieces, keep)


def window_starts(num_pieces: tf.Tensor, window: int, stride: int, max_windows: int | None) -> tf.RaggedTensor:
    """int64 [documents, (windows)]: `capped_starts(window_starts(n, window, stride), max_windows)` of each n
    (max_windows None: every window, as tagging reads them).

    A document needs `ceil((n - window) / stride) + 1` windows (1 within the window); one that needs more than
    `max_windows` keeps window `round(i * (needed - 1) / (max_windows - 1))` in slot i, rounded half to even in
    float64 as numpy's `round(linspace(...))`. Window k starts at `k * stride`, the last at `n - window`.
    """
    num_pieces = tf.cast(num_pieces, tf.int64)
    needed = (tf.maximum(num_pieces - window, 0) + stride - 1) // stride + 1
    if max_windows is None:
        slots = tf.ragged.range(needed)
        last = tf.gather(num_pieces, slots.value_rowids()) - window
        return slots.with_flat_values(tf.maximum(tf.minimum(slots.flat_values * stride, last), 0))
    slots = tf.ragged.range(tf.minimum(needed, max_windows))
    documents = slots.value_rowids()
    slot = slots.flat_values
    needed = tf.gather(needed, documents)
    if max_windows > 1:
        step = tf.cast(needed - 1, tf.float64) / float(max_windows - 1)
        spread = tf.cast(tf.round(tf.cast(slot, tf.float64) * step), tf.int64)
    else:
        spread = tf.zeros_like(slot)  # numpy's linspace of one point: the first window
    index = tf.where(needed > max_windows, spread, slot)
    last = tf.gather(num_pieces, documents) - window
    return slots.with_flat_values(tf.maximum(tf.minimum(index * stride, last), 0))


def document_windows(pieces: tf.RaggedTensor, window: int, stride: int, max_windows: int | None) -> tf.RaggedTensor:
    """[documents, (pieces)] -> [documents, (windows), (pieces)]: each document's windows (`window_starts`),
    at most `window` pieces each; an empty document has one empty window."""
    lengths = pieces.row_lengths()
    starts = window_starts(lengths, window, stride, max_windows)
    documents = starts.value_rowids()
    start = starts.flat_values
    size = tf.minimum(tf.gather(lengths, documents) - start, window)
    begin = tf.gather(pieces.row_starts(), documents) + start
    window_pieces = tf.gather(pieces.flat_values, tf.ragged.range(begin, begin + size))
    return tf.RaggedTensor.from_row_splits(window_pieces, starts.row_splits, validate=False)


def max_context_window(starts: tf.RaggedTensor, num_pieces, document, position, window: int) -> tf.Tensor:
    """int64 [queries]: for piece `position` of document `document` (int [queries] each), the index into that
    document's windows (`starts` [documents, (windows)], `num_pieces` [documents]) of the one where the piece has
    the most context: `long_text.max_context_windows`'s SQuAD rule in float64 as numpy scores it, the first
    window on a tie; 0 for a piece no window reads (a word without pieces)."""
    document = tf.cast(document, tf.int64)
    begin = tf.gather(starts, document)  # [queries, (windows)]
    query = begin.value_rowids()
    start = begin.flat_values
    piece = tf.gather(tf.cast(position, tf.int64), query)
    total = tf.gather(tf.cast(num_pieces, tf.int64), tf.gather(document, query))
    length = tf.minimum(tf.constant(window, tf.int64), total - start)
    context = tf.cast(tf.minimum(piece - start, start + length - 1 - piece), tf.float64)
    score = context + 0.01 * tf.cast(length, tf.float64)
    score = tf.where((piece >= start) & (piece < start + length), score, -1.0)  # an inside score is > 0
    queries = begin.nrows()
    best = tf.math.unsorted_segment_max(score, query, queries)
    index = tf.range(tf.size(start, out_type=tf.int64)) - tf.gather(begin.row_starts(), query)
    first = tf.where(score == tf.gather(best, query), index, tf.int64.max)
    return tf.math.unsorted_segment_min(first, query, queries)
