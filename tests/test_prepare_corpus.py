"""`bert_tf_prepare_corpus`: plain text -> one sentence per line, documents, a held-out split; bad input."""

import re

import pytest

from bert_tf.pretraining_data import corpus_preparation as corpus
from tests.helpers.absl_flags import run_main
from tfrecords_tools import prepare_corpus

BOOK = """CHAPTER I

It is a truth universally acknowledged, that a single man in
possession of a good fortune, must be in want of a wife. Mr. Bennet
agreed. "Indeed?" said she.

However little known the feelings or views of such a man may be! His
lady said so.

CHAPTER II

Mr. Bennet was among the earliest of those who waited on Mr. Bingley.
He had always intended to visit him.
"""


def _documents(text):
    return [block.splitlines() for block in text.split("\n\n") if block.strip()]


@pytest.mark.parametrize(
    "text,sentences",
    [
        ("Mr. Darcy bowed. Then he left.", ["Mr. Darcy bowed.", "Then he left."]),
        ("J. R. R. Tolkien wrote it. It sold.", ["J. R. R. Tolkien wrote it.", "It sold."]),
        ('"Is it?" she asked. "Yes!" He smiled.', ['"Is it?" she asked.', '"Yes!"', "He smiled."]),
        ("It costs 3.5 dollars, e.g. Today. Yes.", ["It costs 3.5 dollars, e.g. Today.", "Yes."]),
        ("a line\nwrapped here. Next one", ["a line wrapped here.", "Next one"]),
        ("see the results. then more", ["see the results. then more"]),  # lower case: no split
        ("这是第一句。这是第二句！", ["这是第一句。", "这是第二句！"]),
        ("", []),
    ],
)
def test_sentence_rule(text, sentences):
    assert corpus.split_sentences(text) == sentences


def test_held_out_documents_are_round_of_the_fraction_spread_evenly():
    held = [i for i in range(100) if corpus.is_held_out(i, 0.05)]
    assert len(held) == 5 and held == [9, 29, 49, 69, 89]
    assert not any(corpus.is_held_out(i, 0.0) for i in range(100))


def test_book_by_chapters_with_a_held_out_chapter(tmp_path, capsys, caplog):
    caplog.set_level("INFO", logger="absl")
    book = tmp_path / "book.txt"
    book.write_text(BOOK, encoding="utf-8")
    train, heldout = tmp_path / "out" / "train.txt", tmp_path / "out" / "heldout.txt"
    flags = [
        f"--input_file={book}",
        f"--output_train={train}",
        f"--output_heldout={heldout}",
        "--heldout_fraction=0.5",
        "--document_start_regex=^CHAPTER ",
    ]
    assert run_main(prepare_corpus, flags) == 0
    # With a fraction of 0.5, the first of each two documents is held out.
    heldout_docs, train_docs = _documents(heldout.read_text("utf-8")), _documents(train.read_text("utf-8"))
    assert heldout_docs == [
        [
            "CHAPTER I",
            "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be "
            "in want of a wife.",
            "Mr. Bennet agreed.",
            '"Indeed?" said she.',
            "However little known the feelings or views of such a man may be!",
            "His lady said so.",
        ]
    ]
    assert train_docs == [
        [
            "CHAPTER II",
            "Mr. Bennet was among the earliest of those who waited on Mr. Bingley.",
            "He had always intended to visit him.",
        ]
    ]
    assert re.search(r"Wrote 1 documents \(3 sentences\) .* and 1 held-out documents \(6 sentences\)", caplog.text)
    # Run again: the outputs exist and are refused (one line, status 2), and left as they were.
    before = train.read_text("utf-8")
    assert run_main(prepare_corpus, flags) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"prepare_corpus: error: --output_train: {train} exists; choose another file or pass --overwrite"
    )
    assert train.read_text("utf-8") == before
    assert run_main(prepare_corpus, [*flags, "--overwrite", "--document_boundary=paragraph"]) == 0


def test_paragraphs_and_lines_as_documents(tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(BOOK, encoding="utf-8")
    train = tmp_path / "train.txt"
    assert (
        run_main(
            prepare_corpus,
            [
                f"--input_file={book}",
                f"--output_train={train}",
                "--heldout_fraction=0",
                "--min_sentences_per_document=2",
            ],
        )
        == 0
    )
    # Paragraphs are documents; the lone headings are dropped.
    assert [len(doc) for doc in _documents(train.read_text("utf-8"))] == [3, 2, 2]
    lines = tmp_path / "lines.txt"
    lines.write_text("First review. It was good.\nSecond one!\n", encoding="utf-8")
    assert (
        run_main(
            prepare_corpus,
            [
                f"--input_file={lines}",
                f"--output_train={train}",
                "--heldout_fraction=0",
                "--document_boundary=line",
                "--overwrite",
            ],
        )
        == 0
    )
    assert _documents(train.read_text("utf-8")) == [["First review.", "It was good."], ["Second one!"]]


@pytest.mark.parametrize(
    "content,extra,message",
    [
        (b"ok\n\xff\xfe bad\n", [], r"--input_file: .*book.txt:2: not valid UTF-8"),
        (b"", [], r"--input_file: no text in .*book.txt"),
        (b"text.\n", ["--heldout_fraction=1"], r"--heldout_fraction must be in \[0, 1\), got 1.0"),
        (b"text.\n", ["--document_start_regex=("], r"--document_start_regex='\(': "),
        (b"text.\n", ["--output_heldout="], r"--output_heldout is required"),
    ],
)
def test_bad_input_is_one_line_and_status_2_and_writes_nothing(tmp_path, capsys, content, extra, message):
    book = tmp_path / "book.txt"
    book.write_bytes(content)
    train, heldout = tmp_path / "train.txt", tmp_path / "heldout.txt"
    flags = [f"--input_file={book}", f"--output_train={train}", f"--output_heldout={heldout}", *extra]
    assert run_main(prepare_corpus, flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(f"prepare_corpus: error: {message}.*", err[-1]), err[-1]
    assert not train.exists() and not heldout.exists()
