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

Uncased, a capital sigma's lower case depends on its neighbours (Unicode's Final_Sigma, as Python's `str.lower`:
'ς' after a cased letter and not before one, case-ignorable characters skipped), so `FinalSigma` spells each
one 'σ' or 'ς' before the table runs: a second table gives every character's class as one byte, built-in ops
find the final sigmas in those bytes, and TF Text's WordPiece detokenizer, with one token per byte, joins the
rewritten bytes of the text back into a string.

What the tables cannot do (`CONTEXT_DIFFERENCES`): NFC composes a letter with a combining mark that follows it,
and the in-graph tokenizer drops the bytes of invalid UTF-8 before anything else.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from bert_tf.tokenization import char_classes, lowercase
from bert_tf.tokenization import vocab as vocab_lib
from bert_tf.tokenization.bert_tokenizer import MAX_CHARS_PER_WORD

CONTEXT_DIFFERENCES = (
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
    return _table_model(normalization_table(lower_case), lower_case)


# The sigma step's class bytes: what a character is to a capital sigma's context (`sigma_class_table`).
_CASED, _IGNORABLE, _SIGMA = 1, 2, 3
_CAPITAL_SIGMA = 0x3A3  # UTF-8 CE A3; 'σ' is CF 83, final 'ς' CF 82


@functools.cache
def sigma_class_table() -> dict:
    """{code point: class byte} for the sigma step's pass over the raw text (`lowercase.sigma_context_classes`).

    Cased letters give b"\x01", the capital sigma b"\x03" (cased too); case-ignorable and deleted characters
    (NUL included) give b"\x02", skipped alike, as the in-graph tokenizer deletes the latter before lower-casing.
    Any other character stays itself: a byte >= 0x20 or a multi-byte character, which ends a sigma's context.
    """
    table = dict.fromkeys(np.flatnonzero(char_classes._masks()["removed"]).tolist(), chr(_IGNORABLE))
    leading, ignorable = lowercase.sigma_context_classes()
    table.update(dict.fromkeys(ignorable, chr(_IGNORABLE)))
    table.update(dict.fromkeys(leading, chr(_CASED)))
    table[_CAPITAL_SIGMA] = chr(_SIGMA)
    return table


@functools.cache
def sigma_class_model() -> bytes:
    """The `FastBertNormalizerModel` flatbuffer of `sigma_class_table`."""
    return _table_model(sigma_class_table(), True)


def _table_model(table: dict, lower_case: bool) -> bytes:
    """The `FastBertNormalizerModel` flatbuffer mapping each code point of `table` to its string."""
    data = np.zeros(_NUM_CODE_POINTS, np.uint32)  # 0: the code point stays itself
    pool, offsets = bytearray(), {}
    for cp, normalized in table.items():
        encoded = normalized.encode("utf-8")
        if len(encoded) >= 1 << _LENGTH_BITS:
            raise ValueError(f"The normalized form of U+{cp:04X} is too long for TF Text's table.")
        if encoded and encoded not in offsets:
            offsets[encoded] = len(pool)
            pool += encoded
        data[cp] = _DIFFERENT | (len(encoded) | offsets[encoded] << _LENGTH_BITS if encoded else 0)
    return _flatbuffer(bool(lower_case), utf8_trie(data), int(data[0]), bytes(pool) or b"\0")


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


def _row_ids(row_splits):
    """int32 [values]: the row of each value of a ragged tensor with `row_splits` (int32).

    The rows' inner starts counted and summed up: a few LiteRT ops (`tf.repeat` lowers to many more)."""
    size, starts = row_splits[-1], row_splits[1:-1]
    counts = tf.math.unsorted_segment_sum(tf.ones_like(starts), starts, size + 1)
    return tf.cumsum(counts[:size])


class FinalSigma(tf.Module):
    """Raw text -> the same text with each capital sigma spelled 'σ' or final 'ς', as the in-graph tokenizer's
    lower case spells it (see the module docstring), in built-in ops and three TF Text ops LiteRT runs.

    Call: tf.string [batch] -> tf.string [batch]: the texts themselves if none has a capital sigma, else each one
    space longer (a space first; it changes no word) with a NUL byte as U+0001 (the normalization that follows
    deletes both).
    """

    def __init__(self, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text

        self._classes = tf_text.FastBertNormalizer(model_buffer=sigma_class_model())
        # One token a byte: a space to start each string, then "##" + byte b (id b + 1) glued to it.
        self._joiner = tf_text.FastWordpieceTokenizer(
            ["[UNK]", " "] + [b"##" + bytes([b]) for b in range(1, 256)],
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            no_pretokenization=True,  # (a smaller model; only its vocabulary is used)
            support_detokenization=True,
        )

    def __call__(self, texts):
        import tensorflow_text as tf_text

        values = tf.cast(tf_text.ByteSplitter().split(texts).flat_values, tf.int32)
        # Texts without a capital sigma (nearly all) skip the step: a LiteRT IF. Its branches take only `texts`,
        # whose shape a one-text call keeps (LiteRT prepares both branches again when an input's shape changes).
        return tf.cond(tf.reduce_any(_sigma_starts(values)), lambda: self._spelled(texts), lambda: texts)

    def _spelled(self, texts):
        import tensorflow_text as tf_text

        raw = tf_text.ByteSplitter().split(texts)
        values, splits = tf.cast(raw.flat_values, tf.int32), tf.cast(raw.row_splits, tf.int32)
        final = _sigma_is_final(tf_text.ByteSplitter().split(self._classes.normalize(texts)))
        spelled = _spell_sigmas(values, splits, final)
        # Token ids: the space (1) first in each row, then byte b as b + 1 (NUL as U+0001: no empty token).
        rows = tf.shape(splits)[0] - 1
        joined_splits = splits + tf.range(rows + 1)
        row = _row_ids(joined_splits)
        position = tf.range(tf.shape(row)[0])
        source = tf.maximum(position - row - 1, 0)
        ids = tf.gather(tf.concat([tf.maximum(spelled, 1) + 1, [1]], axis=0), source)
        ids = tf.where(position == tf.gather(joined_splits[:-1], row), 1, ids)
        return self._joiner.detokenize(tf.RaggedTensor.from_row_splits(ids, tf.cast(joined_splits, tf.int64)))


def _sigma_is_final(classes):
    """bool [sigmas + 1]: whether each capital sigma in the class bytes `classes` (ragged uint8, one row a text)
    is final, in order, and a last False (read for any index past the last sigma)."""
    values = tf.cast(classes.flat_values, tf.int32)
    # A multi-byte character's continuation bytes are skipped like case-ignorable characters.
    ignorable = (values == _IGNORABLE) | ((values >= 0x80) & (values < 0xC0))
    deciding = tf.boolean_mask(tf.range(tf.shape(values)[0]), tf.logical_not(ignorable))
    kind = tf.gather(values, deciding)
    row = tf.gather(_row_ids(tf.cast(classes.row_splits, tf.int32)), deciding)
    cased = (kind == _CASED) | (kind == _SIGMA)
    count = tf.shape(kind)[0]
    sigma = tf.boolean_mask(tf.range(count), kind == _SIGMA)

    def cased_neighbour(step):  # the nearest deciding character before (-1) or after (+1) is cased, same text
        index = tf.clip_by_value(sigma + step, 0, count - 1)
        inside = (sigma + step >= 0) & (sigma + step < count)
        return inside & tf.equal(tf.gather(row, index), tf.gather(row, sigma)) & tf.gather(cased, index)

    return tf.concat([cased_neighbour(-1) & tf.logical_not(cased_neighbour(1)), [False]], axis=0)


def _sigma_starts(values):
    """bool [bytes]: where a capital sigma (CE A3) may start in the raw bytes `values` (int32, rows end to end:
    a row's last byte is no sigma's start, checked by the caller). CE never continues a character, so each is a
    sigma the class pass sees too."""
    return (values == 0xCE) & (tf.concat([values[1:], [0]], axis=0) == 0xA3)


def _spell_sigmas(values, splits, final):
    """The raw bytes `values` (int32, rows `splits`) with the n-th capital sigma made CF 82 'ς' if `final[n]`,
    else CF 83 'σ'."""
    first = _sigma_starts(values) & (tf.range(tf.shape(values)[0]) + 1 < tf.gather(splits[1:], _row_ids(splits)))
    second = tf.concat([[False], first[:-1]], axis=0)
    index = tf.clip_by_value(tf.cumsum(tf.cast(first, tf.int32)) - 1, 0, tf.shape(final)[0] - 1)
    last = tf.where(tf.gather(final, index), 0x82, 0x83)
    return tf.where(first, 0xCF, tf.where(second, last, values))


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
        self._final_sigma = FinalSigma() if lower_case else None
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

        if self._final_sigma is not None:
            texts = self._final_sigma(texts)
        normalized = self._normalizer.normalize(texts)
        tokens, starts, ends = self._wordpiece.tokenize_with_offsets(normalized)
        ids = tf.cast(tokens.flat_values, tf.int32)
        splits = tf.cast(tokens.row_splits, tf.int32)
        # Characters before each byte of the normalized texts: their lead bytes (not 0x80-0xBF), counted.
        text_bytes = tf_text.ByteSplitter().split(normalized)
        byte = tf.cast(text_bytes.flat_values, tf.int32)
        lead = tf.logical_or(byte < 0x80, byte >= 0xC0)
        chars_before = tf.concat([[0], tf.cumsum(tf.cast(lead, tf.int32))], axis=0)
        token_row = _row_ids(splits)
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
