"""WordPiece in plain Python: the in-graph tokenizer's ids with no TensorFlow (for JAX and other backends).

The same rules as `BertTokenizer` (HuggingFace's slow `BertTokenizer`, so
google-research/bert's algorithm with the three differences the README lists),
stated with the standard library's `unicodedata`: clean (delete control,
format, private-use and unassigned characters, NUL and U+FFFD; whitespace to
spaces), space out CJK ideographs, NFC, split on whitespace, lower-case and
strip accents (NFD, drop `Mn`) when uncased, split off punctuation, then
greedy longest-match-first WordPiece, a word over 100 characters becoming
`[UNK]`. `tests/test_python_tokenizer.py` checks it id for id against the
reference ids of tests/fixtures/tokenization (1,108 texts, two vocabularies,
with and without preserved special tokens) and against the in-graph tokenizer.
Packing follows `bert_pack_inputs`: `[CLS] A [SEP] (B [SEP])`, room handed out
one token per segment in turn, type ids 0/1, padding 0.

It is a pure-Python loop (with a per-word cache): fine for preparing
fine-tuning data or serving a few requests, far slower than the in-graph
tokenizer on large corpora.

    >>> import os, tempfile
    >>> from bert_tf.tokenization.python_tokenizer import PythonBertTokenizer
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", ","]
    >>> _ = open(vocab, "w").write("\\n".join(tokens))
    >>> tokenizer = PythonBertTokenizer(vocab, lower_case=True)
    >>> tokenizer.tokenize("UnAffable, ok")
    [5, 6, 7, 8, 1]
    >>> tokenizer.encode(["unaffable"], seq_length=6)["input_word_ids"].tolist()
    [[2, 5, 6, 7, 3, 0]]
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np

from bert_tf.tokenization import vocab as vocab_lib
from bert_tf.tokenization.char_classes import CJK_RANGES

MAX_CHARS_PER_WORD = 100


@functools.lru_cache(maxsize=65536)
def _char_class(ch: str) -> str:
    """'d' deleted, 's' space, 'c' CJK, 'p' punctuation, '' other."""
    if ch in "\t\n\r":
        return "s"
    category = unicodedata.category(ch)
    if ch in "\x00\ufffd" or category[0] == "C":
        return "d"
    if ch == " " or category == "Zs":
        return "s"
    cp = ord(ch)
    if any(lo <= cp <= hi for lo, hi in CJK_RANGES):
        return "c"
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or category[0] == "P":
        return "p"
    return ""


def _split_punctuation(word: str) -> list:
    pieces, current = [], ""
    for ch in word:
        if _char_class(ch) == "p":
            if current:
                pieces.append(current)
            pieces.append(ch)
            current = ""
        else:
            current += ch
    if current:
        pieces.append(current)
    return pieces


class PythonBertTokenizer:
    """Text -> WordPiece ids, and packed encoder inputs, in plain Python.

    Args:
      vocab_file: one token per line (a model directory's `vocab.txt`).
      lower_case: lower-case and strip accents (uncased vocabularies).
      preserve_special_tokens: keep literal `[CLS]`, `[SEP]`, `[MASK]`, ... whole
        (as `BertTokenizer(preserve_special_tokens=True)`).
    """

    def __init__(self, vocab_file: str, lower_case: bool = True, preserve_special_tokens: bool = False):
        with open(vocab_file, encoding="utf-8") as f:
            tokens = [line.rstrip("\n").rstrip("\r") for line in f]
        self.vocab = {}
        for i, token in enumerate(tokens):
            self.vocab.setdefault(token, i)
        self.lower_case = lower_case
        special = [t for t in vocab_lib.SPECIAL_TOKENS if t in self.vocab]
        self.preserved = tuple(special) if preserve_special_tokens else ()
        self.unk_id = self.vocab["[UNK]"]
        self.cls_id, self.sep_id, self.pad_id = self.vocab["[CLS]"], self.vocab["[SEP]"], self.vocab.get("[PAD]", 0)
        self._wordpiece = functools.lru_cache(maxsize=1 << 18)(self._wordpiece_uncached)

    def _basic(self, text: str) -> list:
        kept = []
        for ch in text:
            kind = _char_class(ch)
            if kind == "d":
                continue
            kept.append(" " if kind == "s" else f" {ch} " if kind == "c" else ch)
        words = []
        for word in unicodedata.normalize("NFC", "".join(kept)).split():
            if word in self.preserved:
                words.append(word)
                continue
            if self.lower_case:
                word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
            words.extend(piece for chunk in _split_punctuation(word) for piece in chunk.split())
        return words

    def _wordpiece_uncached(self, word: str) -> tuple:
        if word in self.preserved:
            return (self.vocab[word],)
        if len(word) > MAX_CHARS_PER_WORD:
            return (self.unk_id,)
        ids, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    start = end
                    break
            else:
                return (self.unk_id,)
        return tuple(ids)

    def _split_preserved(self, text: str) -> list:
        """Pieces of `text` around every literal preserved token (leftmost, first listed wins)."""
        pieces, start, i = [], 0, 0
        while i < len(text):
            match = next((t for t in self.preserved if text.startswith(t, i)), None)
            if match:
                pieces.append(text[start:i])
                pieces.append(match)
                i += len(match)
                start = i
            else:
                i += 1
        pieces.append(text[start:])
        return [p for p in pieces if p]

    def tokenize(self, text: str) -> list:
        """WordPiece ids of one text, without special tokens."""
        words = []
        for piece in self._split_preserved(text) if self.preserved else [text]:
            if piece in self.preserved:
                words.append(piece)
            else:
                words.extend(self._basic(piece))
        return [i for word in words for i in self._wordpiece(word)]

    def encode(self, texts, seq_length: int, texts_b=None) -> dict:
        """Packs texts (or pairs) into int32 [batch, seq_length] `input_word_ids`, `input_mask`, `input_type_ids`."""
        segments = [list(texts)] if texts_b is None else [list(texts), list(texts_b)]
        if seq_length < len(segments) + 1:
            raise ValueError(f"seq_length={seq_length} leaves no room for [CLS] and {len(segments)} [SEP].")
        batch = len(segments[0])
        word_ids = np.full((batch, seq_length), self.pad_id, np.int32)
        type_ids = np.zeros((batch, seq_length), np.int32)
        mask = np.zeros((batch, seq_length), np.int32)
        for row in range(batch):
            tokens = [self.tokenize(segment[row]) for segment in segments]
            lengths = _round_robin(tokens, seq_length - len(segments) - 1)
            ids, types = [self.cls_id], [0]
            for index, (segment_ids, length) in enumerate(zip(tokens, lengths)):
                ids += segment_ids[:length] + [self.sep_id]
                types += [index] * (length + 1)
            word_ids[row, : len(ids)] = ids
            type_ids[row, : len(types)] = types
            mask[row, : len(ids)] = 1
        return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


def _round_robin(segments, room: int) -> list:
    """Tokens kept per segment: one per segment in turn until `room` is spent (tensorflow_text's RoundRobinTrimmer)."""
    kept = [0] * len(segments)
    while room > 0:
        grew = False
        for i, segment in enumerate(segments):
            if room > 0 and kept[i] < len(segment):
                kept[i] += 1
                room -= 1
                grew = True
        if not grew:
            break
    return kept
