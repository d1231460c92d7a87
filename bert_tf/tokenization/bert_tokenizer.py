"""BertTokenizer: text -> WordPiece ids in graph, id for id like original BERT."""

import os

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.tokenization import vocab as vocab_lib
from bert_tf.tokenization.basic_tokenizer import BasicTokenizer

# Words longer than this many characters (code points) become [UNK], as in
# HuggingFace's BertTokenizer (google-research/bert used 200).
MAX_CHARS_PER_WORD = 100


class _Vocabulary:
    """Plain holder of the Python-side vocabulary.

    Not trackable on purpose: a tuple or dict attribute of a tf.Module would be
    wrapped and walked element by element on every save.
    """

    def __init__(self, tokens):
        self.tokens = tuple(tokens)
        self.ids = {token: i for i, token in enumerate(self.tokens)}


class BertTokenizer(tf.Module):
    """WordPiece tokenizer with the behaviour of the original BERT tokenizer.

    A `tf.Module`: usable eagerly, inside `tf.function` and `tf.data` map
    functions, and as an attribute of a module saved with `tf.saved_model`
    (the vocabulary travels as a SavedModel asset).

    Args:
      vocab_file: path of a vocabulary file (one token per line).
      lower_case: True for uncased vocabularies (lower-case + strip accents).
      preserve_special_tokens: keep literal "[MASK]", "[CLS]", ... in the text
        as single tokens instead of splitting them like ordinary text.
      vocab: the file's tokens when the caller has read them already (a job's
        model source does), so the file is not read twice.

    Call: tf.string [batch] -> tf.RaggedTensor int32 [batch, (wordpieces)],
    without [CLS]/[SEP]. A scalar string gives a 1-D int32 tensor. Any input
    is accepted: invalid UTF-8 bytes are dropped, as the original's
    `decode("utf-8", "ignore")` does (never an error).

    Reference behaviour: HuggingFace's slow BertTokenizer (google-research's
    algorithm plus NFC in cased mode, deletion of all category-C characters
    and a 100-character word limit); see tests/fixtures/tokenization/README.md.

    Example:

    >>> import os, tempfile
    >>> vocab_file = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> with open(vocab_file, "w") as f:
    ...     _ = f.write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\nhello\\nworld\\n##s\\n!\\n")
    >>> tokenizer = BertTokenizer(vocab_file, lower_case=True)
    >>> tokenizer(["Hello worlds!", "hi"]).to_list()
    [[5, 6, 7, 8], [1]]
    >>> tokenizer.detokenize([[5, 6, 7]]).numpy().tolist()
    [b'hello worlds']
    """

    def __init__(self, vocab_file, lower_case=True, preserve_special_tokens=False, name=None, *, vocab=None):
        super().__init__(name=name)
        vocab_file = os.fspath(vocab_file)
        self._vocabulary = _Vocabulary(vocab_lib.load_vocab(vocab_file) if vocab is None else vocab)
        vocab_lib.special_token_ids(self._vocabulary.tokens, vocab_file)  # raises if one is missing
        self.lower_case = bool(lower_case)
        self.preserve_special_tokens = bool(preserve_special_tokens)
        # Travels with any SavedModel of a module holding this tokenizer
        # (the WordPiece model itself is a constant built from the list).
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.basic_tokenizer = BasicTokenizer(
            lower_case=lower_case, preserved_tokens=vocab_lib.SPECIAL_TOKENS if preserve_special_tokens else ()
        )
        try:
            # Linear-time WordPiece (LinMaxMatch); with no_pretokenization it
            # gives the same pieces as the original greedy longest-match-first.
            self._wordpiece = tf_text.FastWordpieceTokenizer(
                list(self._vocabulary.tokens),
                suffix_indicator=vocab_lib.SUFFIX_INDICATOR,
                # Word length is limited in characters in `tokenize_words`;
                # every word that reaches WordPiece fits in this many bytes.
                max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
                token_out_type=tf.int32,
                unknown_token=vocab_lib.UNK_TOKEN,
                no_pretokenization=True,
            )
        except Exception as e:  # the builder raises plain RuntimeErrors
            raise ValueError(f"Cannot build a WordPiece model from {vocab_file!r}: {e}") from e

    # -- tokenization ------------------------------------------------------

    def __call__(self, texts):
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank == 0:
            return self(texts[tf.newaxis])[0]
        return self.tokenize_words(texts).merge_dims(1, 2)

    def tokenize_words(self, texts):
        """tf.string [batch] -> int32 RaggedTensor [batch, (words), (wordpieces)].

        The words are those of the basic tokenizer (after punctuation
        splitting); useful for whole-word masking.
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        words = self.basic_tokenizer(texts)
        flat = words.flat_values
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
        # "[UNK]" is a vocabulary entry, so WordPiece maps it to its id.
        flat = tf.where(too_long, vocab_lib.UNK_TOKEN, flat)
        return words.with_flat_values(self._wordpiece.tokenize(flat))

    def detokenize(self, ids):
        """int ids [batch, (pieces)] (ragged or dense) -> tf.string [batch].

        Pieces are joined with spaces and "##" continuations glued to the
        previous piece; padding ([PAD]) ids are dropped. Lower-casing, accent
        stripping and punctuation spacing are not undone.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
            if ids.shape.rank == 1:
                return self.detokenize(ids[tf.newaxis])[0]
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int32)
        keep = tf.not_equal(ids, self._vocabulary.ids[vocab_lib.PAD_TOKEN])
        ids = tf.ragged.boolean_mask(ids, keep)
        tokens = tf.gather(tf.constant(self._vocabulary.tokens), ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " " + vocab_lib.SUFFIX_INDICATOR, "")

    # -- vocabulary helpers (Python side) -----------------------------------

    @property
    def vocab(self):
        """The vocabulary as a tuple of tokens (index = id)."""
        return self._vocabulary.tokens

    @property
    def vocab_size(self):
        return len(self._vocabulary.tokens)

    def continuation_mask(self):
        """Bool numpy array [vocab_size], True for "##" continuation pieces."""
        return np.asarray(vocab_lib.continuation_mask(self._vocabulary.tokens), dtype=bool)

    def id_to_token(self, ids):
        """An int or a sequence of ints -> token string(s)."""
        tokens = self._vocabulary.tokens
        if isinstance(ids, (int, np.integer)):
            return tokens[int(ids)]
        return [tokens[int(i)] for i in np.asarray(ids).reshape(-1)]

    def token_to_id(self, tokens):
        """A token or a sequence of tokens -> id(s); unknown tokens give [UNK]'s id."""
        ids = self._vocabulary.ids
        unk = ids[vocab_lib.UNK_TOKEN]
        if isinstance(tokens, str):
            return ids.get(tokens, unk)
        return [ids.get(t, unk) for t in tokens]

    def get_special_tokens_dict(self):
        """Special token ids under TF Hub's names, as Python ints."""
        ids = self._vocabulary.ids
        return {
            "vocab_size": len(self._vocabulary.tokens),
            "start_of_sequence_id": ids[vocab_lib.CLS_TOKEN],
            "end_of_segment_id": ids[vocab_lib.SEP_TOKEN],
            "padding_id": ids[vocab_lib.PAD_TOKEN],
            "mask_id": ids[vocab_lib.MASK_TOKEN],
            "unknown_id": ids[vocab_lib.UNK_TOKEN],
        }
