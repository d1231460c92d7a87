"""`TaskTokenizer`: the in-graph WordPiece tokenizer as the fine-tuning tasks use it.

Sentence (pair) classification tokenizes and packs inside tf.data
(`pack_fn`). SQuAD and tagging need to know which pieces came from which
word, so they tokenize word lists eagerly (`word_pieces`): each word is one
string of the batch, and the tokenizer's ragged output is then the pieces of
that word.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from bert_tf.tasks.word_alignment import piece_char_spans
from bert_tf.tokenization import BertTokenizer, bert_pack_inputs

# Strings per eager tokenizer call: large enough to amortise the call, small enough for memory.
_CHUNK = 8192


class TaskTokenizer:
    """WordPiece tokenization and packing for fine-tuning data.

    Args:
      vocab_file: the model's `vocab.txt`.
      lower_case: lower-case and strip accents (uncased models).
    """

    def __init__(self, vocab_file: str, lower_case: bool = True, *, vocab=None):
        self.vocab_file = vocab_file
        self.lower_case = lower_case
        self.tokenizer = BertTokenizer(vocab_file, lower_case=lower_case, vocab=vocab)
        self.vocab = self.tokenizer.vocab
        special = self.tokenizer.get_special_tokens_dict()
        self.cls_id = special["start_of_sequence_id"]
        self.sep_id = special["end_of_segment_id"]
        self.pad_id = special["padding_id"]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Piece ids of each text (no [CLS]/[SEP]), computed in batches."""
        results = []
        for start in range(0, len(texts), _CHUNK):
            chunk = tf.constant(list(texts[start : start + _CHUNK]), dtype=tf.string)
            results.extend(_ragged_to_lists(self.tokenizer(chunk)))
        return results

    def word_pieces(self, words: Sequence[str]) -> list[tuple[list[str], list[list[int]]]]:
        """For each whitespace-free word: (its basic words, the piece ids of each basic word).

        Basic words are the tokenizer's words after normalisation and
        punctuation splitting ("Bob's" -> ["bob", "'", "s"]).
        """
        results = []
        for start in range(0, len(words), _CHUNK):
            chunk = tf.constant(list(words[start : start + _CHUNK]), dtype=tf.string)
            basic = _ragged_to_lists(self.tokenizer.basic_tokenizer(chunk))
            pieces = _ragged_to_lists(self.tokenizer.tokenize_words(chunk))
            for basic_words, word_pieces in zip(basic, pieces):
                results.append(([w.decode("utf-8") for w in basic_words], word_pieces))
        return results

    def flat_pieces(self, word_pieces) -> list[int]:
        """The piece ids of one `word_pieces` entry, flattened."""
        return [piece for pieces in word_pieces[1] for piece in pieces]

    def piece_spans(self, word: str, word_pieces) -> list[tuple[int, int]]:
        """[start, end) characters of `word` each of its pieces covers (`word_pieces` from `word_pieces`)."""
        basic_words, pieces = word_pieces
        return piece_char_spans(word, basic_words, [[self.vocab[i] for i in p] for p in pieces], self.lower_case)

    def tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab[i] for i in ids]

    def pack_fn(self, seq_length: int, head_tail: bool = False):
        """A tf.data map function: {"text_a", optional "text_b": string [batch]} -> encoder inputs.

        With a bool "has_text_b" [batch] as well, rows where it is False are
        packed as single texts (a file mixing texts and pairs). The other keys
        of the element pass through unchanged. `head_tail` (single texts): a text longer than
        `seq_length` - 2 pieces keeps its first and last pieces (`bert_tf.tasks.long_text_ops.head_and_tail`)
        instead of its first.
        """
        from bert_tf.tasks.long_text_ops import head_and_tail

        tokenizer = self.tokenizer
        cls_id, sep_id, pad_id = self.cls_id, self.sep_id, self.pad_id

        def pack_segments(segments):
            packed = bert_pack_inputs(
                segments,
                seq_length=seq_length,
                start_of_sequence_id=cls_id,
                end_of_segment_id=sep_id,
                padding_id=pad_id,
            )
            return {k: tf.cast(v, tf.int32) for k, v in packed.items()}

        # Only TF ops, no Python control flow on tensors: skipping AutoGraph's source
        # conversion of the tokenizer saves seconds per pipeline.
        @tf.autograph.experimental.do_not_convert
        def pack(element):
            element = dict(element)
            segments = [tokenizer(element.pop("text_a"))]
            if head_tail:
                segments[0] = head_and_tail(segments[0], budget=seq_length - 2)
            if "text_b" in element:
                segments.append(tokenizer(element.pop("text_b")))
            packed = pack_segments(segments)
            if "has_text_b" in element:
                single = pack_segments(segments[:1])
                has_text_b = element.pop("has_text_b")[:, tf.newaxis]
                packed = {k: tf.where(has_text_b, v, single[k]) for k, v in packed.items()}
            element.update(packed)
            return element

        return pack


def _ragged_to_lists(ragged: tf.RaggedTensor) -> list:
    """Nested Python lists of a ragged tensor, through numpy (`to_list()` slices row by row, eagerly)."""
    values = ragged.flat_values.numpy().tolist()
    for splits in reversed(ragged.nested_row_splits):
        splits = splits.numpy().tolist()
        values = [values[start:end] for start, end in zip(splits[:-1], splits[1:])]
    return values
