"""Plain text -> the pretraining writer's input: one sentence per line, a blank line between documents.

`prepare_corpus` reads plain text (a book, articles, a dump with one document per line), cuts it into
documents, splits each into sentences with `split_sentences`, and writes every document to a training file
or, for a `heldout_fraction` of them, to a held-out file, which `create_pretraining_data` turns into the
evaluation TFRecords. It streams: memory holds one document, whatever the corpus size.

    >>> split_sentences('Mr. Darcy bowed. "Indeed?" said she. It was 3.5 p.m. on the 2nd.')
    ['Mr. Darcy bowed.', '"Indeed?" said she.', 'It was 3.5 p.m. on the 2nd.']

Documents (`document_boundary`):
* "paragraph": a blank line ends a document (wrapped lines of a paragraph are joined with a space);
* "line": every non-blank line is a document (a dump with one article or review per line);
* "file": every input file is one document (its paragraphs are kept as sentence boundaries).
With `document_start_regex`, a line that matches starts a new document (e.g. `^CHAPTER ` for a book) and
blank lines only end paragraphs.

The sentence rule (pure Python, no model or data to download): a sentence ends at `.`, `!`, `?` or `…`
(with any closing quotes or brackets after it) followed by white space and then an upper-case letter, a
digit or an opening quote or bracket; or at a CJK full stop, `！` or `？`. A period does not end a sentence
after a common English abbreviation (`Mr.`, `Dr.`, `e.g.`, `etc.`, months, ...; see `ABBREVIATIONS`) or
after a single capital letter (initials, as in "J. R. R. Tolkien"). Limits: it is written for English and
other languages that mark sentences the same way; an abbreviation outside the list followed by a capitalised
word is split ("Gov. Smith"); a sentence that starts with a lower-case letter is joined to the one before it;
text without sentence punctuation (lists, verse, headings) stays one "sentence" per paragraph or line;
a word hyphenated across a line break keeps a space ("exam- ple").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator

DOCUMENT_BOUNDARIES = ("paragraph", "line", "file")

# Lower-cased, without their final period: a period after one of these does not end a sentence.
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt messrs mme mlle rev hon gen col capt lt sgt cmdr adm gov pres sen rep
    e.g i.e etc cf vs al viz approx ca fig figs vol vols no nos pp p ed eds ch sec art dept univ inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec a.m p.m u.s u.k""".split()
)

# A candidate end: sentence punctuation, closing quotes/brackets, white space, then what may start a sentence.
_END = re.compile(r"""([.!?…]+["'”’)\]]*)(\s+)(?=["'“‘(\[]*[A-Z0-9À-ÖØ-Þ])""")
_CJK_END = re.compile(r"([。！？]+[」』”’）]*)")
_LAST_WORD = re.compile(r"(\S+)$")


def _ends_with_abbreviation(text: str) -> bool:
    """Whether `text` (up to and including a period) ends with an abbreviation or an initial."""
    match = _LAST_WORD.search(text)
    if not match:
        return False
    word = match.group(1).lstrip("\"'“‘([").rstrip(".")
    if len(word) == 1 and word.isalpha() and word.isupper():
        return True  # an initial
    return word.lower() in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` (one paragraph; line breaks are white space) by the module's rule."""
    text = " ".join(text.split())
    if not text:
        return []
    pieces = []
    start = 0
    for match in _END.finditer(text):
        end = match.end(1)
        if match.group(1).startswith(".") and len(match.group(1).rstrip("\"'”’)]")) == 1:
            if _ends_with_abbreviation(text[start:end]):
                continue
        pieces.append(text[start:end])
        start = match.end()
    pieces.append(text[start:])
    sentences = []
    for piece in pieces:
        sentences.extend(part.strip() for part in _CJK_END.sub("\\1\n", piece).split("\n") if part.strip())
    return sentences


def _paragraphs(lines: Iterable[str]) -> Iterator[tuple[str, bool]]:
    """(paragraph text, whether a blank line preceded it), from `lines`; wrapped lines are joined."""
    current, blank_before, saw_blank = [], False, False
    for line in lines:
        if line.strip():
            if not current:
                blank_before, saw_blank = saw_blank, False
            current.append(line.strip())
        else:
            if current:
                yield " ".join(current), blank_before
                current = []
            saw_blank = True
    if current:
        yield " ".join(current), blank_before


def documents(
    files: Iterable[tuple[str, Iterable[str]]], document_boundary: str = "paragraph", document_start=None
) -> Iterator[list[str]]:
    """The documents of `files` ((name, lines) pairs), each a list of sentences; see the module docstring.

    `document_start`: a compiled regex; a line it matches (with `re.search`) starts a new document.
    """
    if document_boundary not in DOCUMENT_BOUNDARIES:
        raise ValueError(f"document_boundary must be one of {DOCUMENT_BOUNDARIES}, got {document_boundary!r}")
    for _, lines in files:
        document: list[str] = []
        if document_boundary == "line" and document_start is None:
            for line in lines:
                sentences = split_sentences(line)
                if sentences:
                    yield sentences
            continue
        if document_start is not None:
            lines = _mark_document_starts(lines, document_start)
        for paragraph, _ in _paragraphs(lines):
            if paragraph.startswith(_DOCUMENT_START):
                if document:
                    yield document
                document = []
                paragraph = paragraph[len(_DOCUMENT_START) :]
            document.extend(split_sentences(paragraph))
            if document_boundary == "paragraph" and document_start is None and document:
                yield document
                document = []
        if document:
            yield document


# Marks a line that starts a document (a character no text line holds once lines are stripped of it).
_DOCUMENT_START = "\x00"


def _mark_document_starts(lines: Iterable[str], pattern) -> Iterator[str]:
    for line in lines:
        line = line.replace(_DOCUMENT_START, "")
        if pattern.search(line):
            yield ""  # ends the paragraph before it
            yield _DOCUMENT_START + line
            # A heading is its own paragraph: its sentence does not run into the text below it.
            yield ""
        else:
            yield line


def is_held_out(index: int, heldout_fraction: float) -> bool:
    """Whether document `index` (0-based) is held out: round(n * fraction) of the first n, spread evenly."""
    return int((index + 1) * heldout_fraction + 0.5) > int(index * heldout_fraction + 0.5)


@dataclasses.dataclass
class CorpusStats:
    """What `prepare_corpus` wrote."""

    train_documents: int = 0
    train_sentences: int = 0
    heldout_documents: int = 0
    heldout_sentences: int = 0


def prepare_corpus(
    files: Iterable[tuple[str, Iterable[str]]],
    train_output,
    heldout_output=None,
    *,
    heldout_fraction: float = 0.0,
    document_boundary: str = "paragraph",
    document_start=None,
    min_sentences: int = 1,
) -> CorpusStats:
    """Writes the documents of `files` to the text streams `train_output` and `heldout_output`.

    Each document is written as one sentence per line followed by a blank line; documents with fewer than
    `min_sentences` sentences are dropped (a heading, a page number). Document `i` of those kept goes to
    `heldout_output` when `is_held_out(i, heldout_fraction)`.
    """
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1), got {heldout_fraction}")
    stats = CorpusStats()
    index = 0
    for document in documents(files, document_boundary, document_start):
        if len(document) < min_sentences:
            continue
        held_out = heldout_output is not None and is_held_out(index, heldout_fraction)
        index += 1
        (heldout_output if held_out else train_output).write("\n".join(document) + "\n\n")
        if held_out:
            stats.heldout_documents += 1
            stats.heldout_sentences += len(document)
        else:
            stats.train_documents += 1
            stats.train_sentences += len(document)
    return stats
