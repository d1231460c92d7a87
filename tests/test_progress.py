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


def test_a_model_pass_reports_its_batches_by_the_clock(monkeypatch):
    import numpy as np

    from bert_tf.data.length_buckets import bucketed_dataset
    from bert_tf.tasks.inference import predict_outputs

    lines = []
    monkeypatch.setattr(progress, "INTERVAL_SECONDS", 0.0)  # a line after every batch
    monkeypatch.setattr(progress.logging, "info", lambda line, *args: lines.append(line % args if args else line))
    lengths = np.array([3, 5, 8, 2, 7, 4, 6])
    inputs = {
        "input_word_ids": np.array([[1] * n + [0] * (8 - n) for n in lengths], np.int32),
        "input_mask": np.array([[1] * n + [0] * (8 - n) for n in lengths], np.int32),
        "input_type_ids": np.zeros((7, 8), np.int32),
    }
    dataset, batches = bucketed_dataset(inputs, 3, 8, 4)

    def model(batch, training=False):
        import tensorflow as tf

        return {"length": tf.reduce_sum(batch["input_mask"], axis=1)}  # each row's real length

    outputs = predict_outputs(model, dataset, num_features=7, label="Scoring")
    np.testing.assert_array_equal(outputs["length"], lengths)
    progress_lines = [line for line in lines if line.startswith("Scoring: ")]
    assert [line.split(" (")[0] for line in progress_lines[:-1]] == [f"Scoring: {i}/3 batches" for i in (1, 2, 3)]
    assert progress_lines[-1].startswith("Scoring: 3/3 batches in ")
    assert len(batches) == 3
