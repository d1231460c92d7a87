"""bert_tf.progress: lines by the clock (an injected one), with an ETA."""

from bert_tf import progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _progress(total=10, interval=30.0):
    clock, lines = Clock(), []
    return (
        progress.Progress("labelling", total=total, unit="batches", interval=interval, clock=clock, log=lines.append),
        clock,
        lines,
    )


def test_a_line_only_after_the_interval_with_the_eta_at_the_rate_so_far():
    tracker, clock, lines = _progress()
    clock.now += 29.0
    assert not tracker.update(1)
    clock.now += 1.0  # 30 s in, 2 of 10 batches: 15 s a batch, 8 left
    assert tracker.update(2)
    assert lines == ["labelling: 2/10 batches (20%), 0:00:30 elapsed, ETA 0:02:00"]
    clock.now += 10.0
    assert not tracker.advance()  # 10 s since the last line
    clock.now += 20.0
    assert tracker.advance()
    assert lines[-1] == "labelling: 4/10 batches (40%), 0:01:00 elapsed, ETA 0:01:30"


def test_slow_units_get_a_line_each_fast_ones_one_per_interval():
    tracker, clock, lines = _progress(total=1000)
    for _ in range(1000):
        clock.now += 0.1
        tracker.advance()
    assert len(lines) == 3  # 100 s: at 30, 60 and 90 s
    slow, clock, slow_lines = _progress(total=3)
    for _ in range(3):
        clock.now += 45.0
        slow.advance()
    assert len(slow_lines) == 3


def test_forced_and_closing_lines_and_an_unknown_total():
    tracker, clock, lines = _progress(total=None)
    assert tracker.update(0, force=True)
    clock.now += 3725.0
    tracker.update(7)
    assert tracker.finish() == 3725.0
    assert lines == [
        "labelling: 0 batches, 0:00:00 elapsed",
        "labelling: 7 batches, 1:02:05 elapsed",
        "labelling: 7 batches in 1:02:05",
    ]


def test_eta_and_durations():
    assert progress.eta_seconds(30.0, 0, 10) is None
    assert progress.eta_seconds(30.0, 3, None) is None
    assert progress.eta_seconds(30.0, 3, 10) == 70.0
    assert progress.format_duration(None) == progress.format_duration(float("inf")) == "?"
    assert progress.format_duration(59.6) == "0:01:00"
