"""Atomic file and directory writes: a reader never sees a half-written output.

Every output of the package goes through here: it is written under a temporary
name in the destination's own directory (so the final `os.replace` is a rename
on one file system) and renamed into place only once complete. Standard
library only, so every layer of the package may use it.

    >>> import json, os, tempfile
    >>> from bert_tf import file_io
    >>> path = os.path.join(tempfile.mkdtemp(), "result.json")
    >>> file_io.write_json(path, {"accuracy": 0.9})
    >>> json.load(open(path))["accuracy"]
    0.9
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator


def _temporary_sibling(path: str, directory: bool = False) -> str:
    parent = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(parent, exist_ok=True)
    prefix = f".{os.path.basename(path)}.tmp-"
    umask = os.umask(0)
    os.umask(umask)
    # mkdtemp and mkstemp create 0700 and 0600; give the modes an ordinary mkdir() and open() would,
    # so that a model saved here is readable by, say, a serving user.
    if directory:
        tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
        os.chmod(tmp, 0o777 & ~umask)
        return tmp
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


@contextlib.contextmanager
def atomic_path(path: str, directory: bool = False) -> Iterator[str]:
    """Yields a temporary path beside `path`; renames it to `path` if the block succeeds.

    With `directory=True` the temporary path is an (empty) directory, and an
    existing directory at `path` is replaced as a whole. On an exception the
    temporary is removed and `path` is left as it was.
    """
    tmp = _temporary_sibling(path, directory=directory)
    try:
        yield tmp
        if directory and os.path.isdir(path):
            # Two renames: a directory cannot be replaced by os.replace while non-empty.
            old = _temporary_sibling(path, directory=True)
            os.rmdir(old)
            os.replace(path, old)
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old, path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:  # the text as given, on every platform
            f.write(text)


def write_json(path: str, value, indent: int = 2, *, sort_keys: bool = False, allow_nan: bool = False) -> None:
    """Writes `value` as JSON to `path` atomically.

    Refuses NaN and infinities (not JSON) unless `allow_nan`, which writes them
    as `json.dumps` does (`NaN`, `Infinity`), as the training loop's eval results do.
    """
    write_text(path, json.dumps(value, indent=indent, sort_keys=sort_keys, allow_nan=allow_nan) + "\n")


def copy_file(source: str, destination: str) -> None:
    """Copies `source` to `destination` atomically (contents and mode bits)."""
    with atomic_path(destination) as tmp:
        shutil.copyfile(source, tmp)
        shutil.copymode(source, tmp)


def sha256_of(path: str) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
