"""Reading a pretraining text corpus in bounded, document-aligned chunks.

Corpus format (google-research/bert's): one sentence per line, documents
separated by blank (empty or whitespace-only) lines, UTF-8. The end of a file
also ends a document (the original let a file's last document run on into the
next file).
"""

import bisect
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
                    raise invalid_utf8_error(path, bad_line, error.reason, column) from None
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
        raise empty_corpus_error(files)
    return scan


def invalid_utf8_error(path: str, line: int, reason: str, column: int) -> CorpusError:
    return CorpusError(
        f"{path}:{line}: not valid UTF-8 ({reason} at byte {column} of the line). Fix the file or pass "
        "--skip_invalid_utf8 to skip such lines."
    )


def empty_corpus_error(files: Sequence[str]) -> CorpusError:
    return CorpusError(
        f"--input_file: the corpus is empty: {len(files)} file(s) "
        f"({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}) have no non-blank line."
    )


@dataclasses.dataclass(frozen=True)
class CorpusLayout:
    """The corpus as one byte stream: each file, ended by a newline if it lacks one, then a blank line.

    Chunks are cut from this stream (`chunk_span`); the sizes and last bytes
    of the files are all it takes to place a file in it, so any process can
    find any chunk without reading the files before it.
    """

    files: tuple[str, ...]
    sizes: tuple[int, ...]  # bytes of each file
    ends_with_newline: tuple[bool, ...]  # an empty file counts as ending in one

    @property
    def stream_sizes(self) -> list[int]:
        return [size + (not ends) + 1 for size, ends in zip(self.sizes, self.ends_with_newline)]

    @property
    def num_bytes(self) -> int:
        """Bytes of text, the newlines added to unterminated files included (`CorpusScan.num_bytes`)."""
        return sum(self.stream_sizes) - len(self.files)


def corpus_layout(files: Sequence[str], num_threads: int = 16) -> CorpusLayout:
    """Sizes and last bytes of `files` (local or gs://), fetched `num_threads` at a time."""
    import concurrent.futures

    import tensorflow as tf

    def describe(path):
        size = tf.io.gfile.stat(path).length
        if size == 0:
            return size, True
        with tf.io.gfile.GFile(path, "rb") as f:
            f.seek(size - 1)
            return size, f.read(1) == b"\n"

    with concurrent.futures.ThreadPoolExecutor(max(1, min(num_threads, len(files)))) as pool:
        described = list(pool.map(describe, files))
    return CorpusLayout(tuple(files), tuple(d[0] for d in described), tuple(d[1] for d in described))


class CorpusReader:
    """Reads byte ranges of a `CorpusLayout`'s stream, keeping the last file it read open."""

    def __init__(self, layout: CorpusLayout):
        self.layout = layout
        self.starts = [0]
        for size in layout.stream_sizes:
            self.starts.append(self.starts[-1] + size)
        self.size = self.starts[-1]
        self._open_index = None
        self._open_file = None

    def locate(self, position: int) -> tuple[int, int]:
        """(file index, offset in that file) of a stream position."""
        index = bisect.bisect_right(self.starts, position) - 1
        return index, position - self.starts[index]

    def read(self, begin: int, end: int) -> bytes:
        """The stream's bytes [begin, end) (clipped to the stream)."""
        parts = []
        begin, end = max(begin, 0), min(end, self.size)
        while begin < end:
            index, offset = self.locate(begin)
            file_size = self.layout.sizes[index]
            take = min(end - begin, self.starts[index + 1] - begin)
            if offset < file_size:
                take = min(take, file_size - offset)
                parts.append(self._read_file(index, offset, take))
            else:  # the added newlines
                parts.append(b"\n" * take)
            begin += take
        return b"".join(parts)

    def _read_file(self, index: int, offset: int, length: int) -> bytes:
        import tensorflow as tf

        if self._open_index != index:
            self.close()
            self._open_file = tf.io.gfile.GFile(self.layout.files[index], "rb")
            self._open_index = index
        self._open_file.seek(offset)
        data = self._open_file.read(length)
        if len(data) != length:
            raise CorpusError(f"{self.layout.files[index]}: the file changed while it was read")
        return data

    def invalid_utf8_error(self, position: int, reason: str) -> CorpusError:
        """The error `scan_corpus` raises (file, line, column) for a bad byte at a stream position."""
        index, offset = self.locate(position)
        before = self._read_file(index, 0, offset)
        line_start = before.rfind(b"\n") + 1
        return invalid_utf8_error(self.layout.files[index], before.count(b"\n") + 1, reason, offset - line_start)

    def close(self) -> None:
        if self._open_file is not None:
            self._open_file.close()
        self._open_index = self._open_file = None


# The first bytes searched for a blank line after a cut point; the search widens up to
# _MAX_CHUNKS_PER_DOCUMENT - 1 chunks.
_SEARCH_BYTES = 1 << 16


def find_cut(reader: CorpusReader, position: int, chunk_bytes: int) -> int:
    """The stream position where the chunk boundary nearest after `position` falls.

    The end of the first blank line that starts at `position - 1` or later and
    ends within `(_MAX_CHUNKS_PER_DOCUMENT - 1) * chunk_bytes` bytes; without
    one (a long document), the end of the line holding byte `position - 1`.
    It depends only on the bytes from `position - 1` on, so it is the same in
    every process; 0 and the stream's end are their own cuts.
    """
    if position <= 0:
        return 0
    if position >= reader.size:
        return reader.size
    begin = position - 1
    window_end = min(reader.size, begin + (_MAX_CHUNKS_PER_DOCUMENT - 1) * chunk_bytes + 1)
    length = min(_SEARCH_BYTES, window_end - begin)
    while True:
        data = reader.read(begin, begin + length)
        match = _DOCUMENT_BREAK.search(data)
        if match:  # the leftmost in the window: a blank line cut by the read's end holds the only newline after it
            return begin + match.end()
        if begin + length >= window_end:
            break
        length = min(2 * length, window_end - begin)
    newline = data.find(b"\n")
    while newline < 0:  # a line longer than the window; the stream ends with a newline
        length *= 2
        data = reader.read(begin, begin + length)
        newline = data.find(b"\n")
    return begin + newline + 1


def num_chunk_slots(reader: CorpusReader, chunk_bytes: int) -> int:
    """Chunk indices of the corpus: one per `chunk_bytes` of stream (some chunks are empty)."""
    return -(-reader.size // chunk_bytes)


def chunk_span(reader: CorpusReader, index: int, chunk_bytes: int) -> tuple[int, int]:
    """Stream range [begin, end) of chunk `index`: between the cuts after `index` and `index + 1` chunk sizes.

    Empty (begin >= end) when a document longer than a chunk swallowed the
    index. The spans of all indices cover the stream once, in order.
    """
    return find_cut(reader, index * chunk_bytes, chunk_bytes), find_cut(reader, (index + 1) * chunk_bytes, chunk_bytes)


def iter_chunks(
    files: Sequence[str], chunk_bytes: int, layout: CorpusLayout | None = None
) -> Iterator[tuple[int, bytes]]:
    """Yields (chunk index, text) of the corpus's chunks of about `chunk_bytes`, cut between documents.

    Each chunk is whole lines; a chunk ends after a blank line (or at a file
    end). A document longer than a few chunks is cut at a line boundary.
    Files are separated by a blank line, so no document spans two files.
    Chunk boundaries depend on the bytes around each multiple of
    `chunk_bytes` only (`chunk_span`), so a distributed runner cuts the same
    chunks, with the same indices, from any byte range of the corpus. The
    indices increase; an index whose chunk is empty is skipped.
    """
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    reader = CorpusReader(layout or corpus_layout(files))
    try:
        begin = 0
        for index in range(num_chunk_slots(reader, chunk_bytes)):
            end = find_cut(reader, (index + 1) * chunk_bytes, chunk_bytes)  # begin is this index's own cut
            if end > begin:
                yield index, reader.read(begin, end)
            begin = end
    finally:
        reader.close()
