"""Reading a pretraining text corpus in bounded, document-aligned chunks.

Corpus format (google-research/bert's): one sentence per line, documents
separated by blank (empty or whitespace-only) lines, UTF-8. The end of a file
also ends a document (the original let a file's last document run on into the
next file).
"""

import dataclasses
import re
from collections.abc import Iterator, Sequence

_READ_BLOCK_BYTES = 8 << 20
# A blank line between two newlines (ASCII whitespace only: enough to find a
# safe cut; the worker still decides blankness with str.strip()).
_DOCUMENT_BREAK = re.compile(rb"\n[ \t\r\f\v]*\n")
# A document longer than this many chunks is cut at a line boundary so that
# memory stays bounded even for a corpus without blank lines.
_MAX_CHUNKS_PER_DOCUMENT = 4


class CorpusError(ValueError):
    """Bad corpus input (names the file and line)."""


def resolve_input_files(input_file: str) -> list[str]:
    """Expands a comma-separated list of paths and globs, in the given order, repeats kept.

    Raises:
        CorpusError: if an entry names a missing file or a glob matches nothing.
    """
    from bert_tf.data import tfrecord_files  # TensorFlow, for paths tf.io.gfile reads (gs://...)

    try:
        return tfrecord_files.resolve_input_files(input_file, deduplicate=False)
    except ValueError as e:
        raise CorpusError(f"--input_file: {e}") from None


@dataclasses.dataclass
class CorpusScan:
    """What a validation pass over the corpus found."""

    num_files: int = 0
    num_bytes: int = 0
    num_lines: int = 0
    num_text_lines: int = 0  # lines that are not blank
    invalid_lines: list[tuple[str, int]] = dataclasses.field(
        default_factory=list
    )  # (file, 1-based line) of non-UTF-8 lines


def _iter_line_blocks(path: str) -> Iterator[bytes]:
    """Yields blocks of whole lines (each ending in b"\\n") of a file."""
    import tensorflow as tf  # tf.io.gfile: local files and gs:// alike

    carry = b""
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            block = f.read(_READ_BLOCK_BYTES)
            if not block:
                break
            block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                yield block[:cut]
    if carry:
        yield carry + b"\n"


def scan_corpus(files: Sequence[str], skip_invalid_utf8: bool) -> CorpusScan:
    """Checks that the corpus is UTF-8 and not empty, before any work.

    Args:
        files: input files.
        skip_invalid_utf8: record lines that are not UTF-8 instead of failing.

    Raises:
        CorpusError: naming file and line of the first non-UTF-8 line (unless
            skipping), or when no file has a non-blank line.
    """
    scan = CorpusScan(num_files=len(files))
    for path in files:
        line_number = 0
        for block in _iter_line_blocks(path):
            scan.num_bytes += len(block)
            lines_in_block = block.count(b"\n")
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as error:
                text = None
                if not skip_invalid_utf8:
                    bad_line = line_number + block.count(b"\n", 0, error.start) + 1
                    column = error.start - (block.rfind(b"\n", 0, error.start) + 1)
                    raise CorpusError(
                        f"{path}:{bad_line}: not valid UTF-8 ({error.reason} at "
                        f"byte {column} of the line). Fix the file or pass "
                        "--skip_invalid_utf8 to skip such lines."
                    ) from None
            if text is None:
                decoded = []
                for i, line in enumerate(block.split(b"\n")[:-1]):
                    try:
                        decoded.append(line.decode("utf-8"))
                    except UnicodeDecodeError:
                        scan.invalid_lines.append((path, line_number + i + 1))
                text = "\n".join(decoded)
            scan.num_text_lines += sum(1 for line in text.split("\n") if line.strip())
            scan.num_lines += lines_in_block
            line_number += lines_in_block
    if scan.num_text_lines == 0:
        raise CorpusError(
            f"--input_file: the corpus is empty: {len(files)} file(s) "
            f"({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}) have "
            "no non-blank line."
        )
    return scan


def iter_chunks(files: Sequence[str], chunk_bytes: int) -> Iterator[bytes]:
    """Yields the corpus as chunks of about `chunk_bytes`, cut between documents.

    Each chunk is whole lines; a chunk ends after a blank line (or at a file
    end). A document longer than a few chunks is cut at a line boundary.
    Files are separated by a blank line, so no document spans two files.
    """
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    hard_limit = _MAX_CHUNKS_PER_DOCUMENT * chunk_bytes
    pending = bytearray()

    def cut_ready(final: bool):
        while len(pending) >= chunk_bytes or (final and pending):
            match = _DOCUMENT_BREAK.search(pending, max(chunk_bytes - 1, 0))
            if match:
                cut = match.end()
            elif len(pending) >= hard_limit:
                cut = pending.index(b"\n", chunk_bytes - 1) + 1
            elif final:
                cut = len(pending)
            else:
                return
            yield bytes(pending[:cut])
            del pending[:cut]

    for path in files:
        for block in _iter_line_blocks(path):
            pending += block
            yield from cut_ready(final=False)
        pending += b"\n"  # the file's end ends its last document
    yield from cut_ready(final=True)
