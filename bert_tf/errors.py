"""The error types the library raises for bad input and bad data: the bottom floor of the package.

Every command-line tool turns these into one stderr line and exit status 2 (`experiments`' command-line
helpers); the library raises them with a message that names the file and line, or the flag, so that line says
where the problem is. A run that fails on good input (`NonFiniteMetricError`) is status 1; one stopped by a
SIGTERM after saving its checkpoint (`TrainingPreempted`) is status 143. This module imports
nothing of the package, so every layer may import it.

    from bert_tf.errors import DataError
    raise DataError("reviews.tsv:12: expected 2 columns, found 1")
"""

from __future__ import annotations


class BadInputError(ValueError):
    """Input a tool cannot use; the message names the file (and line) or the flag."""


class DataError(BadInputError):
    """Bad data in an input file; the message names the file and line or record."""


class JobArgumentError(BadInputError):
    """An argument (= flag) of a job that cannot work; the message names the flag."""


class NonFiniteMetricError(RuntimeError):
    """An evaluation metric is NaN or infinite: a failed run, not bad input (the tools exit with status 1)."""


class TrainingPreempted(RuntimeError):
    """A SIGTERM stopped training after `step`, saved in `checkpoint`; the same run started again resumes there.

    Not a failure: the tools exit with status 143 (`bert_tf.cli.PREEMPTED_EXIT_CODE`), see
    `bert_tf.training.preemption`.
    """

    def __init__(self, step: int, checkpoint: str):
        super().__init__(
            f"preempted (SIGTERM): stopped after step {step} with the checkpoint {checkpoint}; "
            "run the same command again to resume."
        )
        self.step = step
        self.checkpoint = checkpoint


def check_int(flag: str, value, minimum: int = 1) -> None:
    """Raises `JobArgumentError` naming `--flag` unless `value` is an integer (not a bool) >= `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise JobArgumentError(f"--{flag} must be an integer >= {minimum}, got {value!r}.")


def check_utf8(path: str, flag: str) -> None:
    """Raises `DataError` naming `--flag` and the file: missing, or the line of its first line that is not UTF-8.

    Python's decode errors name a byte offset, not a line; input files are checked with this before they are
    read. An empty `path` (an optional flag left out) is not checked.
    """
    import os

    if not path:
        return
    if not os.path.isfile(path):
        raise DataError(f"--{flag}: file not found: {path}")
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"--{flag}: {path}:{number}: not valid UTF-8 (byte {e.start} of the line)") from None
