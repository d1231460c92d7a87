"""In-graph equivalent of BERT's BasicTokenizer: text -> words before WordPiece.

Per string, in the order of the reference implementation (HuggingFace's slow
BertTokenizer, itself google-research/bert's tokenization.py):

1. invalid UTF-8 bytes are dropped (like `bytes.decode("utf-8", "ignore")`);
2. NUL, U+FFFD and category C characters other than tab/newline/CR are
   deleted;
3. NFC normalization (HuggingFace added it; for uncased text step 5's NFD
   makes it a no-op, so it is skipped there);
4. the text is split on whitespace, and CJK ideographs become single words;
5. uncased only: Python `str.lower`, then NFD, then deletion of Mn marks;
6. every punctuation character becomes a word of its own.

Steps 4-6 act on each whitespace-separated word in the reference; lower case,
NFD and mark deletion do not look across whitespace or CJK characters (final
sigma needs a cased letter before it, and neither counts as one), so they run
on the whole string here, and steps 4 and 6 are one regex pass (spaces around
CJK and punctuation characters) followed by `tf.strings.split`.

With `preserved_tokens`, a preserved token found anywhere in the raw text, or
forming a whole whitespace-separated word after cleaning, is kept as one word
unchanged (HuggingFace's handling of special tokens).
"""

import re

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.tokenization import char_classes, lowercase


def _transcode(texts):
    # Invalid bytes become U+FFFD, which the cleaning step deletes.
    return tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD, replace_control_characters=False
    )


class BasicTokenizer(tf.Module):
    """Splits text into normalized words, in graph.

    Args:
      lower_case: lower-case and strip accents (uncased models).
      preserved_tokens: tokens kept whole and unchanged (e.g. "[MASK]").

    Call with a tf.string tensor [batch] (or a scalar); returns a
    tf.RaggedTensor of tf.string [batch, (words)] (or [(words)]).
    """

    def __init__(self, lower_case=True, preserved_tokens=(), name=None):
        super().__init__(name=name)
        self.lower_case = bool(lower_case)
        self.preserved_tokens = tuple(preserved_tokens)
        cjk = char_classes.char_class("cjk")
        punctuation = char_classes.char_class("punctuation")
        # tf.strings.split breaks on ASCII whitespace; every other separator
        # is first rewritten to a space, and characters that are words of
        # their own get spaces around them, all in one regex pass.
        spaces = char_classes.char_class("whitespace_non_ascii")
        self._removed_pattern = char_classes.char_class("removed") + "+"
        self._mark_pattern = char_classes.char_class("nonspacing_mark") + "+"
        self._word_split = f"({cjk}|{punctuation})|{spaces}"
        self._whitespace_split = f"({cjk})|{spaces}"
        self._punctuation_split = f"({punctuation})|{spaces}"
        if self.preserved_tokens:
            self._preserved_pattern = "|".join(re.escape(t) for t in self.preserved_tokens)
        # Build the character tables now rather than while tracing.
        if self.lower_case:
            lowercase.lowercase_fixups()
            lowercase.final_sigma_pattern()

    def __call__(self, texts):
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        rank = texts.shape.rank
        if rank == 0:
            return self(texts[tf.newaxis])[0]
        if rank != 1:
            raise ValueError(f"Expected a scalar or a [batch] string tensor, got shape {texts.shape}")
        texts = _transcode(texts)
        if not self.preserved_tokens:
            texts = tf.strings.regex_replace(texts, self._removed_pattern, "")
            return _split(self._normalize(texts), self._word_split)
        return self._words_preserving(texts)

    def _normalize(self, texts):
        if not self.lower_case:
            return tf_text.normalize_utf8(texts, "NFC")
        texts = lowercase.lower(texts)
        texts = tf_text.normalize_utf8(texts, "NFD")
        return tf.strings.regex_replace(texts, self._mark_pattern, "")

    def _is_preserved(self, words):
        preserved = tf.constant(self.preserved_tokens)
        return tf.reduce_any(tf.equal(words[:, tf.newaxis], preserved[tf.newaxis, :]), axis=1)

    def _words_preserving(self, texts):
        # NUL would end the string for regex_split; U+FFFD is deleted later
        # all the same, and unlike deleting NUL now it cannot join the two
        # halves of a preserved token.
        texts = tf.strings.regex_replace(texts, "\\x00", "\ufffd")
        pieces = tf_text.regex_split(texts, self._preserved_pattern, keep_delim_regex_pattern=self._preserved_pattern)
        flat = tf.strings.regex_replace(pieces.flat_values, self._removed_pattern, "")
        if not self.lower_case:
            # NFC before the whitespace split, as in the reference.
            flat = tf_text.normalize_utf8(flat, "NFC")
        words = _split(flat, self._whitespace_split)
        flat_words = words.flat_values
        preserved = self._is_preserved(flat_words)
        normalized = self._normalize(flat_words) if self.lower_case else flat_words
        normalized = tf.where(preserved, "", normalized)
        split = _split(normalized, self._punctuation_split)
        kept = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(flat_words, preserved), tf.cast(preserved, tf.int64))
        split = tf.concat([split, kept], axis=1)
        per_piece = words.with_flat_values(split).merge_dims(1, 2)
        return pieces.with_flat_values(per_piece).merge_dims(1, 2)


def _split(texts, pattern):
    """Pads the separate-word characters matched by group 1 with spaces and splits."""
    return tf.strings.split(tf.strings.regex_replace(texts, pattern, " \\1 "))
