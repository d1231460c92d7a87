"""The in-graph tokenizer's WordPiece ids from TF Text's TFLite ops: `LiteRTTokenizer`.

LiteRT runs no regex, ICU or Unicode-normalization op, only TF Text's `FastBertNormalize` (a table that maps
each code point to a string) and `FastWordpieceTokenizeWithOffsets` (splits on whitespace and punctuation, then
WordPiece). TF Text's own normalizer table is not BERT's (NFKC case folding, control characters become
spaces), so this module writes the table of `bert_tf.tokenization.BertTokenizer`, code point by code point:

* deleted characters (category C but tab/newline/CR, NUL, U+FFFD) map to nothing;
* uncased: Python's `str.lower`, NFD, no Mn marks; cased: NFC;
* where the fast tokenizer's word splitting differs from BERT's classes: a space for BERT's whitespace,
  spaces around BERT's punctuation and CJK characters, and a stand-in that no vocabulary holds (a private-use
  character, which the table itself deletes from the input) for a word character the fast tokenizer splits on,
  so that the word becomes [UNK] as in BERT.

Words of more than `MAX_CHARS_PER_WORD` characters become one [UNK] (the fast tokenizer counts bytes, so the
character count is taken from the normalized text's bytes, in built-in ops).

What a table of single code points cannot do (`CONTEXT_DIFFERENCES`): BERT's lower case of a capital sigma
depends on the letters around it, and NFC composes a letter with a following combining mark.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from bert_tf.tokenization import char_classes
from bert_tf.tokenization import vocab as vocab_lib
from bert_tf.tokenization.bert_tokenizer import MAX_CHARS_PER_WORD

CONTEXT_DIFFERENCES = (
    "uncased: a Greek capital sigma becomes 'σ' everywhere (the in-graph tokenizer, like Python, writes a final "
    "'ς' after a cased letter at the end of a word)",
    "cased: a letter and a combining mark that follows it are not composed (NFC of the whole text); single "
    "characters are (U+037E -> ';', U+212B -> 'Å')",
)
# A private-use character: the table deletes every private-use character of the input, so in the normalized
# text it only stands for a word character that must make its word [UNK].
STAND_IN = "\U000f0000"
_NUM_CODE_POINTS = 0x110000
_SURROGATES = range(0xD800, 0xE000)


@functools.cache
def normalization_table(lower_case: bool) -> dict:
    """{code point: normalized string} for every code point the in-graph tokenizer changes or splits around."""
    masks = char_classes._masks()
    removed, whitespace = masks["removed"], masks["whitespace"]
    separate = masks["punctuation"].copy()
    for lo, hi in char_classes.CJK_RANGES:
        separate[lo : hi + 1] = True
    fast = _fast_classes()
    table = {}
    for cp in range(1, _NUM_CODE_POINTS):
        if cp in _SURROGATES:
            continue
        if removed[cp]:
            table[cp] = ""
            continue
        char = chr(cp)
        if lower_case:
            normalized = "".join(c for c in unicodedata.normalize("NFD", char.lower()) if not _is_mn(c))
        else:
            normalized = unicodedata.normalize("NFC", char)
        normalized = "".join(_split_as_bert(ord(c), whitespace, separate, fast) for c in normalized)
        if normalized != char:
            table[cp] = normalized
    return table


def _is_mn(char):
    return unicodedata.category(char) == "Mn"


def _split_as_bert(cp, whitespace, separate, fast):
    """One normalized character, with what makes the fast tokenizer split where BERT does."""
    char = chr(cp)
    if whitespace[cp]:
        return char if fast[cp] == _SPACE else " "
    if separate[cp]:
        return char if fast[cp] == _SEPARATE else f" {char} "
    return char if fast[cp] == _WORD else STAND_IN


_WORD, _SEPARATE, _SPACE = 1, 3, 2  # how many tokens "a", c, "a" make in the fast tokenizer


@functools.cache
def _fast_classes() -> np.ndarray:
    """For each code point, how the fast tokenizer's pretokenization treats it: `_WORD`, `_SEPARATE`, `_SPACE`.

    Read off the tokenizer itself ("a" + c + "a" gives one word, three or two), so its Unicode version is the
    one the LiteRT ops were built with.
    """
    import tensorflow_text as tf_text

    tokenizer = tf_text.FastWordpieceTokenizer(
        ["[UNK]", "a", "##a"], token_out_type=tf.int32, no_pretokenization=False, unknown_token="[UNK]"
    )
    code_points = np.asarray(char_classes.kept_code_points())  # the only ones a normalized text holds
    texts = ["a" + chr(cp) + "a" for cp in code_points]
    with tf.init_scope(), tf.device("/cpu:0"):
        counts = tokenizer.tokenize(tf.constant(texts)).row_lengths().numpy()
    classes = np.full(_NUM_CODE_POINTS, _WORD, np.int8)
    classes[code_points] = np.where(counts == 1, _WORD, np.where(counts == 2, _SPACE, _SEPARATE))
    return classes


@functools.cache
def normalizer_model(lower_case: bool) -> bytes:
    """The `FastBertNormalizerModel` flatbuffer of `normalization_table` (TF Text's format)."""
    table = normalization_table(lower_case)
    pool, offsets = bytearray(), {}
    keys, values = [], []
    for cp in sorted(table):
        encoded = table[cp].encode("utf-8")
        data = _DIFFERENT
        if encoded:
            if encoded not in offsets:
                offsets[encoded] = len(pool)
                pool += encoded
            if len(encoded) >= 1 << _LENGTH_BITS:
                raise ValueError(f"The normalized form of U+{cp:04X} is too long for TF Text's table.")
            data |= len(encoded) | offsets[encoded] << _LENGTH_BITS
        keys.append(chr(cp).encode("utf-8"))
        values.append(data)
    return _flatbuffer(lower_case, darts_trie(keys, values), _DIFFERENT, bytes(pool))  # NUL: deleted


_DIFFERENT = 0x40000000  # TF Text's kIsNormalizedStringDifferentMask
_LENGTH_BITS = 6


def _flatbuffer(lower_case, trie, data_for_zero, pool) -> bytes:
    import flatbuffers

    builder = flatbuffers.Builder(len(trie) * 4 + len(pool) + 1024)
    pool_vector = builder.CreateNumpyVector(np.frombuffer(pool, np.uint8))
    trie_vector = builder.CreateNumpyVector(np.asarray(trie, np.uint32))
    builder.StartObject(4)
    builder.PrependUOffsetTRelativeSlot(3, pool_vector, 0)
    builder.PrependInt32Slot(2, data_for_zero, 0)
    builder.PrependUOffsetTRelativeSlot(1, trie_vector, 0)
    builder.PrependBoolSlot(0, lower_case, False)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def darts_trie(keys: list[bytes], values: list[int]) -> np.ndarray:
    """A darts-clone double array (uint32 units) mapping each key to its value (0 <= value < 2**31).

    The keys must be non-empty and none a prefix of another (UTF-8 code points are not). A node's children sit
    at `node ^ offset ^ byte` and a key's value at `node ^ offset` (darts-clone's layout, which TF Text's trie
    reader walks). As in darts-clone, equal subtrees share one block of units: the hundreds of thousands of
    unassigned code points, all mapped to nothing, take a few blocks.
    """
    root: dict = {}
    for key, value in zip(keys, values):
        node = root
        for byte in key[:-1]:
            node = node.setdefault(byte, {})
        node[key[-1]] = int(value)
    signatures: dict = {}  # subtree -> its index in `blocks`
    blocks: list = []  # per subtree: ((label, child subtree index), ...), or the value of a key's end

    def intern(node) -> int:
        block = node if isinstance(node, int) else tuple((b, intern(c)) for b, c in sorted(node.items()))
        if block not in signatures:
            signatures[block] = len(blocks)
            blocks.append(block)
        return signatures[block]

    root_block = intern(root)
    used = np.zeros(1 << 16, bool)
    used[0] = True  # the root
    bases = [0] * len(blocks)
    taken = set()
    first_free, top = 1, 1  # the first free unit; the unit after the last used one
    for index, block in enumerate(blocks):
        labels = np.array([0] if isinstance(block, int) else [b for b, _ in block])
        # A block of many labels (UTF-8 continuation bytes) opens a fresh run of 256 units, whose free units
        # the small blocks fill later; a small one takes the first free units that fit.
        base = -(-top // 256) * 256 if len(labels) > 4 else first_free ^ int(labels[0])
        while True:
            slots = base ^ labels
            while slots.max() >= len(used):
                used = np.concatenate([used, np.zeros(len(used), bool)])
            if base not in taken and not used[slots].any():  # one block a base: no child read as another's
                break
            base += 1
        used[slots] = True
        bases[index] = base
        taken.add(base)
        top = max(top, int(slots.max()) + 1)
        while used[first_free]:
            first_free += 1
    units = np.zeros(int(np.flatnonzero(used).max()) + 1, np.uint32)

    def link(position, child):  # the unit at `position` leads to block `child`
        relative = position ^ bases[child]
        if relative >= 1 << 21:
            raise ValueError("The trie grew too large for darts-clone's offsets.")
        leaf = 0x100 if isinstance(blocks[child], int) else 0
        units[position] |= np.uint32(relative << 10 | leaf)

    link(0, root_block)
    for index, block in enumerate(blocks):
        if isinstance(block, int):
            units[bases[index]] = np.uint32(block | 1 << 31)
            continue
        for label, child in block:
            units[bases[index] ^ label] = np.uint32(label)
            link(bases[index] ^ label, child)
    return units


class LiteRTTokenizer(tf.Module):
    """Text -> the in-graph tokenizer's WordPiece ids, in ops LiteRT runs (see the module docstring).

    Args:
      vocab: the vocabulary's tokens in id order.
      lower_case: the model's casing.

    Call: tf.string [batch] -> (flat int32 ids, int32 row lengths [batch]).
    """

    def __init__(self, vocab, lower_case: bool, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text

        self._normalizer = tf_text.FastBertNormalizer(model_buffer=normalizer_model(bool(lower_case)))
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            list(vocab),
            suffix_indicator=vocab_lib.SUFFIX_INDICATOR,
            max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
            token_out_type=tf.int32,
            unknown_token=vocab_lib.UNK_TOKEN,
            no_pretokenization=False,
        )
        self._continuation = np.asarray(vocab_lib.continuation_mask(list(vocab)), bool)
        self._unk = list(vocab).index(vocab_lib.UNK_TOKEN)

    def __call__(self, texts):
        import tensorflow_text as tf_text

        normalized = self._normalizer.normalize(texts)
        tokens, starts, ends = self._wordpiece.tokenize_with_offsets(normalized)
        ids = tf.cast(tokens.flat_values, tf.int32)
        row_lengths = tf.cast(tokens.row_lengths(), tf.int32)
        # Characters before each byte of the normalized texts: the lead bytes (not 10xxxxxx) counted.
        text_bytes = tf_text.ByteSplitter().split(normalized)
        lead = tf.cast(tf.not_equal(tf.bitwise.bitwise_and(tf.cast(text_bytes.flat_values, tf.int32), 0xC0), 0x80),
                       tf.int32)
        chars_before = tf.concat([[0], tf.cumsum(lead)], axis=0)
        byte_row_starts = tf.cast(text_bytes.row_starts(), tf.int32)
        token_rows = tf.repeat(tf.range(tf.shape(row_lengths)[0]), row_lengths)
        row_start = tf.gather(byte_row_starts, token_rows)
        start_chars = tf.gather(chars_before, row_start + tf.cast(starts.flat_values, tf.int32))
        end_chars = tf.gather(chars_before, row_start + tf.cast(ends.flat_values, tf.int32))
        # A word is a first piece and the continuation pieces after it.
        word_start = tf.logical_not(tf.gather(tf.constant(self._continuation), ids))
        word = tf.cumsum(tf.cast(word_start, tf.int32)) - 1
        words = tf.reduce_sum(tf.cast(word_start, tf.int32))
        length = tf.math.unsorted_segment_max(end_chars, word, words) - tf.math.unsorted_segment_min(
            start_chars, word, words
        )
        too_long = tf.gather(length > MAX_CHARS_PER_WORD, word)
        ids = tf.where(too_long, self._unk, ids)
        keep = tf.logical_or(word_start, tf.logical_not(too_long))
        kept_rows = tf.math.unsorted_segment_sum(tf.cast(keep, tf.int32), token_rows, tf.shape(row_lengths)[0])
        return tf.boolean_mask(ids, keep), kept_rows
