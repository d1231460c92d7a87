"""BertPreprocessor SavedModel: round trip, relocation, TF Hub interface, atomic save."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tokenization import BertPreprocessor, BertTokenizer, bert_pack_inputs, save_preprocessor

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tokenization")
VOCAB = os.path.join(FIXTURES, "vocab_uncased.txt")
FIRST = ["Hello, world!", "The quick brown fox jumps over the lazy dog.", "unaffable"]
SECOND = ["A second segment.", "Another one here", ""]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Saves once over an older export, then moves the directory elsewhere."""
    root = tmp_path_factory.mktemp("export")
    old = root / "original" / "preprocess"
    old.mkdir(parents=True)
    (old / "stale.txt").write_text("from an older export")
    pre = BertPreprocessor(VOCAB, lower_case=True, default_seq_length=16)
    written = save_preprocessor(pre, old, overwrite=True)
    # The rename replaced the old directory whole and left no temporary one.
    assert os.listdir(root / "original") == ["preprocess"]
    assert sorted(os.listdir(written)) == ["assets", "fingerprint.pb", "saved_model.pb", "variables"]
    moved = root / "elsewhere" / "preprocess_copy"
    shutil.copytree(written, moved)
    shutil.rmtree(root / "original")
    return str(moved)


@pytest.fixture(scope="module")
def loaded(exported):
    return tf.saved_model.load(exported)


def expected_pack(tokenizer, segments, seq_length):
    special = tokenizer.get_special_tokens_dict()
    out = bert_pack_inputs(
        [tokenizer(tf.constant(s)) for s in segments],
        seq_length,
        special["start_of_sequence_id"],
        special["end_of_segment_id"],
        special["padding_id"],
    )
    return {k: v.numpy() for k, v in out.items()}


def assert_same(got, want):
    assert set(got) == {"input_word_ids", "input_mask", "input_type_ids"}
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), want[key], err_msg=key)


def test_call_packs_single_segment_at_default_length(loaded, tokenizer):
    assert_same(loaded(tf.constant(FIRST)), expected_pack(tokenizer, [FIRST], 16))


def test_tokenize_matches_tokenizer(loaded, tokenizer):
    got = loaded.tokenize(tf.constant(FIRST))
    assert isinstance(got, tf.RaggedTensor) and got.dtype == tf.int32
    assert got.to_list() == tokenizer(tf.constant(FIRST)).to_list()


@pytest.mark.parametrize("seq_length", [8, 40])
def test_pack_pairs_with_any_seq_length(loaded, tokenizer, seq_length):
    a, b = loaded.tokenize(tf.constant(FIRST)), loaded.tokenize(tf.constant(SECOND))
    want = expected_pack(tokenizer, [FIRST, SECOND], seq_length)
    assert_same(loaded.bert_pack_inputs([a, b], seq_length=seq_length), want)
    assert_same(loaded.bert_pack_inputs([a, b], seq_length=tf.constant(seq_length)), want)


def test_pack_defaults_and_three_segments(loaded, tokenizer):
    a, b = loaded.tokenize(tf.constant(FIRST)), loaded.tokenize(tf.constant(SECOND))
    assert_same(loaded.bert_pack_inputs([a]), expected_pack(tokenizer, [FIRST], 16))
    out = loaded.bert_pack_inputs([a, b, a], seq_length=12)
    assert_same(out, expected_pack(tokenizer, [FIRST, SECOND, FIRST], 12))
    assert set(np.unique(out["input_type_ids"])) == {0, 1, 2}


def test_special_tokens_dict(loaded, tokenizer):
    got = {k: int(v) for k, v in loaded.tokenize.get_special_tokens_dict().items()}
    vocab = tokenizer.vocab
    assert got == {
        "vocab_size": len(vocab),
        "start_of_sequence_id": vocab.index("[CLS]"),
        "end_of_segment_id": vocab.index("[SEP]"),
        "padding_id": vocab.index("[PAD]"),
        "mask_id": vocab.index("[MASK]"),
        "unknown_id": vocab.index("[UNK]"),
    }
    assert all(v.dtype == tf.int32 for v in loaded.get_special_tokens_dict().values())


def test_vocab_asset_moved_with_the_directory(loaded, exported):
    path = loaded.vocab_file.asset_path.numpy().decode()
    assert path.startswith(exported + os.sep) and os.path.isfile(path)
    with open(path, "rb") as a, open(VOCAB, "rb") as b:
        assert a.read() == b.read()


def test_serving_signature(loaded, tokenizer):
    out = loaded.signatures["serving_default"](strings=tf.constant(FIRST))
    assert_same(out, expected_pack(tokenizer, [FIRST], 16))


def test_save_refuses_to_overwrite_by_default(tmp_path):
    pre = BertPreprocessor(VOCAB, default_seq_length=8)
    target = tmp_path / "pre"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match="pre"):
        save_preprocessor(pre, target)
    assert os.listdir(tmp_path) == ["pre"] and os.listdir(target) == ["keep.txt"]


def test_rejects_bad_default_seq_length():
    with pytest.raises(ValueError, match="default_seq_length"):
        BertPreprocessor(VOCAB, default_seq_length=1)


_HUB_SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the ops)

    path, first, second = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    pre = hub.load(path)
    a = tf.keras.layers.Input(shape=(), dtype=tf.string)
    b = tf.keras.layers.Input(shape=(), dtype=tf.string)
    tokenize = hub.KerasLayer(pre.tokenize)
    pack = hub.KerasLayer(pre.bert_pack_inputs, arguments=dict(seq_length=64))
    pair_model = tf.keras.Model([a, b], pack([tokenize(a), tokenize(b)]))
    pair = pair_model([tf.constant(first), tf.constant(second)])
    single = hub.KerasLayer(path)(tf.constant(first))
    json.dump({"keras": type(pair_model).__module__,
               "pair": {k: v.numpy().tolist() for k, v in pair.items()},
               "single": {k: v.numpy().tolist() for k, v in single.items()}}, sys.stdout)
""")


def test_hub_keras_layer_in_tf_keras(exported, tokenizer):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, "-c", _HUB_SCRIPT, exported, json.dumps(FIRST), json.dumps(SECOND)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["keras"].startswith("tf_keras")
    assert_same(result["pair"], expected_pack(tokenizer, [FIRST, SECOND], 64))
    assert_same(result["single"], expected_pack(tokenizer, [FIRST], 16))
