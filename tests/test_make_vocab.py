"""make_vocab: learned vocabularies start with the special tokens and cover their text."""

import json
import os
import stat
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.errors import BadInputError
from bert_tf.tokenization import SPECIAL_TOKENS, BertTokenizer, count_words, learn_vocab, load_vocab
from bert_tf.tokenization.vocab_learning import make_vocab
from tfrecords_tools.make_vocab import expand_input_files

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tokenization")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    with open(os.path.join(FIXTURES, "texts.json"), encoding="utf-8") as f:
        texts = [t["text"] for t in json.load(f)["texts"] if t["source"].startswith(("austen", "kjv", "amazon"))][:400]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("".join(t.replace("\n", " ") + "\n" for t in texts), encoding="utf-8")
    return str(path), texts


def unk_rate(vocab_file, texts, lower_case):
    tok = BertTokenizer(vocab_file, lower_case=lower_case)
    ids = tok(tf.constant(texts)).flat_values.numpy()
    return float((ids == tok.get_special_tokens_dict()["unknown_id"]).mean())


def test_cli_learns_uncased_vocab(corpus, tmp_path):
    path, texts = corpus
    out = tmp_path / "vocab.txt"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfrecords_tools.make_vocab",
            f"--input_file={path}",
            "--vocab_size=600",
            f"--output_file={out}",
            "--min_count=2",
            "--num_unused=3",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    vocab = load_vocab(out)
    assert vocab[:8] == list(SPECIAL_TOKENS) + ["[unused0]", "[unused1]", "[unused2]"]
    assert vocab[0] == "[PAD]"
    assert 500 <= len(vocab) <= 600
    learned = vocab[8:]
    assert all(t == t.lower() for t in learned), "uncased vocabulary has upper-case pieces"
    assert any(t.startswith("##") and len(t) > 3 for t in learned)
    assert unk_rate(out, texts, lower_case=True) < 0.01


def test_cased_vocab_keeps_case_and_covers_text(corpus, tmp_path):
    path, texts = corpus
    out = tmp_path / "cased.txt"
    tokens = make_vocab([path], out, vocab_size=600, do_lower_case=False, min_count=2)
    assert load_vocab(out) == tokens
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~umask  # not mkstemp's private 0600
    assert tokens[:5] == list(SPECIAL_TOKENS)
    assert any(t != t.lower() for t in tokens[5:])
    assert unk_rate(out, texts, lower_case=False) < 0.01


def test_max_input_words_learns_from_the_most_frequent_words_only():
    # "zebra" is rarer than every other word, so with max_input_words=3 it is
    # never a learned whole-word piece, but its characters keep it off [UNK].
    counts = {"apple": 50, "banana": 40, "cherry": 30, "zebra": 25}
    full = learn_vocab(counts, vocab_size=200, min_count=1, num_iterations=2)
    top = learn_vocab(counts, vocab_size=200, min_count=1, num_iterations=2, max_input_words=3)
    assert "zebra" in full and "cherry" in full
    assert "zebra" not in top and "cherry" in top
    assert {"z", "e", "b", "r", "a", "##z", "##e", "##b", "##r", "##a"} <= set(top)


def test_words_are_counted_after_bert_normalization():
    counts = count_words(["Café, CAFÉ!", "ﬁne…"], lower_case=True)
    assert counts == {"cafe": 2, ",": 1, "!": 1, "ﬁne": 1, "…": 1}
    dataset = tf.data.Dataset.from_tensor_slices(["Café, CAFÉ!"])
    assert count_words(dataset, lower_case=False) == {"Café": 1, "CAFÉ": 1, ",": 1, "!": 1}


def test_learn_vocab_checks_its_arguments():
    with pytest.raises(ValueError, match="vocab_size=5 leaves no room"):
        learn_vocab({"a": 3}, 5)
    with pytest.raises(ValueError, match="empty input"):
        learn_vocab({}, 100)


def test_missing_or_empty_input_is_reported(tmp_path):
    with pytest.raises(BadInputError, match="--input_file: no file matches .*nothing-here"):
        expand_input_files(str(tmp_path / "nothing-here*.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(BadInputError, match="--input_file: no words in .*empty.txt"):
        make_vocab([str(empty)], tmp_path / "v.txt", vocab_size=100)
    assert not (tmp_path / "v.txt").exists()


def test_cli_rejects_missing_flags():
    proc = subprocess.run(
        [sys.executable, "-m", "tfrecords_tools.make_vocab", "--vocab_size=10"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "make_vocab: error: --input_file is required"


def test_the_threshold_search_is_the_learners_and_reports_each_step(corpus, monkeypatch):
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    from bert_tf import progress
    from bert_tf.tokenization import vocab_learning

    _, texts = corpus
    counts = count_words(texts)
    params = dict(upper_thresh=int(1e7), lower_thresh=2, num_iterations=2, max_input_tokens=5000)
    params.update(max_token_length=50, max_unique_chars=1000, vocab_size=400, slack_ratio=0.05)
    params.update(include_joiner_token=True, joiner="##", reserved_tokens=list(SPECIAL_TOKENS))
    expected = learner.learn(dict(counts), **params)
    lines = []
    monkeypatch.setattr(progress, "INTERVAL_SECONDS", 0.0)  # a line at every step
    monkeypatch.setattr(progress.logging, "info", lambda line, *args: lines.append(line % args if args else line))
    assert vocab_learning._learn_pieces(dict(counts), learner.Params(**params)) == expected
    steps = [line for line in lines if line.startswith("Learning WordPiece pieces from ") and "ETA" in line]
    assert len(steps) >= 2
    assert steps[0].split(": ")[1].startswith("1/")
    assert " in " in lines[-1] and lines[-1].startswith("Learning WordPiece pieces from ")
