"""`bert_tf.export.litert_tokenizer`: the in-graph tokenizer's ids from the TF Text ops LiteRT runs.

The tokenizer alone, converted and run in the `ai-edge-litert` interpreter, against `BertTokenizer` on the
tokenizer fixtures' texts; its normalization table on every code point with TF Text's own kernel, eagerly.
(The classifier around it: tests/test_export_litert.py.)
"""

import csv
import json
import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.export import litert, litert_tokenizer
from bert_tf.tokenization import BertTokenizer, char_classes
from bert_tf.tokenization.vocab import load_vocab
from tests.helpers.export_fixtures import REPO_ROOT

TOKENIZATION = os.path.join(REPO_ROOT, "tests", "fixtures", "tokenization")
_CODE_POINTS = [cp for cp in range(1, 0x110000) if not 0xD800 <= cp < 0xE000]


def _litert_tokenizer(vocab, lower_case):
    """A signature runner of `LiteRTTokenizer` alone: text [batch] -> ids, row_splits."""
    tokenizer = litert_tokenizer.LiteRTTokenizer(vocab, lower_case)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(text):
        ids, row_splits = tokenizer(text)
        return {"ids": ids, "row_splits": row_splits}

    converter = tf.lite.TFLiteConverter.from_concrete_functions([tokenize.get_concrete_function()], tokenizer)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]  # no Flex ops
    converter.allow_custom_ops = True  # TF Text's
    return litert.interpreter(converter.convert()).get_signature_runner()


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_litert_ids_equal_the_in_graph_tokenizers(casing):
    """Every text of the tokenizer fixtures (the unusual ones too: accents, CJK, emoji, control characters, very
    long words, a Greek text with final capital sigmas) and every bundled test review gets `BertTokenizer`'s ids
    through the LiteRT interpreter."""
    lower_case = casing == "uncased"
    vocab_file = os.path.join(TOKENIZATION, f"vocab_{casing}.txt")
    with open(os.path.join(TOKENIZATION, "texts.json"), encoding="utf-8") as f:
        fixtures = json.load(f)["texts"]
    texts = [t["text"] for t in fixtures]
    if lower_case:  # the bundled reviews, for the uncased vocabulary the demo models use
        with open(os.path.join(REPO_ROOT, "data", "fine_foods_test.tsv"), encoding="utf-8") as f:
            texts += [row["text"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]

    out = _litert_tokenizer(load_vocab(vocab_file), lower_case)(text=np.array(texts, object))
    got = [ids.tolist() for ids in np.split(out["ids"], out["row_splits"][1:-1])]
    expected = BertTokenizer(vocab_file, lower_case=lower_case)(tf.constant(texts)).to_list()
    assert len(got) == len(texts)
    assert [text for text, a, b in zip(texts, got, expected) if a != b] == []
    # Words of at most 100 characters but more bytes are tokenized, longer ones are one [UNK]: as in graph.
    assert len([t for t in texts if any(len(w.encode()) > 100 for w in t.split())]) >= 4


# Around a capital sigma: cased letters, digits, case-ignorable punctuation, marks (U+0301, U+0345) and a
# modifier letter (U+02B0), deleted characters (U+00AD, U+0001), a CJK ideograph, a symbol, spaces.
_SIGMA_CONTEXTS = [
    "Α",
    "Σ",
    "σ",
    "ς",
    "a",
    "1",
    "'",
    ".",
    " ",
    "\u0301",
    "\u0345",
    "\u02b0",
    "\u00ad",
    "\x01",
    "一",
    "€",
]


def test_capital_sigmas_are_spelled_as_in_graph(tmp_path):
    """`FinalSigma` (uncased) gives each capital sigma the in-graph tokenizer's 'σ' or final 'ς' in every context
    of 3,000 random texts (seeded) and the named ones, through the LiteRT interpreter; one vocabulary token a
    character, so the ids spell the normalized text."""
    kept = sorted({c.lower() for c in _SIGMA_CONTEXTS if c.isprintable() and unicodedata.category(c) != "Mn"} - {" "})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + kept + ["##" + c for c in kept]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
    rng = np.random.default_rng(0)
    texts = ["ΟΔΟΣ", "Σ", "ΑΣ'Α", "ΑΣ.", "ΑΣΑ", "aΣ", "ΑΣ1", "ΑΣ1Σ", "ΑΣ.Σ", "ΑΣΣ", "ΑʰΣ", "ΑΣ\x01Α", "a\x00Σ", ""]
    texts += ["".join(rng.choice(_SIGMA_CONTEXTS, rng.integers(1, 9))) for _ in range(3000)]

    out = _litert_tokenizer(vocab, lower_case=True)(text=np.array(texts, object))
    got = [ids.tolist() for ids in np.split(out["ids"], out["row_splits"][1:-1])]
    expected = BertTokenizer(str(vocab_file), lower_case=True)(tf.constant(texts)).to_list()
    assert [text for text, a, b in zip(texts, got, expected) if a != b] == []
    # Both spellings occur, as first pieces and as continuations.
    spelled = {vocab[i] for ids in expected for i in ids}
    assert {"σ", "ς", "##σ", "##ς"} <= spelled


@pytest.mark.parametrize("lower_case", [True, False])
def test_the_table_normalizes_every_code_point_as_the_in_graph_tokenizer(lower_case):
    """TF Text's kernel reads the table written here (a darts-clone trie of UTF-8 keys) as intended, on all of
    Unicode; NUL is deleted (it has its own slot in TF Text's format)."""
    table = litert_tokenizer.normalization_table(lower_case)
    normalizer = tf_text.FastBertNormalizer(model_buffer=litert_tokenizer.normalizer_model(lower_case))
    got = normalizer.normalize(tf.constant([chr(cp) for cp in _CODE_POINTS])).numpy()
    wrong = [cp for cp, text in zip(_CODE_POINTS, got) if text.decode() != table.get(cp, chr(cp))]
    assert wrong == []
    assert normalizer.normalize(tf.constant(["a\0b"])).numpy().tolist() == [b"ab"]
    # The table has teeth: deletions, case and accents (uncased) or NFC singletons (cased).
    assert table[0x200B] == "" and table[0xE000] == "" and table[0xE0080] == ""
    assert (table[ord("É")] == "e") if lower_case else (table[0x212B] == "Å" and ord("É") not in table)


def test_the_fast_tokenizer_splits_words_where_bert_does():
    """FastWordpieceTokenizer's own splitting (whitespace, punctuation, CJK) is BERT's on every character that
    survives cleaning, so the table needs no spaces of its own: x + c + x is one word, two or three ([UNK]s)."""
    tokenizer = tf_text.FastWordpieceTokenizer(
        ["[UNK]", "y"], token_out_type=tf.int32, no_pretokenization=False, unknown_token="[UNK]"
    )
    code_points = np.asarray(char_classes.kept_code_points())
    counts = tokenizer.tokenize(tf.constant(["x" + chr(cp) + "x" for cp in code_points])).row_lengths().numpy()
    masks = char_classes._masks()
    separate = masks["punctuation"].copy()
    for lo, hi in char_classes.CJK_RANGES:
        separate[lo : hi + 1] = True
    bert = np.where(masks["whitespace"][code_points], 2, np.where(separate[code_points], 3, 1))
    assert np.flatnonzero(counts != bert).tolist() == []
    assert set(bert.tolist()) == {1, 2, 3}
