"""Paths and readers for the datasets bundled in `data/` at the repository root.

Three datasets ship with the repository (see `data/README.md` for origin,
licence and how they were produced):

* The Jane Austen corpus: six novels, one document per chapter, in the input
  format of `create_pretraining_data` (one sentence per line, a blank line
  between documents), with a TSV listing each document's novel and chapter.
* Fine foods reviews: Amazon food reviews labelled 1 (5 stars, "great") or
  0 ("other"), as `text<TAB>label` TSV files with a header and no quoting.
* Part-of-speech tags: 3,000 Brown corpus sentences (2,000 train, 1,000 test,
  from disjoint files), `word<TAB>tag` per line with the 12 universal tags,
  a blank line between sentences (`experiments.probe_layers`' token task).

The files are found relative to this package, which works for a checkout
installed with `pip install -e .`; every function also takes `data_dir` to
read a copy elsewhere.
"""

import dataclasses
import pathlib

import numpy as np

CORPUS_FILENAME = "austen_corpus.txt"
CORPUS_DOCUMENTS_FILENAME = "austen_corpus_documents.tsv"
SENTIMENT_SPLITS = ("train", "test")
SENTIMENT_LABEL_NAMES = ("other", "great")  # index = label id
_SENTIMENT_FILENAME = "fine_foods_{split}.tsv"
_SENTIMENT_HEADER = "text\tlabel"
_POS_FILENAME = "brown_pos_{split}.conll"
_CORPUS_DOCUMENTS_HEADER = "novel\tchapter\theading\tnum_sentences"


@dataclasses.dataclass(frozen=True)
class CorpusDocument:
    """One chapter of the Austen corpus."""

    novel: str  # e.g. "Emma"
    chapter: int  # 1-based position of the chapter within its novel
    heading: str  # the heading in the source, e.g. "Volume II, Chapter III"
    sentences: tuple  # of str, in order


def default_data_dir():
    """`data/` at the root of the repository this package was installed from."""
    return pathlib.Path(__file__).resolve().parents[2] / "data"


def _existing(path):
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"Bundled data file not found: {path}. The bundled datasets live in data/ at the root "
            "of the bert_tf repository: install bert_tf from a checkout with `pip install -e .`, "
            "or pass data_dir= pointing at a copy of that directory."
        )
    return path


def _dir(data_dir):
    return default_data_dir() if data_dir is None else pathlib.Path(data_dir)


def corpus_path(data_dir=None):
    """Path of the Austen corpus text file (create_pretraining_data input format)."""
    return _existing(_dir(data_dir) / CORPUS_FILENAME)


def corpus_documents_path(data_dir=None):
    """Path of the TSV that names the novel and chapter of each corpus document."""
    return _existing(_dir(data_dir) / CORPUS_DOCUMENTS_FILENAME)


def sentiment_path(split, data_dir=None):
    """Path of the fine foods TSV file of `split` ("train" or "test")."""
    if split not in SENTIMENT_SPLITS:
        raise ValueError(f"Unknown sentiment split {split!r}; expected one of {SENTIMENT_SPLITS}.")
    return _existing(_dir(data_dir) / _SENTIMENT_FILENAME.format(split=split))


def sentiment_paths(data_dir=None):
    """{"train": path, "test": path} of the fine foods TSV files."""
    return {split: sentiment_path(split, data_dir) for split in SENTIMENT_SPLITS}


def pos_path(split, data_dir=None):
    """Path of the Brown part-of-speech file of `split` ("train" or "test"), `word<TAB>tag` lines."""
    if split not in SENTIMENT_SPLITS:
        raise ValueError(f"Unknown part-of-speech split {split!r}; expected one of {SENTIMENT_SPLITS}.")
    return _existing(_dir(data_dir) / _POS_FILENAME.format(split=split))


def _read_lines(path):
    try:
        with open(path, encoding="utf-8", newline="\n") as f:
            return f.read().split("\n")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 ({e})") from e


def read_sentiment(split, data_dir=None):
    """Reads one split of the fine foods reviews.

    Returns:
      (texts, labels): a list of `str` and an int32 array of shape
      `[len(texts)]` holding 1 (great) or 0 (other).

    Raises:
      FileNotFoundError: the file is missing.
      ValueError: the file is malformed; the message names the file and line.
    """
    path = sentiment_path(split, data_dir)
    lines = _read_lines(path)
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != _SENTIMENT_HEADER:
        found = lines[0] if lines else "an empty file"
        raise ValueError(f"{path}:1: expected the header {_SENTIMENT_HEADER!r}, found {found!r}")
    texts, labels = [], []
    for line_number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != 2:
            raise ValueError(f"{path}:{line_number}: expected 2 tab-separated fields, found {len(fields)}")
        text, label = fields
        if label not in ("0", "1"):
            raise ValueError(f"{path}:{line_number}: label must be 0 or 1, found {label!r}")
        if not text.strip():
            raise ValueError(f"{path}:{line_number}: empty text")
        texts.append(text)
        labels.append(int(label))
    return texts, np.asarray(labels, dtype=np.int32)


def read_corpus_documents(data_dir=None):
    """Reads the Austen corpus as a list of `CorpusDocument`, in file order.

    The corpus file and its documents TSV are checked against each other (one
    row per document, matching sentence counts), so a truncated or edited file
    fails here with the file and line named.
    """
    path = corpus_path(data_dir)
    documents_path = corpus_documents_path(data_dir)

    blocks = []  # (first line number, sentences)
    current, start = [], None
    for line_number, line in enumerate(_read_lines(path), start=1):
        if line.strip():
            if start is None:
                start = line_number
            current.append(line)
        elif current:
            blocks.append((start, current))
            current, start = [], None
    if current:
        blocks.append((start, current))

    rows = _read_lines(documents_path)
    if rows and rows[-1] == "":
        rows.pop()
    if not rows or rows[0] != _CORPUS_DOCUMENTS_HEADER:
        raise ValueError(f"{documents_path}:1: expected the header {_CORPUS_DOCUMENTS_HEADER!r}")
    if len(rows) - 1 != len(blocks):
        raise ValueError(f"{documents_path} lists {len(rows) - 1} documents but {path} has {len(blocks)}")

    documents = []
    for row_number, (row, (first_line, sentences)) in enumerate(zip(rows[1:], blocks), start=2):
        fields = row.split("\t")
        if len(fields) != 4 or not fields[1].isdigit() or not fields[3].isdigit():
            raise ValueError(
                f"{documents_path}:{row_number}: expected novel, chapter, heading, num_sentences; found {row!r}"
            )
        novel, chapter, heading, num_sentences = fields
        if int(num_sentences) != len(sentences):
            raise ValueError(
                f"{documents_path}:{row_number}: says {num_sentences} sentences, but the "
                f"document starting at {path}:{first_line} has {len(sentences)}"
            )
        documents.append(CorpusDocument(novel, int(chapter), heading, tuple(sentences)))
    return documents


def sentiment_dataset(split, data_dir=None):
    """A `tf.data.Dataset` of `(text, label)` pairs: scalar tf.string and tf.int32.

    The file is read and validated eagerly, so a malformed file fails here and
    not in the middle of training.
    """
    import tensorflow as tf

    texts, labels = read_sentiment(split, data_dir)
    return tf.data.Dataset.from_tensor_slices((tf.constant(texts, tf.string), tf.constant(labels)))


def corpus_sentence_dataset(data_dir=None):
    """A `tf.data.Dataset` of the corpus sentences (scalar tf.string), blank lines removed.

    Suited to vocabulary learning, e.g. tensorflow_text's
    `bert_vocab_from_dataset(corpus_sentence_dataset().batch(1000), ...)`.
    """
    import tensorflow as tf

    path = corpus_path(data_dir)
    lines = tf.data.TextLineDataset(str(path))
    return lines.filter(lambda line: tf.strings.length(tf.strings.strip(line)) > 0)
