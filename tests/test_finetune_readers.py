"""Fine-tuning data readers: formats, columns, and errors that name the file and line or record."""

import json

import pytest

from bert_tf.data import finetuning_readers as readers
from bert_tf.data.examples import TaggingExample, TextExample
from bert_tf.errors import DataError
from bert_tf.tasks.word_alignment import piece_char_spans, split_on_whitespace


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_tsv_by_header_names_without_quoting(tmp_path):
    # GLUE TSVs contain stray quotes; they must stay part of the text.
    path = write(tmp_path / "train.tsv", 'id\tsentence\tlabel\n1\tit "was good\tpos\n2\tbad\tneg\n')
    examples = readers.read_text_examples(path, "sentence", label_column="label")
    assert examples == [
        TextExample("train.tsv:2", 'it "was good', None, "pos"),
        TextExample("train.tsv:3", "bad", None, "neg"),
    ]
    assert readers.label_list_from_examples(examples) == ["neg", "pos"]


def test_tsv_by_index_without_header_and_pairs(tmp_path):
    path = write(tmp_path / "pairs.tsv", "a one\tb one\t1\na two\tb two\t0\n")
    examples = readers.read_text_examples(path, 0, 1, 2, has_header=False)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [("a one", "b one", "1"), ("a two", "b two", "0")]
    assert readers.label_list_from_examples(examples) == ["0", "1"]


def test_csv_with_quoting_and_regression(tmp_path):
    path = write(tmp_path / "scores.csv", 's1,s2,score\n"hello, world",x,3.5\ny,z,-1\n')
    examples = readers.read_text_examples(path, "s1", "s2", "score", regression=True)
    assert [(e.text_a, e.label) for e in examples] == [("hello, world", 3.5), ("y", -1.0)]


def test_jsonl_and_unlabelled_prediction_file(tmp_path):
    path = write(tmp_path / "data.jsonl", '{"text": "a", "label": 1}\n\n{"text": "b", "label": 0}\n')
    examples = readers.read_text_examples(path, "text", label_column="label")
    assert [(e.guid, e.label) for e in examples] == [("data.jsonl:1", "1"), ("data.jsonl:3", "0")]
    path = write(tmp_path / "test.jsonl", '{"text": "a"}\n')
    examples = readers.read_text_examples(path, "text", label_column="label", require_labels=False)
    assert examples[0].label is None
    path = write(tmp_path / "test.tsv", "text\nx\n")
    assert readers.read_text_examples(path, "text", label_column="label", require_labels=False)[0].label is None
    path = write(tmp_path / "test_no_header.tsv", "x\ny\n")
    examples = readers.read_text_examples(path, 0, label_column=1, has_header=False, require_labels=False)
    assert [(e.text_a, e.label) for e in examples] == [("x", None), ("y", None)]
    with pytest.raises(DataError, match="row has 1 fields, no label column 1"):
        readers.read_text_examples(path, 0, label_column=1, has_header=False)
    # A byte-order mark is not part of the first column's name.
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufefftext,label\nx,1\n".encode("utf-8"))
    assert readers.read_text_examples(str(path), "text", label_column="label")[0].label == "1"


@pytest.mark.parametrize(
    "name,content,kwargs,message",
    [
        ("a.tsv", "sentence\tlabel\nx\tpos\n", dict(text_a_column="text"), r"a.tsv: no text_a column 'text'"),
        ("b.tsv", "sentence\tlabel\nx\tpos\ny\n", dict(text_a_column="sentence"), r"b.tsv:3: row has 1 fields"),
        (
            "c.jsonl",
            '{"text": "x", "label": 1}\n{"text": "y", "label": 1\n',
            dict(text_a_column="text"),
            r"c.jsonl:2: not a valid JSON line",
        ),
        ("d.jsonl", "[1, 2]\n", dict(text_a_column="text"), r"d.jsonl:1: expected a JSON object"),
        (
            "e.jsonl",
            '{"text": "x", "label": 1}\n{"label": 1}\n',
            dict(text_a_column="text"),
            r"e.jsonl:2: no text_a key 'text'",
        ),
        ("f.jsonl", '{"text": 5, "label": 1}\n', dict(text_a_column="text"), r"f.jsonl:1: text_a must be a string"),
        (
            "g.csv",
            "t,score\nx,high\n",
            dict(text_a_column="t", label_column="score", regression=True),
            r"g.csv:2: regression label 'high' is not a number",
        ),
        ("h.tsv", "", dict(text_a_column=0), r"h.tsv: no examples"),
        ("i.tsv", "a\tb\n", dict(text_a_column="a", has_header=False), r"i.tsv: text_a column 'a' is a name"),
        ("data.xml", "x", dict(text_a_column=0), r"Cannot tell the format of .*data.xml"),
    ],
)
def test_text_file_errors_name_file_and_line(tmp_path, name, content, kwargs, message):
    path = write(tmp_path / name, content)
    kwargs.setdefault("label_column", "label")
    with pytest.raises(DataError, match=message):
        readers.read_text_examples(path, **kwargs)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        readers.read_text_examples(str(tmp_path / "nope.tsv"), "a")


def test_conll(tmp_path):
    path = write(
        tmp_path / "train.conll",
        "-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\n\nPeter NNP B-PER\nBlackburn NNP I-PER\n\n\n",
    )
    examples = readers.read_conll(path)
    assert examples == [
        TaggingExample("train.conll:3", ("EU", "rejects"), ("B-ORG", "O")),
        TaggingExample("train.conll:6", ("Peter", "Blackburn"), ("B-PER", "I-PER")),
    ]
    assert readers.tag_list_from_examples(examples) == ["O", "B-ORG", "B-PER", "I-PER"]
    unlabelled = readers.read_conll(write(tmp_path / "test.conll", "EU\nrejects\n\nPeter\n"), require_labels=False)
    assert [e.labels for e in unlabelled] == [None, None]
    with pytest.raises(DataError, match=r"bad.conll:2: line has no tag column"):
        readers.read_conll(write(tmp_path / "bad.conll", "EU B-ORG\nrejects\n"))


def squad_json(qas, context="The cat sat on the mat."):
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_squad_reader(tmp_path):
    qas = [
        {"id": "a", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "b", "question": "Where?", "answers": [], "is_impossible": True},
    ]
    path = write(tmp_path / "v2.json", json.dumps(squad_json(qas)))
    examples = readers.read_squad(path, training=True, version_2_with_negative=True)
    assert [(e.qas_id, e.is_impossible, [a.text for a in e.answers]) for e in examples] == [
        ("a", False, ["cat"]),
        ("b", True, []),
    ]
    with pytest.raises(DataError, match=r"qas\[1\] \(id b\): a training question needs an answer .*version_2"):
        readers.read_squad(path, training=True)


def test_squad_misplaced_training_answer_is_skipped(tmp_path, caplog):
    qas = [
        {"id": "a", "question": "Who?", "answers": [{"text": "cat", "answer_start": 0}]},
        {"id": "b", "question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]},
    ]
    path = write(tmp_path / "train.json", json.dumps(squad_json(qas)))
    examples = readers.read_squad(path, training=True)
    assert [e.qas_id for e in examples] == ["b"]
    assert "id a" in caplog.text and "not found" in caplog.text
    # For evaluation every question is kept.
    assert len(readers.read_squad(path)) == 2


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", r"not valid JSON"),
        (json.dumps({"data": 1}), r"'data' list"),
        (
            json.dumps(squad_json([{"id": "q7", "answers": []}])),
            r"paragraphs\[0\]\.qas\[0\] \(id q7\): missing 'question'",
        ),
        (
            json.dumps(squad_json([{"id": "q8", "question": "?", "answers": [{"text": "x", "answer_start": 99}]}])),
            r"id q8\)\.answers\[0\]: answer_start 99 is outside the context",
        ),
        (
            json.dumps(squad_json([{"id": "q9", "question": "?", "answers": [{"text": "x", "answer_start": "4"}]}])),
            r"id q9\)\.answers\[0\]: 'answer_start' has type str",
        ),
    ],
)
def test_squad_errors_name_the_record(tmp_path, content, message):
    path = write(tmp_path / "bad.json", content)
    with pytest.raises(DataError, match=message):
        readers.read_squad(path)


def test_whitespace_split_keeps_character_offsets():
    words, starts = split_on_whitespace("  Hello\u00a0 world\tagain ")
    assert words == ["Hello", "world", "again"]
    assert starts == [2, 9, 15]


def test_piece_character_spans():
    spans = piece_char_spans("Smiths'", ["smiths", "'"], [["smith", "##s"], ["'"]], lower_case=True)
    assert spans == [(0, 5), (5, 6), (6, 7)]
    # Accents are stripped by the uncased tokenizer; the span still covers the original characters.
    assert piece_char_spans("Héllo,", ["hello", ","], [["hello"], [","]], True) == [(0, 5), (5, 6)]
    assert piece_char_spans("Cafe\u0301", ["cafe"], [["cafe"]], True) == [(0, 5)]
    # Cased: no normalisation, so "Héllo" matches only itself.
    assert piece_char_spans("Héllo", ["Héllo"], [["H", "##éllo"]], lower_case=False) == [(0, 1), (1, 5)]
    # An [UNK] covers its basic word; the other basic words keep their own spans.
    assert piece_char_spans("Bob's", ["bob", "'", "s"], [["bob"], ["'"], ["[UNK]"]], True) == [(0, 3), (3, 4), (4, 5)]
    # Characters the tokenizer deletes (a zero-width space) stay with the piece before them.
    assert piece_char_spans("ab\u200bc", ["abc"], [["ab", "##c"]], True) == [(0, 3), (3, 4)]
    # Basic words that do not match the text (another normalisation) fall back to the whole word.
    assert piece_char_spans("x\u00bdy", ["x1⁄2y"], [["[UNK]"]], True) == [(0, 3)]
    assert piece_char_spans("ab", ["a", "b", "c"], [["a"], ["b"]], True) == [(0, 2)] * 2


def test_tokenizer_word_pieces_align_with_the_text(tmp_path):
    from bert_tf.tasks.task_tokenizer import TaskTokenizer
    from tests.fixtures.finetune import synthetic

    tokenizer = TaskTokenizer(synthetic.write_vocab(str(tmp_path / "vocab.txt")))
    words = ["Bob's", "PLAYING,", "Walker", "zebra"]
    entries = tokenizer.word_pieces(words)
    pieces = [tokenizer.tokens(tokenizer.flat_pieces(entry)) for entry in entries]
    assert pieces == [["bob", "'", "[UNK]"], ["play", "##ing", ","], ["walk", "##er"], ["[UNK]"]]
    spans = [tokenizer.piece_spans(word, entry) for word, entry in zip(words, entries)]
    assert spans == [[(0, 3), (3, 4), (4, 5)], [(0, 4), (4, 7), (7, 8)], [(0, 4), (4, 6)], [(0, 5)]]


def test_a_reader_names_the_default_columns_it_used():
    from bert_tf.data.finetuning_data import TextExamplesReader
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig

    single = TextExamplesReader("classification", FinetuningDataConfig(text_a_column="review"), pairs=False)
    assert single.columns_used() == {"text_a_column": "review", "text_b_column": None, "label_column": "label"}
    pairs = TextExamplesReader("sentence_pair_classification", FinetuningDataConfig(label_column=2), pairs=True)
    assert pairs.columns_used() == {"text_a_column": "text_a", "text_b_column": "text_b", "label_column": 2}
