"""Regenerates the bundled datasets in `data/` from two Debian packages.

Run by hand when the data has to be rebuilt (CI never runs it). It needs the
PyPI package `rdata` (and its pandas dependency), which is not a dependency of
bert_tf, so use a scratch virtual environment:

    python3 -m venv /tmp/rdata_venv && /tmp/rdata_venv/bin/pip install rdata
    apt-get update
    cd /tmp && apt-get download r-cran-janeaustenr r-cran-modeldata
    dpkg-deb -x r-cran-janeaustenr_*.deb /tmp/bundled_src
    dpkg-deb -x r-cran-modeldata_*.deb /tmp/bundled_src
    /tmp/rdata_venv/bin/python data/prepare_bundled_data.py --source_root=/tmp/bundled_src

Outputs (all written to a temporary name, then renamed):
  austen_corpus.txt            one sentence per line, a blank line between
                               documents (chapters): the input format of
                               `create_pretraining_data`.
  austen_corpus_documents.tsv  one row per document, in file order: novel,
                               chapter index, original heading, sentence count.
  fine_foods_train.tsv         text<TAB>label with a header, no quoting.
  fine_foods_test.tsv
  SHA256SUMS                   `sha256sum -c` compatible checksums of the above.

The sentence splitter and the cleaning functions import nothing outside the
standard library, so the tests can exercise them without `rdata`.
"""

import argparse
import gzip
import hashlib
import html
import lzma
import os
import re
import struct
import sys
import tempfile
import warnings
import zlib

# ---------------------------------------------------------------------------
# Reading R lazy-load databases (data/Rdata.rdx + data/Rdata.rdb).
# ---------------------------------------------------------------------------


def _parse_r_object(raw_bytes):
    import rdata  # only needed here; see module docstring

    with warnings.catch_warnings():
        # rdata warns that headerless lazy-load entries are "assumed RDS" (they
        # are) and about R classes it converts generically.
        warnings.simplefilter("ignore")
        parsed = rdata.parser.parse_data(raw_bytes, expand_altrep=True)
        return rdata.conversion.convert(parsed)


def _decompress_lazyload_blob(blob, compression, where):
    """Decodes one entry of an R lazy-load .rdb file.

    R writes a 4-byte big-endian uncompressed length, then either a zlib stream
    (compression 1) or a type byte and the payload (compression 2 or 3):
    'Z' is a *raw* LZMA2 stream, '2' bzip2, '1' zlib, '0' stored.
    """
    (expected_length,) = struct.unpack(">I", blob[:4])
    if compression == 1:
        data = zlib.decompress(blob[4:])
    else:
        kind, body = blob[4:5], blob[5:]
        if kind == b"Z":
            decoder = lzma.LZMADecompressor(
                format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
            )
            data = decoder.decompress(body)
        elif kind == b"2":
            import bz2

            data = bz2.decompress(body)
        elif kind == b"1":
            data = zlib.decompress(body)
        elif kind == b"0":
            data = body
        else:
            raise ValueError(f"{where}: unknown lazy-load compression type {kind!r}")
    if len(data) != expected_length:
        raise ValueError(f"{where}: decompressed {len(data)} bytes, header says {expected_length}")
    return data


def read_lazyload_object(package_dir, name):
    """Returns R object `name` from `<package_dir>/data/Rdata.{rdx,rdb}`, converted by rdata."""
    base = os.path.join(package_dir, "data", "Rdata")
    for suffix in (".rdx", ".rdb"):
        if not os.path.isfile(base + suffix):
            raise FileNotFoundError(f"R lazy-load database file not found: {base + suffix}")
    with open(base + ".rdx", "rb") as f:
        index = _parse_r_object(gzip.decompress(f.read()))
    variables = index["variables"]
    if name not in variables:
        raise KeyError(f"{base}.rdx has no object {name!r}; it has {sorted(map(str, variables))}")
    offset, length = (int(v) for v in variables[name])
    compression = int(index["compressed"][0])
    with open(base + ".rdb", "rb") as f:
        f.seek(offset)
        blob = f.read(length)
    return _parse_r_object(_decompress_lazyload_blob(blob, compression, f"{base}.rdb[{name}]"))


# ---------------------------------------------------------------------------
# Sentence splitting.
# ---------------------------------------------------------------------------

# Words that end in a period without ending the sentence. "No." is absent on
# purpose: "No. 97" is kept whole because a digit never starts a sentence here,
# while "No. He ..." must split.
ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "messrs",
        "ms",
        "dr",
        "st",
        "rev",
        "hon",
        "col",
        "capt",
        "gen",
        "lt",
        "sgt",
        "prof",
        "esq",
        "jr",
        "sr",
        "vol",
        "viz",
        "mme",
        "mlle",
        # Abbreviated given names in letter signatures ("EDW. GARDINER.").
        "edw",
        "wm",
        "geo",
        "thos",
        "jas",
        "chas",
        "jno",
    }
)

_CANDIDATE_END = re.compile(
    r"""
    (?P<punct>\.{3,}|[.!?]+)     # terminal run; an ellipsis counts as one
    (?P<close>["')\]]*)           # closing quotes and brackets stay with the sentence
    (?P<dash>(?:--)?)             # Austen writes 'said he.--"My dear'
    (?P<gap>\s*)
    (?=["'(\[]*[A-Z])             # the next sentence starts with a capital
    """,
    re.VERBOSE,
)
_WORD_BEFORE = re.compile(r"([A-Za-z]+)$")


def _is_abbreviation(text_before, punct):
    if punct != ".":
        return False
    match = _WORD_BEFORE.search(text_before)
    if match is None:
        return False
    word = match.group(1)
    if word.lower() in ABBREVIATIONS:
        return True
    # A single capital is an initial ("A. W.", "F. C. Weston"), except the
    # pronoun "I", which ends sentences ("...than I. It was").
    return len(word) == 1 and word.isupper() and word != "I"


def split_sentences(paragraph):
    """Splits one paragraph of running text into sentences.

    A sentence ends at `.`, `!`, `?` or an ellipsis (plus any closing quotes
    or brackets and an optional `--`) when the next non-quote character is a
    capital letter. Whitespace must follow, except after an ellipsis or a
    dash ("going...No", 'he.--"My'). Titles, initials and the abbreviations in
    `ABBREVIATIONS` do not end a sentence.
    """
    text = " ".join(paragraph.split())
    sentences = []
    start = 0
    for match in _CANDIDATE_END.finditer(text):
        punct = match.group("punct")
        if not match.group("gap") and not (punct.startswith("...") or match.group("dash")):
            continue
        if _is_abbreviation(text[: match.start()], punct):
            continue
        sentence = text[start : match.end("dash")].strip()
        if sentence:
            sentences.append(sentence)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


# ---------------------------------------------------------------------------
# Jane Austen corpus.
# ---------------------------------------------------------------------------

# (R object name, title, number of chapters in the novel).
NOVELS = (
    ("sensesensibility", "Sense and Sensibility", 50),
    ("prideprejudice", "Pride and Prejudice", 61),
    ("mansfieldpark", "Mansfield Park", 48),
    ("emma", "Emma", 55),
    ("northangerabbey", "Northanger Abbey", 31),
    ("persuasion", "Persuasion", 24),
)

_CHAPTER_HEADING = re.compile(r"^chapter\s+([ivxlc]+|\d+)\.?$", re.IGNORECASE)
_VOLUME_HEADING = re.compile(r"^volume\s+([ivx]+|\d+)\.?$", re.IGNORECASE)
# "THE END"/"FINIS" close a novel; Northanger Abbey is followed by a modern
# editorial note from a Signet edition, which is not Austen's text.
_END_OF_NOVEL = re.compile(r"^(the end|finis|a note on the text)\.?$", re.IGNORECASE)


def _paragraphs(lines):
    paragraph = []
    for line in lines:
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            yield paragraph
            paragraph = []
    if paragraph:
        yield paragraph


def _clean_paragraph(text):
    """Returns the paragraph without transcription marks, or None to drop it."""
    # Scene breaks ("* * * * *") and Austen's single footnote, which the
    # Gutenberg text places after the last chapter ("*Vide a letter ...").
    if text.startswith("*"):
        return None
    # Notes of the Gutenberg editors about the volume breaks of the editions.
    if text.startswith("[") and text.endswith("]") and "edition" in text.lower():
        return None
    # `_word_` marks italics; `*` a footnote reference ("declared,*").
    text = text.replace("_", "").replace("*", "")
    text = " ".join(text.split())
    return text or None


def novel_chapters(title, lines, expected_chapters):
    """Splits one novel into chapters.

    Args:
      title: the novel's title, for error messages.
      lines: the text lines of the novel as shipped by janeaustenr (wrapped at
        about 70 characters, blank lines between paragraphs).
      expected_chapters: the number of chapters the novel must have.

    Returns:
      A list of (heading, [sentence, ...]) per chapter, where heading is e.g.
      "Volume II, Chapter III" or "Chapter 7". Front matter (title, author,
      dedication), volume headings and end markers are dropped.
    """
    chapters = []
    volume = None
    current = None
    for block in _paragraphs(lines):
        first = " ".join(block[0].split())
        if len(block) == 1 and _END_OF_NOVEL.match(first):
            break
        if len(block) == 1 and _VOLUME_HEADING.match(first):
            volume = _VOLUME_HEADING.match(first).group(1).upper()
            continue
        if len(block) == 1 and _CHAPTER_HEADING.match(first):
            number = _CHAPTER_HEADING.match(first).group(1).upper()
            heading = f"Chapter {number}" if volume is None else f"Volume {volume}, Chapter {number}"
            current = (heading, [])
            chapters.append(current)
            continue
        if current is None:
            continue  # front matter before the first chapter
        text = _clean_paragraph(" ".join(block))
        if text is not None:
            current[1].extend(split_sentences(text))
    if len(chapters) != expected_chapters:
        raise ValueError(f"{title}: found {len(chapters)} chapter headings, expected {expected_chapters}")
    for heading, sentences in chapters:
        if not sentences:
            raise ValueError(f"{title}, {heading}: chapter has no text")
    return chapters


# ---------------------------------------------------------------------------
# Fine foods reviews.
# ---------------------------------------------------------------------------

# Only the tags that occur in the reviews: a literal "<3" or "<1 gram" (written
# as "&lt;" upstream) must survive.
_HTML_TAG = re.compile(r"</?(?:a|br|p|span)\b[^<>]*>", re.IGNORECASE)
LABEL_NAMES = ("other", "great")  # label id = index


def clean_review(text):
    """Plain one-line text from an Amazon review.

    Drops HTML tags (`<br />`, `<a href=...>`; link text is kept), decodes
    entities (`&eacute;`), drops U+FFFD (characters already lost upstream), and
    turns every run of whitespace (tabs, newlines included) into one space.
    """
    text = _HTML_TAG.sub(" ", text)
    text = html.unescape(text).replace("\ufffd", "")
    return " ".join(text.split())


# ---------------------------------------------------------------------------
# Writing.
# ---------------------------------------------------------------------------


def _write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp_path, 0o644)  # mkstemp creates 0600
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def build_corpus(janeaustenr_dir):
    """Returns (corpus_text, documents_tsv_text, stats)."""
    corpus_blocks = []
    manifest = ["novel\tchapter\theading\tnum_sentences"]
    num_sentences = num_words = 0
    for object_name, title, expected in NOVELS:
        lines = [str(x) for x in read_lazyload_object(janeaustenr_dir, object_name)]
        for index, (heading, sentences) in enumerate(novel_chapters(title, lines, expected), start=1):
            corpus_blocks.append("\n".join(sentences) + "\n")
            manifest.append(f"{title}\t{index}\t{heading}\t{len(sentences)}")
            num_sentences += len(sentences)
            num_words += sum(len(s.split()) for s in sentences)
    stats = {"documents": len(corpus_blocks), "sentences": num_sentences, "words": num_words}
    return "\n".join(corpus_blocks), "\n".join(manifest) + "\n", stats


def build_sentiment(modeldata_dir):
    """Returns {split: (tsv_text, stats)} for the small_fine_foods splits."""
    out = {}
    for split, object_name in (("train", "training_data"), ("test", "testing_data")):
        frame = read_lazyload_object(modeldata_dir, object_name)
        rows = ["text\tlabel"]
        counts = [0, 0]
        for review, score in zip(frame["review"], frame["score"]):
            if str(score) not in LABEL_NAMES:
                raise ValueError(f"{object_name}: unexpected score {score!r}")
            label = LABEL_NAMES.index(str(score))
            text = clean_review(str(review))
            if not text:
                raise ValueError(f"{object_name}: review is empty after cleaning: {review!r}")
            rows.append(f"{text}\t{label}")
            counts[label] += 1
        out[split] = (
            "\n".join(rows) + "\n",
            {"examples": len(rows) - 1, "label_0_other": counts[0], "label_1_great": counts[1]},
        )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source_root", required=True, help="Directory the .deb files were unpacked into with dpkg-deb -x."
    )
    parser.add_argument("--output_dir", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args(argv)

    site_library = os.path.join(args.source_root, "usr", "lib", "R", "site-library")
    corpus, manifest, corpus_stats = build_corpus(os.path.join(site_library, "janeaustenr"))
    sentiment = build_sentiment(os.path.join(site_library, "modeldata"))

    outputs = {"austen_corpus.txt": corpus, "austen_corpus_documents.tsv": manifest}
    for split, (text, _) in sentiment.items():
        outputs[f"fine_foods_{split}.tsv"] = text
    for name, text in outputs.items():
        _write_atomically(os.path.join(args.output_dir, name), text)
    sums = "".join(
        f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}  {name}\n" for name, text in sorted(outputs.items())
    )
    _write_atomically(os.path.join(args.output_dir, "SHA256SUMS"), sums)

    print("corpus:", corpus_stats)
    for split, (_, stats) in sentiment.items():
        print(f"fine_foods {split}:", stats)
    for name in sorted(outputs):
        print(f"{name}: {os.path.getsize(os.path.join(args.output_dir, name))} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
