"""Progress by time, not by units of work: a line at least every `INTERVAL_SECONDS`, with an ETA.

    progress = Progress("make_vocab: counting words", total=len(lines), unit="lines")
    for i, line in enumerate(lines):
        ...
        progress.update(i + 1)   # logs only when INTERVAL_SECONDS passed since the last line
    progress.finish()            # "make_vocab: counting words: 5000/5000 lines (100%) in 0:01:02"

A long job that says nothing for minutes looks hung; one line per unit of work floods the log when units are
fast. So each tool reports by the clock, whatever the size of its steps, batches or parts. The training loop
(`bert_tf.training.loop`) ends each host call of its in-graph loop after `INTERVAL_SECONDS` for the same
reason. Pure Python (no TensorFlow); the clock is injectable for tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from absl import logging

#: The longest a long-running tool stays silent, in seconds.
INTERVAL_SECONDS = 30.0


def format_duration(seconds: float | None) -> str:
    """`H:MM:SS`, or "?" for an unknown (None, NaN or infinite) duration."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(max(seconds, 0.0)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def eta_seconds(elapsed: float, done: float, total: float | None) -> float | None:
    """The time left at the rate so far: `elapsed / done * (total - done)`; None before any work or total."""
    if total is None or done <= 0:
        return None
    return elapsed / done * max(total - done, 0)


class Progress:
    """Reports a loop's progress at most every `interval` seconds (and when asked), with the time left.

    Args:
      label: what is being done, which starts each line.
      total: the units of work in all (None: unknown, no percentage or ETA).
      unit: the units' name ("batches", "lines").
      interval: seconds between lines; default `INTERVAL_SECONDS` (read when the object is made).
      clock: seconds, monotonic (`time.monotonic`); tests pass their own.
      log: takes the line (default `absl.logging.info`).
    """

    def __init__(
        self,
        label: str,
        total: float | None = None,
        unit: str = "",
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] | None = None,
    ):
        self.label, self.total, self.unit = label, total, unit
        self.interval = INTERVAL_SECONDS if interval is None else interval
        self.clock, self.log = clock, log if log is not None else logging.info
        self.start = self.last_line = clock()
        self.done = 0
        self.reported = False  # whether a progress line was logged (a short loop may close silently)

    def line(self, done: float) -> str:
        """The progress line for `done` units now."""
        elapsed = self.clock() - self.start
        unit = f" {self.unit}" if self.unit else ""
        if self.total is None:
            return f"{self.label}: {done:g}{unit}, {format_duration(elapsed)} elapsed"
        percent = 100.0 * done / self.total if self.total else 100.0
        left = format_duration(eta_seconds(elapsed, done, self.total))
        counts = f"{done:g}/{self.total:g}{unit} ({percent:.0f}%)"
        return f"{self.label}: {counts}, {format_duration(elapsed)} elapsed, ETA {left}"

    def update(self, done: float, force: bool = False) -> bool:
        """Records `done` units so far; logs a line if `interval` seconds passed (or `force`). Returns whether."""
        self.done = done
        now = self.clock()
        if not force and now - self.last_line < self.interval:
            return False
        self.last_line, self.reported = now, True
        self.log(self.line(done))
        return True

    def advance(self, units: float = 1) -> bool:
        """`update(done + units)`."""
        return self.update(self.done + units)

    def finish(self) -> float:
        """Logs the closing line (the units done and the time taken); returns the seconds taken."""
        elapsed = self.clock() - self.start
        unit = f" {self.unit}" if self.unit else ""
        total = f"/{self.total:g}" if self.total is not None else ""
        self.log(f"{self.label}: {self.done:g}{total}{unit} in {format_duration(elapsed)}")
        return elapsed
