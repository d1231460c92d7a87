"""The in-graph tokenizer's WordPiece ids from the TF Text ops LiteRT runs: `LiteRTTokenizer`.

LiteRT has no regex, ICU or Unicode-normalization op; TF Text gives it `FastBertNormalize` (a table mapping
each code point to a string) and `FastWordpieceTokenizeWithOffsets` (splits on whitespace and punctuation, then
WordPiece). TF Text's own table is not `bert_tf.tokenization.BertTokenizer`'s normalization (it applies NFKC
case folding and turns control characters into spaces), so `normalizer_model` writes BERT's, code point by code
point: deleted characters (category C but tab/newline/CR, NUL, U+FFFD) map to nothing; uncased: Python's
`str.lower`, NFD, no Mn marks; cased: NFC. The fast tokenizer's word splitting is BERT's on every character
that survives (checked by the tests), so the table changes nothing else.

Words of more than `MAX_CHARS_PER_WORD` characters become one [UNK]; the fast tokenizer limits bytes, so the
characters of each word are counted from the normalized text's bytes.

What a table of single code points cannot do (`CONTEXT_DIFFERENCES`): BERT's lower case of a capital sigma
depends on the letters around it, NFC composes a letter with a combining mark that follows it, and the
in-graph tokenizer drops the bytes of invalid UTF-8 before anything else.
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
    "uncased: a Greek capital sigma becomes 'σ' everywhere (the in-graph tokenizer, like Python's str.lower, "
    "writes a final 'ς' after a cased letter at the end of a word)",
    "cased: a letter and a combining mark after it are not composed into one character (NFC of the whole "
    "text); single characters are (U+212B -> 'Å', U+037E -> ';')",
    "bytes that are not valid UTF-8 are kept (and make their word [UNK]) instead of being dropped",
)

# TF Text's encoding of a table entry (fast_bert_normalizer.h): bit 30 "differs from the code point", the
# normalized string's offset in the pool above the low 6 bits, its length in bytes in them.
_DIFFERENT = 0x40000000
_LENGTH_BITS = 6
_NUM_CODE_POINTS = 0x110000


@functools.cache
def normalization_table(lower_case: bool) -> dict:
    """{code point: normalized string} for every code point the in-graph tokenizer changes (NUL included)."""
    removed = char_classes._masks()["removed"]
    table = {int(cp): "" for cp in np.flatnonzero(removed)}
    for cp in char_classes.kept_code_points():
        char = chr(cp)
        if lower_case:
            normalized = "".join(c for c in unicodedata.normalize("NFD", char.lower()) if not _is_mn(c))
        else:
            normalized = unicodedata.normalize("NFC", char)
        if normalized != char:
            table[cp] = normalized
    return table


def _is_mn(char):
    return unicodedata.category(char) == "Mn"


@functools.cache
def normalizer_model(lower_case: bool) -> bytes:
    """The `FastBertNormalizerModel` flatbuffer (TF Text's format) of `normalization_table`."""
    data = np.zeros(_NUM_CODE_POINTS, np.uint32)  # 0: the code point stays itself
    pool, offsets = bytearray(), {}
    for cp, normalized in normalization_table(lower_case).items():
        encoded = normalized.encode("utf-8")
        if len(encoded) >= 1 << _LENGTH_BITS:
            raise ValueError(f"The normalized form of U+{cp:04X} is too long for TF Text's table.")
        if encoded and encoded not in offsets:
            offsets[encoded] = len(pool)
            pool += encoded
        data[cp] = _DIFFERENT | (len(encoded) | offsets[encoded] << _LENGTH_BITS if encoded else 0)
    return _flatbuffer(lower_case, utf8_trie(data), int(data[0]), bytes(pool) or b"\0")


def _flatbuffer(lower_case, trie, data_for_zero, pool) -> bytes:
    import flatbuffers

    builder = flatbuffers.Builder(len(trie) * 4 + len(pool) + 1024)
    pool_vector = builder.CreateNumpyVector(np.frombuffer(pool, np.uint8))
    trie_vector = builder.CreateNumpyVector(np.asarray(trie, np.uint32))
    builder.StartObject(4)  # FastBertNormalizerModel's four fields, by slot
    builder.PrependUOffsetTRelativeSlot(3, pool_vector, 0)
    builder.PrependInt32Slot(2, data_for_zero, 0)
    builder.PrependUOffsetTRelativeSlot(1, trie_vector, 0)
    builder.PrependBoolSlot(0, lower_case, False)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


_ROOT_BASE = 256  # the root's children: units 256 + byte
_CHUNK = 64  # the children of a UTF-8 lead or continuation byte: the 64 continuation bytes 0x80-0xBF


def utf8_trie(data: np.ndarray) -> np.ndarray:
    """A darts-clone double array (uint32 units) mapping each code point's UTF-8 bytes to `data[cp]` (cp >= 1).

    Code points whose data is 0 are left out (the reader then returns 0). The layout follows UTF-8: a node's
    children sit at `node ^ offset ^ byte`; the children of every multi-byte prefix are continuation bytes,
    so each distinct set of them takes one aligned run of 64 units, and equal sets (the hundreds of thousands
    of unassigned code points, all deleted) share one run. A key's value sits in a unit of its own,
    `node ^ offset`, one per distinct value (darts-clone's leaf units, which the reader never takes for a child).
    """
    blocks, root = _utf8_blocks(np.asarray(data, np.uint32))
    # Units: 0 the root, 256-511 its children, then one 64-unit run per block, then the values.
    run_start = [2 * _ROOT_BASE + _CHUNK * i for i in range(len(blocks))]
    base = [start ^ 0x80 for start in run_start]  # base ^ (0x80 .. 0xBF) == start .. start + 63
    values = {v for kind, content in blocks if kind == "values" for v in content.tolist() if v}
    values = sorted(values | {v for kind, v in root.values() if kind == "value"})
    value_unit = {v: 2 * _ROOT_BASE + _CHUNK * len(blocks) + i for i, v in enumerate(values)}
    units = np.zeros(2 * _ROOT_BASE + _CHUNK * len(blocks) + len(values), np.uint32)

    def unit(position, label, target, leaf=False):
        offset = position ^ target
        if offset >= 1 << 21:
            raise ValueError("The normalization table grew too large for darts-clone's offsets.")
        units[position] = offset << 10 | (0x100 if leaf else 0) | label

    units[0] = _ROOT_BASE << 10  # the root: offset 256 from unit 0
    for byte, (kind, target) in root.items():
        if kind == "value":
            unit(_ROOT_BASE ^ byte, byte, value_unit[target], leaf=True)
        else:
            unit(_ROOT_BASE ^ byte, byte, base[target])
    for index, (kind, content) in enumerate(blocks):
        for label, child in zip(range(0x80, 0xC0), content.tolist()):
            if kind == "values" and child:
                unit(base[index] ^ label, label, value_unit[child], leaf=True)
            elif kind == "blocks" and child >= 0:
                unit(base[index] ^ label, label, base[child])
    for value, position in value_unit.items():
        units[position] = value | 1 << 31
    return units


def _utf8_blocks(data):
    """(blocks, root): the distinct children sets of the UTF-8 prefixes, and the root's children.

    A block is ("values", the 64 data of a final continuation byte) or ("blocks", 64 child block ids, -1:
    absent); the root maps a first byte to ("value", data) or ("block", block id).
    """
    rows = data.reshape(-1, _CHUNK)  # row r: the code points r * 64 .. r * 64 + 63, one final continuation byte
    blocks: list = []
    interned: dict = {}

    def intern(kind, content) -> int:
        key = (kind, content.tobytes())
        if key not in interned:
            interned[key] = len(blocks)
            blocks.append((kind, content))
        return interned[key]

    def row_block(row) -> int:
        return intern("values", rows[row]) if rows[row].any() else -1

    def parent_block(children) -> int:
        children = np.asarray(children, np.int64)
        return intern("blocks", children) if (children >= 0).any() else -1

    root = {}  # lead byte -> ("value", data) or ("block", block id)
    for cp in range(1, 0x80):
        if data[cp]:
            root[cp] = ("value", int(data[cp]))
    for lead in range(0xC2, 0xE0):  # 2 bytes: the lead's 5 bits pick a row
        root[lead] = ("block", row_block(lead & 0x1F))
    for lead in range(0xE0, 0xF0):  # 3 bytes: 4 + 6 bits pick a row
        low, high = (0xA0 if lead == 0xE0 else 0x80), (0xA0 if lead == 0xED else 0xC0)  # no overlong, surrogate
        children = [row_block((lead & 0xF) << 6 | (s & 0x3F)) if low <= s < high else -1 for s in range(0x80, 0xC0)]
        root[lead] = ("block", parent_block(children))
    for lead in range(0xF0, 0xF5):  # 4 bytes: 3 + 6 + 6 bits pick a row
        low, high = (0x90 if lead == 0xF0 else 0x80), (0x90 if lead == 0xF4 else 0xC0)
        children = []
        for s in range(0x80, 0xC0):
            if not low <= s < high:
                children.append(-1)
                continue
            prefix = (lead & 0x7) << 12 | (s & 0x3F) << 6
            children.append(parent_block([row_block(prefix | (t & 0x3F)) for t in range(0x80, 0xC0)]))
        root[lead] = ("block", parent_block(children))
    return blocks, {byte: entry for byte, entry in root.items() if entry[1] != -1}


class LiteRTTokenizer(tf.Module):
    """Text -> the in-graph tokenizer's WordPiece ids, in TF Text ops LiteRT runs (see the module docstring).

    Args:
      vocab: the vocabulary's tokens in id order.
      lower_case: the model's casing.

    Call: tf.string [batch] -> (flat int32 ids, int32 row splits [batch + 1]).
    """

    def __init__(self, vocab, lower_case: bool, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text

        vocab = list(vocab)
        self._normalizer = tf_text.FastBertNormalizer(model_buffer=normalizer_model(bool(lower_case)))
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab,
            suffix_indicator=vocab_lib.SUFFIX_INDICATOR,
            max_bytes_per_word=4 * MAX_CHARS_PER_WORD,  # the character limit is applied below
            token_out_type=tf.int32,
            unknown_token=vocab_lib.UNK_TOKEN,
            no_pretokenization=False,
            support_detokenization=False,
        )
        self._continuation = np.asarray(vocab_lib.continuation_mask(vocab), bool)
        self._unk = vocab.index(vocab_lib.UNK_TOKEN)

    def __call__(self, texts):
        import tensorflow_text as tf_text

        normalized = self._normalizer.normalize(texts)
        tokens, starts, ends = self._wordpiece.tokenize_with_offsets(normalized)
        ids = tf.cast(tokens.flat_values, tf.int32)
        splits = tf.cast(tokens.row_splits, tf.int32)
        # Characters before each byte of the normalized texts: their lead bytes (not 0x80-0xBF), counted.
        text_bytes = tf_text.ByteSplitter().split(normalized)
        byte = tf.cast(text_bytes.flat_values, tf.int32)
        lead = tf.logical_or(byte < 0x80, byte >= 0xC0)
        chars_before = tf.concat([[0], tf.cumsum(tf.cast(lead, tf.int32))], axis=0)
        token_row = tf.repeat(tf.range(tf.shape(splits)[0] - 1), splits[1:] - splits[:-1])
        row_start = tf.gather(tf.cast(text_bytes.row_splits, tf.int32), token_row)
        start_chars = tf.gather(chars_before, row_start + tf.cast(starts.flat_values, tf.int32))
        end_chars = tf.gather(chars_before, row_start + tf.cast(ends.flat_values, tf.int32))
        # A word: a first piece and the continuation pieces after it. Too long: one [UNK] for the whole word.
        word_start = tf.logical_not(tf.gather(tf.constant(self._continuation), ids))
        word = tf.cumsum(tf.cast(word_start, tf.int32)) - 1
        words = tf.reduce_sum(tf.cast(word_start, tf.int32))
        length = tf.math.unsorted_segment_max(end_chars, word, words) - tf.math.unsorted_segment_min(
            start_chars, word, words
        )
        too_long = tf.gather(length > MAX_CHARS_PER_WORD, word)
        keep = tf.logical_or(word_start, tf.logical_not(too_long))
        kept_per_row = tf.math.unsorted_segment_sum(tf.cast(keep, tf.int32), token_row, tf.shape(splits)[0] - 1)
        ids = tf.boolean_mask(tf.where(too_long, self._unk, ids), keep)
        return ids, tf.concat([[0], tf.cumsum(kept_per_row)], axis=0)
