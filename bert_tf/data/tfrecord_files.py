"""Finding TFRecord files and their compression."""

from typing import Sequence, Union

import tensorflow as tf

# gzip magic + "deflate" method byte.
_GZIP_HEADER = b"\x1f\x8b\x08"


def resolve_input_files(input_patterns: Union[str, Sequence[str]]) -> Sequence[str]:
    """Expands globs (a list, or one comma-separated string), sorted, unique.

    Raises:
        ValueError: naming the patterns when nothing matches.
    """
    if isinstance(input_patterns, str):
        input_patterns = input_patterns.split(",")
    patterns = [p.strip() for p in input_patterns if p and p.strip()]
    if not patterns:
        raise ValueError("no input pattern given")
    files = []
    for pattern in patterns:
        files.extend(tf.io.gfile.glob(pattern))
    files = sorted(set(files))
    if not files:
        raise ValueError(f"input patterns {patterns} match no file")
    return files


def detect_compression(path: str) -> str:
    """"GZIP" or "" (none) from the first bytes of a TFRecord file.

    ZLIB is not detected: its 2-byte header also starts many plain record
    lengths. Pass compression="ZLIB" for such files.
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(len(_GZIP_HEADER))
    return "GZIP" if head == _GZIP_HEADER else ""
