"""Where each WordPiece of a word lies in the word's characters.

SQuAD needs character offsets of tokens (to find the answer's tokens and to
cut the predicted answer out of the context) and tagging needs each word's
first piece. The tokenizer maps a whitespace-separated word to pieces after
cleaning, lower-casing and accent stripping; `piece_char_spans` replays that
normalisation per character so every piece gets the span of original
characters it came from. Where the pieces cannot be matched (an [UNK], a
character the tokenizer rewrites differently) every piece of the word gets
the whole word's span, which is what google-research's word-level mapping
gives too.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from bert_tf.tokenization.char_classes import is_nonspacing_mark, is_removed

_SUFFIX = "##"


def split_on_whitespace(text: str) -> tuple[list[str], list[int]]:
    """Splits `text` into words on whitespace; returns (words, start character of each word)."""
    words, starts = [], []
    in_word = False
    for index, char in enumerate(text):
        if _is_space(char):
            in_word = False
        elif in_word:
            words[-1] += char
        else:
            words.append(char)
            starts.append(index)
            in_word = True
    return words, starts


def _is_space(char: str) -> bool:
    return char in " \t\r\n\u202f" or unicodedata.category(char) == "Zs" or char.isspace()


def _normalized_chars(word: str, lower_case: bool) -> tuple[str, list[int]]:
    """The word as the tokenizer sees it, and the source index of every normalised character."""
    chars, sources = [], []
    for index, char in enumerate(word):
        if is_removed(char):
            continue
        pieces = char
        if lower_case:
            pieces = "".join(c for c in unicodedata.normalize("NFD", char.lower()) if not is_nonspacing_mark(c))
        for c in pieces:
            chars.append(c)
            sources.append(index)
    return "".join(chars), sources


def piece_char_spans(
    word: str, basic_words: Sequence[str], pieces: Sequence[Sequence[str]], lower_case: bool
) -> list[tuple[int, int]]:
    """[start, end) character spans in `word` of each of its WordPieces.

    Args:
      word: a whitespace-free word as it appears in the text.
      basic_words: the tokenizer's words for it after cleaning, normalisation
        and punctuation splitting ("Bob's" -> "bob", "'", "s").
      pieces: the WordPiece strings of each basic word ("play", "##ing"; or
        "[UNK]", which then covers its whole basic word).
      lower_case: whether the tokenizer lower-cases and strips accents.

    Returns:
      One span per piece, in order (the pieces of all basic words flattened).
    """
    num_pieces = sum(len(p) for p in pieces)
    whole = [(0, len(word))] * num_pieces
    if len(basic_words) != len(pieces):
        return whole
    normalized, sources = _normalized_chars(word, lower_case)
    piece_starts, position = [], 0
    for basic_word, word_pieces in zip(basic_words, pieces):
        if not basic_word or normalized[position : position + len(basic_word)] != basic_word:
            return whole
        texts = [p[len(_SUFFIX) :] if i and p.startswith(_SUFFIX) else p for i, p in enumerate(word_pieces)]
        if "".join(texts) == basic_word and all(texts):
            offset = position
            for text in texts:
                piece_starts.append(sources[offset])
                offset += len(text)
        else:
            # [UNK] (or a piece we cannot place): every piece covers the basic word.
            piece_starts.extend([sources[position]] * len(word_pieces))
        position += len(basic_word)
    if position != len(normalized):
        return whole
    # A piece ends where the next one starts; characters the tokenizer dropped (accents,
    # zero-width marks) stay with the piece before them.
    spans = []
    for index, start in enumerate(piece_starts):
        following = [s for s in piece_starts[index + 1 :] if s > start]
        spans.append((start, following[0] if following else len(word)))
    return spans
