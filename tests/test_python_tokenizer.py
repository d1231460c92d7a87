"""The plain-Python WordPiece tokenizer (bert_tf/tokenization/python_tokenizer.py) against the reference ids.

The ids of tests/fixtures/tokenization (HuggingFace's slow BertTokenizer, which the in-graph tokenizer matches
1108/1108, tests/test_tokenization.py) on both vocabularies, with and without preserved special tokens; and the
packed inputs against the in-graph preprocessor's on the bundled reviews (pairs included).
"""

import json
import os

import numpy as np
import pytest

from bert_tf.tokenization.python_tokenizer import PythonBertTokenizer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tokenization")
VOCABS = {"uncased": True, "cased": False}


def _texts():
    with open(os.path.join(FIXTURES, "texts.json"), encoding="utf-8") as f:
        return [t["text"] for t in json.load(f)["texts"]]


@pytest.mark.parametrize("name", sorted(VOCABS))
def test_ids_equal_the_reference_on_every_fixture_text(name):
    with open(os.path.join(FIXTURES, f"reference_{name}.json"), encoding="utf-8") as f:
        reference = json.load(f)
    vocab_file = os.path.join(FIXTURES, f"vocab_{name}.txt")
    texts = _texts()
    assert len(texts) == len(reference["ids"]) == 1108
    plain = PythonBertTokenizer(vocab_file, lower_case=VOCABS[name])
    mismatches = [t for t, ids in zip(texts, reference["ids"]) if plain.tokenize(t) != ids]
    assert not mismatches, mismatches[:3]
    preserving = PythonBertTokenizer(vocab_file, lower_case=VOCABS[name], preserve_special_tokens=True)
    expected = [reference["ids_preserve"].get(str(i), ids) for i, ids in enumerate(reference["ids"])]
    mismatches = [t for t, ids in zip(texts, expected) if preserving.tokenize(t) != ids]
    assert not mismatches, mismatches[:3]
    assert reference["ids_preserve"], "the fixture has texts where preserving special tokens changes the ids"


def test_packed_inputs_equal_the_in_graph_preprocessor():
    import tensorflow as tf

    from bert_tf.tokenization import BertTokenizer, bert_pack_inputs

    vocab_file = os.path.join(FIXTURES, "vocab_uncased.txt")
    texts = _texts()[:200]
    pairs = (texts[0::2], texts[1::2])
    graph = BertTokenizer(vocab_file, lower_case=True)
    python = PythonBertTokenizer(vocab_file, lower_case=True)
    for seq_length in (16, 128):
        for segments in ([texts], list(pairs)):
            tokenized = [graph(tf.constant(s)) for s in segments]
            expected = bert_pack_inputs(tokenized, seq_length, python.cls_id, python.sep_id, python.pad_id)
            actual = python.encode(
                *segments[:1], seq_length=seq_length, texts_b=segments[1] if len(segments) > 1 else None
            )
            for key, value in expected.items():
                np.testing.assert_array_equal(actual[key], value.numpy(), err_msg=f"{key}, length {seq_length}")


def test_module_docstring_example_runs():
    import doctest

    from bert_tf.tokenization import python_tokenizer

    result = doctest.testmod(python_tokenizer, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0
