"""Texts longer than the model's window: truncate, keep head and tail, or read every window of a document.

    from bert_tf.tasks.long_text import LongTextConfig, window_starts
    config = LongTextConfig(long_text="windows", window_stride=64, window_pooling="mean")
    config.check_window(max_seq_length=128)          # the stride must fit the window (126 pieces)
    window_starts(num_pieces=300, window=126, stride=64)   # -> [0, 64, 128, 174]

`truncate` keeps the first pieces (google-research/bert's behaviour). `head_tail` keeps the first quarter of
the piece budget and the last three quarters (`head_tail_split`; Sun et al. 2019, "How to Fine-Tune BERT for
Text Classification?", kept 128 + 382 of 510 pieces on IMDb). `windows` cuts a document into windows of
max_seq_length - 2 pieces that start every `window_stride` pieces (the last one ends at the document's end);
each window is encoded as its own sequence and the windows' logits are pooled (mean or max over the windows)
into the document's, before the loss: the label belongs to the document. A document needs at most
`max_windows` windows (a static shape for XLA); one that needs more keeps `max_windows` windows spread evenly
over it (the first and the last included), and `cut_report` counts it.

The default (`long_text=None`) is the job's to decide (`LongTextConfig.resolved`): fine-tuning reads single
texts of classification and regression in windows when one is longer than the window
(`bert_tf.jobs.finetuning.inputs.resolve_long_text`), and everything else truncates.

Tagging reads the same windows (not capped: every word is tagged) and tags each word from the window where its
first piece has the most context (`max_context_windows`, SQuAD's rule); `head_tail` would leave words untagged.
Loads no TensorFlow.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_tf.errors import JobArgumentError, check_int

LONG_TEXT_MODES = ("truncate", "head_tail", "windows")
WINDOW_POOLINGS = ("mean", "max", "attention")
# Sun et al. (2019): 128 head + 382 tail pieces of a 510-piece budget was their best on IMDb.
HEAD_SHARE = (128, 510)

# The flags' help, beside the fields they set (experiments/job_flags.py defines the flags from these).
FLAG_HELP = {
    "long_text": "Texts longer than --max_seq_length: truncate (keep the first pieces), head_tail (keep the first "
    "quarter and the last three quarters of the pieces, Sun et al. 2019) or windows (every window of a document, "
    "encoded and pooled into one prediction; classification and regression of single texts; tagging tags each "
    "word from the window where it has the most context). Tagging's truncate splits a long sentence at word "
    "boundaries, each part tagged alone; tagging refuses head_tail. Default: windows for classification and "
    "regression of single texts when a text of the data is longer than the window (docs/finetuning.md, 'Long "
    "documents'), else truncate; an --output_dir's recorded setting.",
    "window_stride": "--long_text=windows: pieces between the starts of a document's windows, 1 to the window "
    "(--max_seq_length - 2); default: the window (windows that touch, no overlap).",
    "window_pooling": "--long_text=windows: how a document's windows become its logits: the mean or max of the "
    "windows' logits, or attention: a learned softmax over the windows weights their [CLS] vectors into one "
    "before the classifier (weights trained with it; classification and regression).",
    "max_windows": "--long_text=windows: windows per document (a static shape); a longer document keeps this "
    "many, spread evenly over it, and the cut report counts it (classification and regression; tagging reads "
    "every window).",
}


@dataclasses.dataclass(frozen=True)
class LongTextConfig:
    """What happens to a text longer than the window (the flags of the same names, `FLAG_HELP`).

    Attributes:
      long_text: truncate, head_tail or windows; None (the default): decided by the job (`resolved`): the
        fine-tuning job reads single texts of classification and regression in windows when one is longer than
        the window (benchmarks/RESULTS.md, `long_documents`), every other job and task truncates.
      window_stride: pieces between window starts; None: the window's length (no overlap).
      window_pooling: mean or max of the windows' logits, or attention over their [CLS] vectors (learned).
      max_windows: the most windows a document is read in.
    """

    long_text: str | None = None
    window_stride: int | None = None
    window_pooling: str = "mean"
    max_windows: int = 16

    def __post_init__(self):
        if self.long_text is not None and self.long_text not in LONG_TEXT_MODES:
            raise JobArgumentError(f"--long_text must be one of {', '.join(LONG_TEXT_MODES)}, got {self.long_text!r}.")
        if self.window_pooling not in WINDOW_POOLINGS:
            raise JobArgumentError(
                f"--window_pooling must be one of {', '.join(WINDOW_POOLINGS)}, got {self.window_pooling!r}."
            )
        if self.window_stride is not None:
            check_int("window_stride", self.window_stride)
        check_int("max_windows", self.max_windows)

    @property
    def windows(self) -> bool:
        return self.long_text == "windows"

    def resolved(self, windows: bool) -> LongTextConfig:
        """This config with the default mode (None) made windows (`windows`) or truncate; a given mode stays."""
        if self.long_text is not None:
            return self
        return dataclasses.replace(self, long_text="windows" if windows else "truncate")

    def check_window(self, max_seq_length: int) -> None:
        """Refuses a `window_stride` longer than the window (`max_seq_length` - 2 pieces), naming the flag."""
        window = max_seq_length - 2
        if self.window_stride is not None and self.window_stride > window:
            raise JobArgumentError(
                f"--window_stride={self.window_stride} is longer than the window ({window} pieces = "
                f"--max_seq_length={max_seq_length} - [CLS] - [SEP]): pieces between windows would be skipped."
            )

    def stride(self, window: int) -> int:
        return self.window_stride or window

    def recorded(self) -> dict:
        """The settings a fine-tuned directory records (task_config.json's `long_text`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_recorded(cls, recorded, source: str) -> LongTextConfig:
        """`recorded()`'s dict read back (None, a directory fine-tuned before the setting was recorded: truncate); a
        bad one raises JobArgumentError naming `source` (the file it was read from)."""
        names = {field.name for field in dataclasses.fields(cls)}
        if recorded is None:
            return cls(long_text="truncate")
        if not isinstance(recorded, dict) or not set(recorded) <= names:
            raise JobArgumentError(
                f"{source}: long_text must be an object with the keys {sorted(names)}, got {recorded!r}."
            )
        try:
            return cls(**recorded).resolved(windows=False)
        except JobArgumentError as e:
            raise JobArgumentError(f"{source}: {e}") from None


def truncate_unless_given(config: LongTextConfig | None) -> LongTextConfig:
    """`config` (None: the defaults) with an undecided mode read as truncate: how every reader decides the
    default but fine-tuning's, which looks at the data first (`bert_tf.jobs.finetuning.inputs.resolve_long_text`)."""
    return (config or LongTextConfig()).resolved(windows=False)


def head_tail_split(budget: int) -> tuple[int, int]:
    """(head, tail) pieces kept of a text longer than `budget`: 128/510 of the budget first, the rest last."""
    head = budget * HEAD_SHARE[0] // HEAD_SHARE[1]
    return head, budget - head


def window_starts(num_pieces: int, window: int, stride: int) -> list[int]:
    """The first piece of each window of a text of `num_pieces` pieces; the last window ends at the text's end.

    A text of at most `window` pieces (an empty one too) is one window at 0.
    """
    if num_pieces <= window:
        return [0]
    starts = list(range(0, num_pieces - window, stride))
    starts.append(num_pieces - window)
    return starts


def capped_starts(starts: list[int], max_windows: int) -> list[int]:
    """At most `max_windows` of `starts`, spread evenly (the first and last kept)."""
    if len(starts) <= max_windows:
        return starts
    picks = np.unique(np.round(np.linspace(0, len(starts) - 1, max_windows)).astype(int))
    return [starts[i] for i in picks]


def covered_pieces(starts: list[int], window: int, num_pieces: int) -> int:
    """How many of the `num_pieces` pieces at least one window starting at `starts` reads."""
    covered = np.zeros(num_pieces, bool)
    for start in starts:
        covered[start : start + window] = True
    return int(covered.sum())


def max_context_windows(starts: list[int], window: int, num_pieces: int) -> np.ndarray:
    """[num_pieces] int: which window (an index into `starts`) reads each piece with the most context; -1 for a
    piece no window reads (a document capped at --max_windows).

    The SQuAD rule (google-research/bert's run_squad `_check_is_max_context`): a piece's score in a window is
    min(pieces left of it, pieces right of it) + 0.01 * the window's length; a tie goes to the first window.
    """
    best = np.full(num_pieces, -1, np.int64)
    best_score = np.full(num_pieces, -np.inf)
    for index, start in enumerate(starts):
        length = min(window, num_pieces - start)
        positions = np.arange(start, start + length)
        score = np.minimum(positions - start, start + length - 1 - positions) + 0.01 * length
        better = score > best_score[positions]
        best[positions[better]] = index
        best_score[positions[better]] = score[better]
    return best


def cut_report(num_pieces, kept_pieces, window: int, capped=None) -> dict:
    """What was cut of the texts of one phase: counts for the log and eval_results.json.

    Args:
      num_pieces: [N] pieces of each text (both texts of a pair), without [CLS]/[SEP].
      kept_pieces: [N] pieces the model reads of each.
      window: the pieces one sequence holds (max_seq_length - [CLS]/[SEP]s); or [N], each text's.
      capped: [N] bool, documents that needed more than max_windows windows (windows only).
    """
    num_pieces, kept_pieces = np.asarray(num_pieces, np.int64), np.asarray(kept_pieces, np.int64)
    longer = num_pieces > window
    long_pieces = int(num_pieces[longer].sum())
    dropped = int((num_pieces - kept_pieces)[longer].sum())
    report = {
        "texts": int(len(num_pieces)),
        "texts_longer_than_window": int(longer.sum()),
        "dropped_piece_share_of_long_texts": round(dropped / long_pieces, 4) if long_pieces else 0.0,
        "empty_texts": int((num_pieces == 0).sum()),
        "one_piece_texts": int((num_pieces == 1).sum()),
    }
    if capped is not None:
        report["texts_over_max_windows"] = int(np.asarray(capped).sum())
    return report


def describe_cut(report: dict, phase: str, long_text: str, window: int, hint: str | None = None) -> list[str]:
    """The log lines of a `cut_report`: the counts, and `hint` (default: one at --long_text=windows or head_tail)
    when most texts are longer than the window and --long_text is not windows."""
    lines = [
        f"{phase}: {report['texts_longer_than_window']} of {report['texts']} texts are longer than the window "
        f"({window} pieces); --long_text={long_text} drops {100 * report['dropped_piece_share_of_long_texts']:.1f}% "
        f"of their pieces ({report['empty_texts']} empty, {report['one_piece_texts']} of one piece"
        + (f", {report['texts_over_max_windows']} over --max_windows" if "texts_over_max_windows" in report else "")
        + ")."
    ]
    if long_text != "windows" and report["texts_longer_than_window"] * 2 > report["texts"]:
        lines.append(
            hint
            or "Most texts are cut: --long_text=windows reads all of each document (or --long_text=head_tail keeps "
            "its start and end)."
        )
    return lines
