"""BertTokenizer: id-for-id parity with the original tokenizer, Unicode sweeps, properties.

References (see tests/fixtures/tokenization/README.md): ids of HuggingFace's
slow BertTokenizer on 1,050 real sentences and 58 edge cases for an uncased
and a cased vocabulary, and `python_reference.py`, a plain-Python statement
of the same rules checked against HuggingFace on every code point.
"""

import importlib.util
import json
import os
import unicodedata

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bert_tf.tokenization import BasicTokenizer, BertTokenizer, char_classes, load_vocab, lowercase
from bert_tf.tokenization import vocab as vocab_lib

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tokenization")
VOCABS = {"uncased": True, "cased": False}


def _load_python_reference():
    spec = importlib.util.spec_from_file_location("python_reference", os.path.join(FIXTURES, "python_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


python_reference = _load_python_reference()


@pytest.fixture(scope="module")
def texts():
    with open(os.path.join(FIXTURES, "texts.json"), encoding="utf-8") as f:
        return json.load(f)["texts"]


def _reference(name):
    with open(os.path.join(FIXTURES, f"reference_{name}.json"), encoding="utf-8") as f:
        return json.load(f)


_TOKENIZERS = {}


def tokenizer(name, preserve=False):
    key = (name, preserve)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = BertTokenizer(
            os.path.join(FIXTURES, f"vocab_{name}.txt"), lower_case=VOCABS[name], preserve_special_tokens=preserve
        )
    return _TOKENIZERS[key]


def _mismatches(tok, strings, expected):
    got = tok(tf.constant(strings)).to_list()
    return [(s, tok.id_to_token(g), tok.id_to_token(e)) for s, g, e in zip(strings, got, expected) if g != e]


def test_fixtures_cover_enough_text(texts):
    real = [t for t in texts if t["source"] != "edge_case"]
    edge = [t for t in texts if t["source"] == "edge_case"]
    assert len(real) >= 1000 and len(edge) >= 30
    assert len({t["source"].split(":")[0] for t in real}) >= 4


@pytest.mark.parametrize("name", sorted(VOCABS))
def test_ids_match_reference(texts, name):
    ref = _reference(name)
    assert ref["lower_case"] == VOCABS[name]
    strings = [t["text"] for t in texts]
    bad = _mismatches(tokenizer(name), strings, ref["ids"])
    assert not bad, f"{len(bad)}/{len(strings)} differ, e.g. {bad[:3]}"


@pytest.mark.parametrize("name", sorted(VOCABS))
def test_ids_match_reference_with_preserved_special_tokens(texts, name):
    ref = _reference(name)
    expected = list(ref["ids"])
    for index, ids in ref["ids_preserve"].items():
        expected[int(index)] = ids
    assert ref["ids_preserve"], "fixture should contain texts with literal special tokens"
    strings = [t["text"] for t in texts]
    bad = _mismatches(tokenizer(name, preserve=True), strings, expected)
    assert not bad, f"{len(bad)}/{len(strings)} differ, e.g. {bad[:3]}"


def _sweep_code_points():
    """Every BMP/assigned code point outside CJK ideographs and private use, plus
    every 97th of the rest (unassigned, private use, CJK)."""
    chosen = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        char = chr(cp)
        bulk = unicodedata.category(char) in ("Cn", "Co") or char_classes.is_cjk(char)
        if not bulk or cp % 97 == 0:
            chosen.append(char)
    return chosen


@pytest.mark.parametrize("lower_case", [True, False])
def test_basic_tokenizer_matches_python_reference_across_unicode(lower_case):
    # Each code point alone, between letters, after a sigma (final-sigma
    # context), between sigmas and before a combining mark (NFC).
    strings = [f"{c} Ab{c}Cd \u0391\u03a3{c} \u03a3{c}\u03a3 x{c}\u0301y" for c in _sweep_code_points()]
    got = BasicTokenizer(lower_case=lower_case)(tf.constant(strings)).to_list()
    bad = []
    for s, words in zip(strings, got):
        expected = python_reference.basic_tokenize(s, lower_case)
        if [w.decode("utf-8") for w in words] != expected:
            bad.append((hex(ord(s[0])), expected))
    assert not bad, f"{len(bad)} code points differ, e.g. {bad[:5]}"


def test_lowercase_equals_python_str_lower_on_every_kept_code_point():
    chars = [chr(cp) for cp in char_classes.kept_code_points()]
    got = lowercase.lower(tf.constant(chars)).numpy()
    bad = [c for c, g in zip(chars, got) if g.decode("utf-8") != c.lower()]
    assert not bad, [hex(ord(c)) for c in bad[:20]]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("ΟΔΟΣ ΣΟΦΙΑ", "οδος σοφια"),
        ("ΑΣ'Σ", "ασ'ς"),
        ("ΑΣ\u0301Α ΑΣ\u0301", "ασ\u0301α ας\u0301"),
        ("İstanbul", "i\u0307stanbul"),
        ("ẞ Ⅻ Ⓐ", "ß ⅻ ⓐ"),
    ],
)
def test_lowercase_special_cases(text, expected):
    assert text.lower() == expected
    assert lowercase.lower(tf.constant([text])).numpy()[0].decode("utf-8") == expected


def test_nfkc_sensitive_characters_follow_the_original():
    tok = tokenizer("uncased")
    words = tok.basic_tokenizer(tf.constant(["Wait… Straße ﬁne ½ Ｆｕｌｌ"])).to_list()[0]
    # The original keeps these characters; NFKC case folding would rewrite them.
    assert [w.decode() for w in words] == ["wait", "…", "straße", "ﬁne", "½", "ｆｕｌｌ"]


def test_word_length_limit_counts_characters_not_bytes():
    tok = tokenizer("uncased")
    unk = tok.get_special_tokens_dict()["unknown_id"]
    ids = tok(tf.constant(["ñ" * 100, "ñ" * 101, "b" * 101])).to_list()
    assert unk not in ids[0] and len(ids[0]) > 1
    assert ids[1] == [unk] and ids[2] == [unk]


def test_literal_special_tokens_split_unless_preserved():
    text = tf.constant(["the [MASK] is [CLS]x"])
    plain = tokenizer("uncased")
    kept = tokenizer("uncased", preserve=True)
    special = plain.get_special_tokens_dict()
    assert special["mask_id"] not in plain(text).to_list()[0]
    assert plain.id_to_token(plain(text).to_list()[0])[:5] == ["the", "[", "mask", "]", "is"]
    kept_tokens = kept.id_to_token(kept(text).to_list()[0])
    assert kept_tokens == ["the", "[MASK]", "is", "[CLS]", "x"]


def test_empty_and_blank_strings_give_no_tokens():
    ids = tokenizer("uncased")(tf.constant(["", " ", "\t\n\r\u3000\u200b"]))
    assert ids.to_list() == [[], [], []]
    assert ids.dtype == tf.int32


def test_scalar_input_gives_1d_ids_and_works_in_tf_function():
    tok = tokenizer("uncased")
    batch = tok(tf.constant(["hello world"])).to_list()[0]
    assert tok(tf.constant("hello world")).numpy().tolist() == batch
    fn = tf.function(lambda s: tok(s).to_tensor(), input_signature=[tf.TensorSpec([None], tf.string)])
    assert fn(tf.constant(["hello world"])).numpy()[0].tolist() == batch


def test_usable_in_tf_data_map():
    tok = tokenizer("uncased")
    strings = ["hello world", "Unaffable café!", ""]
    expected = tok(tf.constant(strings)).to_list()
    per_element = tf.data.Dataset.from_tensor_slices(strings).map(tok)
    assert [x.tolist() for x in per_element.as_numpy_iterator()] == expected
    batched = tf.data.Dataset.from_tensor_slices(strings).batch(2).map(lambda s: tok(s))
    got = [row for b in batched for row in b.to_list()]
    assert got == expected


def test_tokenize_words_groups_pieces_by_word():
    tok = tokenizer("uncased")
    strings = tf.constant(["unaffable hello, world"])
    words = tok.tokenize_words(strings)
    assert words.shape.rank == 3
    assert words.merge_dims(1, 2).to_list() == tok(strings).to_list()
    pieces = [tok.id_to_token(w) for w in words.to_list()[0]]
    assert all(not p[0].startswith("##") for p in pieces)
    assert all(q.startswith("##") for p in pieces for q in p[1:])


def test_detokenize_joins_continuation_pieces():
    tok = tokenizer("uncased")
    strings = ["unaffable people, indeed", "the quick brown fox"]
    ids = tok(tf.constant(strings))
    assert [s.decode() for s in tok.detokenize(ids).numpy()] == ["unaffable people , indeed", "the quick brown fox"]
    padded = ids.to_tensor(default_value=tok.get_special_tokens_dict()["padding_id"])
    assert tok.detokenize(padded).numpy()[1].decode() == "the quick brown fox"


def test_vocab_helpers(tmp_path):
    tok = tokenizer("uncased")
    vocab = load_vocab(os.path.join(FIXTURES, "vocab_uncased.txt"))
    assert list(tok.vocab) == vocab and tok.vocab_size == len(vocab)
    ids = tok(tf.constant(["unaffable"])).to_list()[0]
    assert tok.token_to_id(tok.id_to_token(ids)) == ids
    assert tok.token_to_id("no-such-token") == tok.get_special_tokens_dict()["unknown_id"]
    mask = tok.continuation_mask()
    assert mask.dtype == bool and mask.shape == (len(vocab),)
    assert [bool(mask[i]) for i in ids] == [t.startswith("##") for t in tok.id_to_token(ids)]


def test_special_tokens_found_by_name(tmp_path):
    tokens = ["hello", "[SEP]", "world", "[MASK]", "##s", "[UNK]", "[CLS]", ",", "[PAD]"]
    path = tmp_path / "vocab.txt"
    vocab_lib.write_vocab(tokens, path)
    tok = BertTokenizer(path)
    assert tok.get_special_tokens_dict() == {
        "vocab_size": 9,
        "start_of_sequence_id": 6,
        "end_of_segment_id": 1,
        "padding_id": 8,
        "mask_id": 3,
        "unknown_id": 5,
    }
    assert tok(tf.constant(["Hello, worlds! x"])).to_list() == [[0, 7, 2, 4, 5, 5]]


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "not found"),
        ("", "is empty"),
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", "lacks the special token(s) [MASK]"),
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\na\n", "repeats token 'a' on lines 6 and 7"),
        ("[PAD]\r\n[UNK]\r\n", "carriage return on line 1"),
    ],
)
def test_bad_vocab_files_name_the_file(tmp_path, content, message):
    path = tmp_path / "my_vocab.txt"
    if content is not None:
        path.write_bytes(content.encode())
    with pytest.raises((ValueError, FileNotFoundError), match="my_vocab.txt") as info:
        BertTokenizer(path)
    assert message in str(info.value)


def test_non_utf8_vocab_is_rejected(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"[PAD]\ncaf\xe9\n")
    with pytest.raises(ValueError, match="latin1.txt.*not valid UTF-8"):
        load_vocab(path)


# -- properties -----------------------------------------------------------------

_VOCAB = {name: set(load_vocab(os.path.join(FIXTURES, f"vocab_{name}.txt"))) for name in VOCABS}
_PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY_SETTINGS
@given(strings=st.lists(st.text(max_size=40), min_size=1, max_size=16), name=st.sampled_from(sorted(VOCABS)))
def test_arbitrary_unicode_matches_python_reference(strings, name):
    tok = tokenizer(name)
    got = tok(tf.constant(strings)).to_list()
    for s, ids in zip(strings, got):
        assert tok.id_to_token(ids) == python_reference.tokenize(s, _VOCAB[name], VOCABS[name]), s


_SPECIAL_ALPHABET = [
    "[MASK]",
    "[CLS]",
    "[SEP]",
    "[UNK]",
    "[",
    "]",
    "MASK",
    "mask",
    " ",
    "\u200b",
    "\x00",
    "\t",
    "\u00a0",
    "a",
    "B",
    "\u03a3",
    "\u4e2d",
    ".",
    "e\u0301",
    "\u00c9",
]


@_PROPERTY_SETTINGS
@given(
    strings=st.lists(st.lists(st.sampled_from(_SPECIAL_ALPHABET), max_size=12).map("".join), min_size=1, max_size=16),
    name=st.sampled_from(sorted(VOCABS)),
)
def test_preserved_special_tokens_match_python_reference(strings, name):
    tok = tokenizer(name, preserve=True)
    got = tok(tf.constant(strings)).to_list()
    for s, ids in zip(strings, got):
        expected = python_reference.tokenize(s, _VOCAB[name], VOCABS[name], vocab_lib.SPECIAL_TOKENS)
        assert tok.id_to_token(ids) == expected, s


@_PROPERTY_SETTINGS
@given(blobs=st.lists(st.binary(max_size=40), min_size=1, max_size=16))
def test_invalid_utf8_bytes_are_dropped(blobs):
    # Defined behaviour: invalid bytes are ignored, as the original's
    # `text.decode("utf-8", "ignore")` does; never an error.
    tok = tokenizer("uncased")
    raw = tok(tf.constant(blobs)).to_list()
    cleaned = tok(tf.constant([b.decode("utf-8", "ignore").encode("utf-8") for b in blobs])).to_list()
    assert raw == cleaned


@_PROPERTY_SETTINGS
@given(
    vocab_pieces=st.sets(st.text(alphabet="ab", min_size=1, max_size=4), min_size=1),
    suffixes=st.sets(st.text(alphabet="ab", min_size=1, max_size=4)),
    words=st.lists(st.text(alphabet="ab", min_size=1, max_size=12), min_size=1, max_size=8),
)
def test_wordpiece_is_greedy_longest_match_first(tmp_path_factory, vocab_pieces, suffixes, words):
    tokens = list(vocab_lib.SPECIAL_TOKENS) + sorted(vocab_pieces) + sorted("##" + s for s in suffixes)
    path = tmp_path_factory.mktemp("wp") / "vocab.txt"
    vocab_lib.write_vocab(tokens, path)
    tok = BertTokenizer(path, lower_case=False)
    got = tok(tf.constant([" ".join(words)])).to_list()[0]
    expected = [p for w in words for p in python_reference.wordpiece(w, set(tokens))]
    assert tok.id_to_token(got) == expected
