"""SQuAD featurization: `[CLS] question [SEP] context window [SEP]` with a sliding window.

A context longer than the room left by the question is cut into windows
`doc_stride` pieces apart, as in BERT's `run_squad.py`. Every feature keeps,
per position, the character span in the context its piece came from (-1 for
the question, special tokens and padding) and whether this window gives the
piece its maximal context, which post-processing needs to turn logits back
into answer text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from absl import logging

from bert_tf.data.examples import SquadExample
from bert_tf.tasks.word_alignment import split_on_whitespace


@dataclasses.dataclass
class SquadFeatures:
    """Arrays of N features of `seq_length` positions.

    `inputs`: input_word_ids, input_mask, input_type_ids (int32 [N, S]) and,
    for training, start_positions/end_positions (int32 [N]; 0 = [CLS] = no
    answer in this window). `example_index` int32 [N] points into the
    examples; `char_start`/`char_end` int32 [N, S] and `is_max_context` bool
    [N, S] map positions back to the context.
    """

    inputs: dict
    example_index: np.ndarray
    char_start: np.ndarray
    char_end: np.ndarray
    is_max_context: np.ndarray

    def __len__(self):
        return len(self.example_index)


@dataclasses.dataclass
class _TokenizedContext:
    piece_ids: list
    char_spans: list  # absolute [start, end) in the context, per piece


def _tokenize_contexts(contexts: Sequence[str], tokenizer) -> dict:
    words_per_context, starts_per_context = [], []
    for context in contexts:
        words, starts = split_on_whitespace(context)
        words_per_context.append(words)
        starts_per_context.append(starts)
    flat_words = [w for words in words_per_context for w in words]
    flat_pieces = tokenizer.word_pieces(flat_words)
    tokenized, position = {}, 0
    for context, words, starts in zip(contexts, words_per_context, starts_per_context):
        piece_ids, spans = [], []
        for word, start in zip(words, starts):
            word_pieces = flat_pieces[position]
            position += 1
            pieces = tokenizer.flat_pieces(word_pieces)
            for piece, (s, e) in zip(pieces, tokenizer.piece_spans(word, word_pieces)):
                piece_ids.append(piece)
                spans.append((start + s, start + e))
        tokenized[context] = _TokenizedContext(piece_ids, spans)
    return tokenized


def _windows(num_pieces: int, room: int, doc_stride: int) -> list[tuple[int, int]]:
    windows, start = [], 0
    while True:
        length = min(num_pieces - start, room)
        windows.append((start, length))
        if start + length >= num_pieces:
            return windows
        start += min(length, doc_stride)


def _max_context_score(window, position):
    start, length = window
    if not start <= position < start + length:
        return None
    left, right = position - start, start + length - 1 - position
    # Ties between windows go to the longer one, as in run_squad.py.
    return min(left, right) + 0.01 * length


def answer_piece_span(context: _TokenizedContext, start_char: int, end_char: int):
    """First and last piece overlapping characters [start_char, end_char), or None."""
    first = last = None
    for index, (s, e) in enumerate(context.char_spans):
        if e > start_char and s < end_char:
            if first is None:
                first = index
            last = index
    return None if first is None else (first, last)


def _window_feature(tokenizer, seq_length: int, query, context: _TokenizedContext, windows, window_number, answer_span):
    """One feature: [CLS] query [SEP] window [SEP], padded; start/end are 0 when the answer is outside the window."""
    window_start, window_length = windows[window_number]
    offset = len(query) + 2
    ids = np.full(seq_length, tokenizer.pad_id, np.int32)
    types = np.zeros(seq_length, np.int32)
    char_start = np.full(seq_length, -1, np.int32)
    char_end = np.full(seq_length, -1, np.int32)
    max_context = np.zeros(seq_length, bool)
    ids[0] = tokenizer.cls_id
    ids[1 : 1 + len(query)] = query
    ids[1 + len(query)] = tokenizer.sep_id
    for i in range(window_length):
        piece = window_start + i
        ids[offset + i] = context.piece_ids[piece]
        char_start[offset + i], char_end[offset + i] = context.char_spans[piece]
        scores = [_max_context_score(w, piece) for w in windows]
        best = max(range(len(windows)), key=lambda w: -1.0 if scores[w] is None else scores[w])
        max_context[offset + i] = best == window_number
    ids[offset + window_length] = tokenizer.sep_id
    types[offset : offset + window_length + 1] = 1
    length = offset + window_length + 1
    mask = np.zeros(seq_length, np.int32)
    mask[:length] = 1
    start_position = end_position = 0
    if answer_span is not None:
        first, last = answer_span
        if window_start <= first and last < window_start + window_length:
            start_position, end_position = first - window_start + offset, last - window_start + offset
    return ids, types, mask, start_position, end_position, char_start, char_end, max_context


def featurize_squad(
    examples: Sequence[SquadExample],
    tokenizer,
    seq_length: int,
    doc_stride: int,
    max_query_length: int,
    training: bool,
) -> SquadFeatures:
    """Turns SQuAD examples into windowed features (see `SquadFeatures`).

    Args:
      tokenizer: a `TaskTokenizer`.
      seq_length: total length with [CLS] and both [SEP]s.
      doc_stride: pieces between the starts of consecutive windows.
      max_query_length: questions are cut to this many pieces.
      training: add start/end positions; examples whose answer cannot be
        located in the pieces are skipped with a warning.
    """
    if max_query_length + 3 >= seq_length:
        raise ValueError(
            f"max_seq_length ({seq_length}) must exceed max_query_length ({max_query_length}) + 3 "
            "to leave room for the context."
        )
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be positive, got {doc_stride}.")
    contexts = _tokenize_contexts(sorted({e.context for e in examples}), tokenizer)
    questions = tokenizer.tokenize([e.question for e in examples])

    word_ids, type_ids, masks, starts, ends = [], [], [], [], []
    example_indices, char_starts, char_ends, max_contexts = [], [], [], []
    skipped = 0
    for example_index, example in enumerate(examples):
        context = contexts[example.context]
        query = questions[example_index][:max_query_length]
        answer_span = None
        if training and not example.is_impossible:
            answer = example.answers[0]
            answer_span = answer_piece_span(context, answer.start_char, answer.start_char + len(answer.text))
            if answer_span is None:
                logging.warning(
                    "SQuAD question %s: answer %r covers no context piece; skipping.", example.qas_id, answer.text
                )
                skipped += 1
                continue
        room = seq_length - len(query) - 3
        windows = _windows(len(context.piece_ids), room, doc_stride)
        for window_number in range(len(windows)):
            ids, types, mask, start_position, end_position, char_start, char_end, max_context = _window_feature(
                tokenizer, seq_length, query, context, windows, window_number, answer_span
            )
            word_ids.append(ids)
            type_ids.append(types)
            masks.append(mask)
            starts.append(start_position)
            ends.append(end_position)
            example_indices.append(example_index)
            char_starts.append(char_start)
            char_ends.append(char_end)
            max_contexts.append(max_context)
    if skipped:
        logging.warning("Skipped %d SQuAD training question(s) whose answer could not be located.", skipped)
    if not word_ids:
        raise ValueError("No SQuAD features: every question was skipped.")
    inputs = {"input_word_ids": np.stack(word_ids), "input_mask": np.stack(masks), "input_type_ids": np.stack(type_ids)}
    if training:
        inputs["start_positions"] = np.asarray(starts, np.int32)
        inputs["end_positions"] = np.asarray(ends, np.int32)
    return SquadFeatures(
        inputs=inputs,
        example_index=np.asarray(example_indices, np.int32),
        char_start=np.stack(char_starts),
        char_end=np.stack(char_ends),
        is_max_context=np.stack(max_contexts),
    )
