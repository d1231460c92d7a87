"""SpanBERT's span selection (Joshi et al., 2020), vectorised over rows with numpy.

A span is a run of whole words: its length in words is drawn from a geometric
distribution (p=0.2, cut at 10 words and renormalised, as SpanBERT's code
does: mean 3.8 words), its first word uniformly
among the row's words. Spans are drawn until the row's budget of masked tokens
is spent. As in SpanBERT's code, a span whose first word is already masked is
dropped, and a span stops before a word already masked or before the word that
would overflow the budget (so the budget, `num_to_predict`, is never exceeded,
and every masked word is masked whole).

`bert_tf.data.dynamic_masking` draws spans the same way with TensorFlow's stateless ops.
"""

import numpy as np

from bert_tf.data.pretraining_schema import MAX_SPAN_WORDS, SPAN_GEOMETRIC_P


def span_length_probabilities(p: float = SPAN_GEOMETRIC_P, max_words: int = MAX_SPAN_WORDS) -> np.ndarray:
    """P(length = 1..max_words): float64 [max_words].

    Geometric(p) on {1, 2, ...} cut at `max_words` and renormalised, as SpanBERT's
    code does (mean 3.8 words for p=0.2, at most 10).
    """
    lengths = np.arange(1, max_words + 1)
    probabilities = p * (1.0 - p) ** (lengths - 1)
    return probabilities / probabilities.sum()


def span_lengths_from_uniform(u, p: float = SPAN_GEOMETRIC_P, max_words: int = MAX_SPAN_WORDS):
    """Inverse CDF of `span_length_probabilities`: uniform draws in [0, 1) -> lengths in words.

    numpy here; `bert_tf.data.dynamic_masking` computes the same with TensorFlow ops.
    """
    mass = 1.0 - (1.0 - p) ** max_words
    lengths = np.floor(np.log1p(-np.asarray(u) * mass) / np.log1p(-p)).astype(np.int64) + 1
    return np.clip(lengths, 1, max_words)


def sample_span_lengths(
    rng: np.random.Generator, size, p: float = SPAN_GEOMETRIC_P, max_words: int = MAX_SPAN_WORDS
) -> np.ndarray:
    """Span lengths in words, drawn from `span_length_probabilities`."""
    return span_lengths_from_uniform(rng.random(size), p, max_words)


def word_table(candidates: np.ndarray, is_continuation_token: np.ndarray):
    """The words of each row: a candidate token plus the `##` candidates right after it.

    Args:
      candidates: bool [N, L], the maskable positions.
      is_continuation_token: bool [N, L], True where the token is a `##` piece.

    Returns:
      (word_start int64 [N, W], word_length int64 [N, W], num_words int64 [N], word_index int64 [N, L]);
      `word_index` is the word of each candidate position (-1 elsewhere); unused table slots are 0.
    """
    n, seq_length = candidates.shape
    continues = is_continuation_token & candidates
    continues[:, 1:] &= candidates[:, :-1]
    continues[:, 0] = False
    starts = candidates & ~continues
    word_index = np.where(candidates, np.cumsum(starts, axis=1) - 1, -1)
    num_words = starts.sum(axis=1).astype(np.int64)
    max_words = max(int(num_words.max(initial=0)), 1)
    word_start = np.zeros((n, max_words), np.int64)
    word_length = np.zeros((n, max_words), np.int64)
    rows, cols = np.nonzero(starts)
    word_start[rows, word_index[rows, cols]] = cols
    cand_rows, cand_cols = np.nonzero(candidates)
    np.add.at(word_length, (cand_rows, word_index[cand_rows, cand_cols]), 1)
    return word_start, word_length, num_words, word_index


def select_spans(
    candidates: np.ndarray,
    is_continuation_token: np.ndarray,
    num_to_predict: np.ndarray,
    rng: np.random.Generator,
    num_tries: int,
    p: float = SPAN_GEOMETRIC_P,
    max_words: int = MAX_SPAN_WORDS,
):
    """Chooses whole-word spans per row until `num_to_predict` tokens are chosen (or `num_tries` spans drawn).

    Returns:
      (selected bool [N, L], span_id int64 [N, L]: the number of the span that chose each position, -1 where none).
    """
    n, seq_length = candidates.shape
    word_start, word_length, num_words, word_index = word_table(candidates, is_continuation_token)
    rows = np.arange(n)
    max_table = word_length.shape[1]
    word_span = np.full((n, max_table), -1, np.int64)  # the span that chose each word
    count = np.zeros(n, np.int64)
    offsets = np.arange(max_words)[None, :]
    for attempt in range(num_tries):
        lengths = sample_span_lengths(rng, n, p, max_words)
        anchors = np.floor(rng.random(n) * np.maximum(num_words, 1)).astype(np.int64)
        words = anchors[:, None] + offsets  # [N, max_words]
        in_span = (offsets < lengths[:, None]) & (words < num_words[:, None])
        safe_words = np.minimum(words, max_table - 1)
        free = word_span[rows[:, None], safe_words] < 0
        size = np.where(in_span, word_length[rows[:, None], safe_words], 0)
        # A span stops at its first word that is taken or would overflow the budget.
        fits = (count[:, None] + np.cumsum(size, axis=1)) <= num_to_predict[:, None]
        take = np.cumprod(in_span & free & fits, axis=1).astype(bool)
        take &= (count < num_to_predict)[:, None]
        take_rows, take_cols = np.nonzero(take)
        word_span[take_rows, words[take_rows, take_cols]] = attempt
        count += np.where(take, size, 0).sum(axis=1)
        if (count >= num_to_predict).all():
            break
    span_id = np.where(word_index >= 0, word_span[rows[:, None], np.maximum(word_index, 0)], -1)
    return span_id >= 0, span_id
