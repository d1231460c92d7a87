"""Tests of the bundled datasets in data/, their readers, TFDS builders and preparation code."""

import collections
import hashlib
import importlib.util
import pathlib
import socket

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from bert_tf.datasets import bundled

DATA_DIR = pathlib.Path(__file__).resolve().parents[1] / "data"
# Chapters per novel in the standard editions (the prepare script enforces these).
CHAPTERS_PER_NOVEL = {
    "Sense and Sensibility": 50,
    "Pride and Prejudice": 61,
    "Mansfield Park": 48,
    "Emma": 55,
    "Northanger Abbey": 31,
    "Persuasion": 24,
}
# Split sizes of modeldata's small_fine_foods, as documented in data/README.md.
SENTIMENT_SIZES = {"train": 4000, "test": 1000}


def _load_prepare_module():
    spec = importlib.util.spec_from_file_location("prepare_bundled_data", DATA_DIR / "prepare_bundled_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prepare = _load_prepare_module()


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def documents():
    return bundled.read_corpus_documents()


# --- Files --------------------------------------------------------------------------------------


def test_files_match_their_checksums():
    lines = (DATA_DIR / "SHA256SUMS").read_text().splitlines()
    assert len(lines) == 6
    for line in lines:
        digest, name = line.split("  ")
        assert hashlib.sha256((DATA_DIR / name).read_bytes()).hexdigest() == digest, name


def test_default_paths_point_at_the_repository_data_dir():
    assert bundled.default_data_dir() == DATA_DIR
    assert bundled.corpus_path() == DATA_DIR / "austen_corpus.txt"
    assert bundled.sentiment_paths() == {
        "train": DATA_DIR / "fine_foods_train.tsv",
        "test": DATA_DIR / "fine_foods_test.tsv",
    }


def test_total_bundled_size_stays_small():
    total = sum(path.stat().st_size for path in DATA_DIR.iterdir() if path.is_file())
    assert total < 10 * 1024 * 1024


# --- Corpus -------------------------------------------------------------------------------------


def test_corpus_is_in_create_pretraining_data_format():
    text = bundled.corpus_path().read_text(encoding="utf-8")
    lines = text.split("\n")
    assert lines[0].strip() and text.endswith("\n") and not text.endswith("\n\n")
    for number, (line, following) in enumerate(zip(lines, lines[1:]), start=1):
        assert line == line.strip(), f"line {number} has surrounding whitespace"
        assert line or following, f"two blank lines in a row at line {number}"
        assert "\t" not in line and "_" not in line, f"line {number}: {line!r}"
        assert not line.upper().startswith(("CHAPTER ", "VOLUME ")), f"heading left at line {number}"


def test_corpus_documents_are_the_chapters_of_six_novels(documents):
    assert collections.Counter(d.novel for d in documents) == CHAPTERS_PER_NOVEL
    for novel, count in CHAPTERS_PER_NOVEL.items():
        assert [d.chapter for d in documents if d.novel == novel] == list(range(1, count + 1))
    assert documents[0].sentences[0] == "The family of Dashwood had long been settled in Sussex."
    assert documents[1].heading == "Chapter 2"
    assert [d.heading for d in documents if d.novel == "Emma"][18] == "Volume II, Chapter I"


def test_corpus_sentence_and_word_counts_are_sane(documents):
    sentences = [s for d in documents for s in d.sentences]
    words = sum(len(s.split()) for s in sentences)
    assert 700_000 < words < 740_000  # janeaustenr's six novels are ~718k words
    # Austen averages 20-25 words a sentence.
    assert 18 < words / len(sentences) < 28
    assert all(len(d.sentences) >= 10 for d in documents)
    # Splitting must not cut after titles: no sentence may end in "Mr." or "Mrs.".
    assert not [s for s in sentences if s.endswith(("Mr.", "Mrs.", "Dr."))]


def test_corpus_sentence_dataset_yields_every_sentence(documents):
    dataset = bundled.corpus_sentence_dataset()
    assert dataset.element_spec == tf.TensorSpec([], tf.string)
    first = [t.decode() for t in dataset.take(3).as_numpy_iterator()]
    assert first == list(documents[0].sentences[:3])
    assert dataset.reduce(0, lambda n, _: n + 1).numpy() == sum(len(d.sentences) for d in documents)


def test_corpus_documents_mismatch_names_the_file(tmp_path):
    (tmp_path / "austen_corpus.txt").write_text("One.\nTwo.\n\nThree.\n")
    (tmp_path / "austen_corpus_documents.tsv").write_text(
        "novel\tchapter\theading\tnum_sentences\nEmma\t1\tChapter I\t2\nEmma\t2\tChapter II\t2\n"
    )
    with pytest.raises(ValueError, match=r"austen_corpus_documents.tsv:3: says 2 sentences.*austen_corpus.txt:4"):
        bundled.read_corpus_documents(tmp_path)
    (tmp_path / "austen_corpus_documents.tsv").write_text("novel\tchapter\theading\tnum_sentences\n")
    with pytest.raises(ValueError, match="lists 0 documents but .* has 2"):
        bundled.read_corpus_documents(tmp_path)


# --- Sentiment ----------------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["train", "test"])
def test_sentiment_split_sizes_and_binary_labels(split):
    texts, labels = bundled.read_sentiment(split)
    assert len(texts) == len(labels) == SENTIMENT_SIZES[split]
    assert labels.dtype == np.int32 and set(np.unique(labels)) == {0, 1}
    # "great" (5 stars) is the majority class, about two thirds of each split.
    assert 0.6 < labels.mean() < 0.7
    assert all(t and t == t.strip() and "\t" not in t and "\n" not in t for t in texts)
    assert not [t for t in texts if "<br" in t or "&quot;" in t]


def test_sentiment_class_balance_is_as_documented():
    readme = (DATA_DIR / "README.md").read_text()
    for split in ("train", "test"):
        _, labels = bundled.read_sentiment(split)
        row = f"| {split} | {len(labels):,} | {int(labels.sum()):,} | {int((labels == 0).sum()):,} |"
        assert row in readme, row


def test_sentiment_dataset_matches_the_plain_reader():
    texts, labels = bundled.read_sentiment("test")
    dataset = bundled.sentiment_dataset("test")
    assert dataset.element_spec == (tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.int32))
    got = list(dataset.as_numpy_iterator())
    assert [t.decode() for t, _ in got] == texts
    np.testing.assert_array_equal([label for _, label in got], labels)


def test_missing_file_raises_file_not_found_naming_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "fine_foods_train.tsv")):
        bundled.read_sentiment("train", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="austen_corpus.txt"):
        bundled.corpus_sentence_dataset(data_dir=tmp_path)
    with pytest.raises(ValueError, match="Unknown sentiment split 'validation'"):
        bundled.sentiment_path("validation")


@pytest.mark.parametrize(
    "content, message",
    [
        ("review\tscore\nGood.\t1\n", r":1: expected the header"),
        ("text\tlabel\nGood.\t1\nBad.\t2\n", r":3: label must be 0 or 1, found '2'"),
        ("text\tlabel\nGood.\t1\nBad\tbad.\t0\n", r":3: expected 2 tab-separated fields, found 3"),
        ("text\tlabel\n \t1\n", r":2: empty text"),
    ],
)
def test_malformed_sentiment_file_names_file_and_line(tmp_path, content, message):
    (tmp_path / "fine_foods_test.tsv").write_text(content)
    with pytest.raises(ValueError, match="fine_foods_test.tsv" + message):
        bundled.read_sentiment("test", data_dir=tmp_path)


# --- TFDS builders ------------------------------------------------------------------------------


def test_tfds_load_sentiment_offline(tmp_path, no_network):
    import bert_tf.datasets  # noqa: F401  (registers the builders)

    splits, info = tfds.load("bundled_sentiment", data_dir=str(tmp_path), download=True, with_info=True)
    assert {name: split.num_examples for name, split in info.splits.items()} == SENTIMENT_SIZES
    assert info.features["label"].names == ["other", "great"]
    for name, dataset in splits.items():
        texts, labels = bundled.read_sentiment(name)
        got = list(dataset.as_numpy_iterator())
        assert len(got) == SENTIMENT_SIZES[name]
        assert [ex["text"].decode() for ex in got[:50]] == texts[:50]
        np.testing.assert_array_equal([ex["label"] for ex in got], labels)


def test_tfds_load_corpus_offline(tmp_path, no_network, documents):
    import bert_tf.datasets  # noqa: F401

    dataset = tfds.load("bundled_corpus", data_dir=str(tmp_path), split="train", download=True)
    got = list(dataset.as_numpy_iterator())
    assert len(got) == len(documents) == sum(CHAPTERS_PER_NOVEL.values())
    for example, document in zip(got, documents):
        assert example["novel"].decode() == document.novel
        assert example["chapter"] == document.chapter
        assert [s.decode() for s in example["sentences"]] == list(document.sentences)


def test_tfds_builder_reports_missing_source_file(tmp_path, monkeypatch, no_network):
    monkeypatch.setattr(bundled, "default_data_dir", lambda: tmp_path / "missing")
    builder = tfds.builder("bundled_sentiment", data_dir=str(tmp_path / "tfds"))
    with pytest.raises(FileNotFoundError, match="fine_foods_train.tsv"):
        builder.download_and_prepare()


# --- Preparation logic (data/prepare_bundled_data.py) ----------------------------------------------


@pytest.mark.parametrize(
    "paragraph, expected",
    [
        (
            "Mr. and Mrs. Weston came. Dr. Perry and St. James were there.",
            ["Mr. and Mrs. Weston came.", "Dr. Perry and St. James were there."],
        ),
        ('"Is it?" said she. "Yes! It is." He left.', ['"Is it?" said she.', '"Yes!', 'It is."', "He left."]),
        (
            "Believe me, F. C. Weston Churchill. Letter No. 97 came.",
            ["Believe me, F. C. Weston Churchill.", "Letter No. 97 came."],
        ),
        ("Nobody but I. It was late.", ["Nobody but I.", "It was late."]),
        (
            "She was going...No, Elinor. Wait.... Then what?",
            ["She was going...", "No, Elinor.", "Wait....", "Then what?"],
        ),
        (
            'It was done, said he.--"My dear Harriet!" No reply (none came.) Then',
            ["It was done, said he.--", '"My dear Harriet!"', "No reply (none came.)", "Then"],
        ),
        ("the   wrapped\nline without an end", ["the wrapped line without an end"]),
    ],
)
def test_split_sentences(paragraph, expected):
    assert prepare.split_sentences(paragraph) == expected


def test_novel_chapters_drops_front_matter_headings_and_notes():
    lines = [
        "EMMA",
        "",
        "By Jane Austen",
        "",
        "VOLUME I",
        "",
        "CHAPTER I",
        "",
        "Emma was _very_",
        "clever. She knew it.*",
        "",
        "* * * * *",
        "",
        "VOLUME II",
        "",
        "CHAPTER I",
        "",
        "[At this point in the first edition, Volume 1 ends.]",
        "",
        "Mr. Elton came.",
        "",
        "*Vide a footnote.",
        "",
        "FINIS",
        "",
        "Text after the end.",
    ]
    chapters = prepare.novel_chapters("Emma", lines, expected_chapters=2)
    assert chapters == [
        ("Volume I, Chapter I", ["Emma was very clever.", "She knew it."]),
        ("Volume II, Chapter I", ["Mr. Elton came."]),
    ]
    with pytest.raises(ValueError, match="Emma: found 2 chapter headings, expected 3"):
        prepare.novel_chapters("Emma", lines, expected_chapters=3)


def test_clean_review():
    raw = 'Great!<br /><br />See <a href="http://www.amazon.com/gp/B0">this</a>\tcaf&eacute; &lt;3\nR\ufffdverie'
    assert prepare.clean_review(raw) == "Great! See this café <3 Rverie"


# --- Part-of-speech tags ---------------------------------------------------------------------------


UNIVERSAL_TAGS = {"NOUN", "VERB", "ADJ", "ADV", "PRON", "DET", "ADP", "NUM", "CONJ", "PRT", "X", "."}


def _brown_pos():
    spec = importlib.util.spec_from_file_location("prepare_brown_pos", DATA_DIR / "prepare_brown_pos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "brown,universal",
    [
        ("nn-tl", "NOUN"),
        ("np$", "NOUN"),
        ("nr", "NOUN"),
        ("bedz", "VERB"),
        ("do*", "VERB"),
        ("md", "VERB"),
        ("ppss+ber", "PRON"),
        ("*", "ADV"),
        ("ql", "ADV"),
        ("wdt", "DET"),
        ("ex", "DET"),
        ("abn", "DET"),
        ("in-hl", "ADP"),
        ("od", "NUM"),
        ("cs", "CONJ"),
        ("to", "PRT"),
        ("rp", "PRT"),
        ("fw-nn", "X"),
        ("uh", "X"),
        ("--", "."),
        ("''", "."),
    ],
)
def test_brown_tags_map_to_universal_tags(brown, universal):
    assert _brown_pos().universal_tag(brown) == universal


def test_bundled_pos_files():
    from bert_tf.probing.data import read_token_file

    train = read_token_file(str(bundled.pos_path("train")), "token_train_file")
    test = read_token_file(str(bundled.pos_path("test")), "token_test_file")
    assert (len(train.sentences), len(test.sentences)) == (2000, 1000)
    assert (train.num_words, test.num_words) == (38503, 18767)
    for data in (train, test):
        assert {tag for tags in data.tags for tag in tags} == UNIVERSAL_TAGS
        assert all(3 <= len(s) <= 50 for s in data.sentences)
    # Drawn from disjoint files: no long sentence is on both sides.
    long_train = {s for s in train.sentences if len(s) >= 10}
    assert not long_train & {s for s in test.sentences if len(s) >= 10}
