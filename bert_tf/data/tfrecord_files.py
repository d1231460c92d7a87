"""Finding input files (TFRecords, text corpora) and TFRecord compression."""

from collections.abc import Sequence

import tensorflow as tf

# gzip magic + "deflate" method byte.
_GZIP_HEADER = b"\x1f\x8b\x08"


def resolve_input_files(input_patterns: str | Sequence[str], deduplicate: bool = True) -> list[str]:
    """Expands paths and globs (a list, or one comma-separated string) into files.

    Every pattern must match a file (directories do not count), so a typo is
    an error rather than missing data. With `deduplicate` (TFRecords, where a
    file read twice would weigh its records twice) the files are sorted and
    listed once each; without it (a text corpus, where the order is that of the
    documents) they come in the order of the patterns, each pattern's matches
    sorted, repeats kept.

    Raises:
        ValueError: naming the pattern that matches nothing.
    """
    if isinstance(input_patterns, str):
        input_patterns = input_patterns.split(",")
    patterns = [p.strip() for p in input_patterns if p and p.strip()]
    if not patterns:
        raise ValueError("no input pattern given")
    files = []
    for pattern in patterns:
        matches = [m for m in sorted(tf.io.gfile.glob(pattern)) if not tf.io.gfile.isdir(m)]
        if not matches:
            if any(c in pattern for c in "*?["):
                raise ValueError(f"pattern {pattern!r} matches no file")
            raise ValueError(f"file not found: {pattern!r}")
        files.extend(matches)
    return sorted(set(files)) if deduplicate else files


def detect_compression(path: str) -> str:
    """ "GZIP" or "" (none) from the first bytes of a TFRecord file.

    ZLIB is not detected: its 2-byte header also starts many plain record
    lengths. Pass compression="ZLIB" for such files.
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(len(_GZIP_HEADER))
    return "GZIP" if head == _GZIP_HEADER else ""
