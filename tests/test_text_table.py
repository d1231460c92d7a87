"""The shared plain-text table (`bert_tf.text_table`) and the main job's summary printed with it."""

import pytest

from bert_tf.text_table import format_table
from experiments.demo.report import print_summary
from experiments.demo.runner import StepResult


def _column_starts(line, cells):
    """Where each cell starts in `line`, found left to right."""
    starts, position = [], 0
    for cell in cells:
        position = line.index(cell, position)
        starts.append(position)
        position += len(cell)
    return starts


def test_columns_line_up_whatever_the_widths():
    rows = [["a", "0.5", "x"], ["a much longer label than the header", "12.25", "yy"], ["", None, "zzz"]]
    lines = format_table(["name", "value", "note"], rows, align="<><")
    assert lines[0].startswith("name ") and set(lines[1]) == {"-", " "}
    width = len("a much longer label than the header")
    # Every row's numbers end in the same column (right-aligned), every note starts in the same column.
    value_ends = {line.index(value) + len(value) for line, value in zip(lines[2:], ["0.5", "12.25"])}
    assert value_ends == {width + 2 + len("12.25")}
    note_starts = {line.rindex(note) for line, note in zip(lines[2:], ["x", "yy", "zzz"])}
    assert note_starts == {width + 2 + len("12.25") + 2}
    assert all(line == line.rstrip() for line in lines)
    assert lines[1].split() == ["-" * width, "-" * 5, "-" * 4]


def test_default_alignment_indent_and_bad_shapes():
    lines = format_table(["k", "v"], [["long key", 1], ["k", 100]], indent="   ")
    assert lines == ["   k           v", "   --------  ---", "   long key    1", "   k         100"]
    with pytest.raises(ValueError, match="row 1 has 1 cells; the header has 2"):
        format_table(["k", "v"], [["a", 1], ["b"]])
    with pytest.raises(ValueError, match="align"):
        format_table(["k", "v"], [["a", 1]], align="<^")


def test_the_main_jobs_summary_lines_up_with_long_labels(capsys):
    steps = [
        StepResult("1. learn a WordPiece vocabulary", "vocab", 11.2, "5,964 pieces"),
        StepResult("6. fine-tune the real encoder through hub.KerasLayer, a long name " * 2, "c", 103.0, "0.840"),
    ]
    probe_row = {
        "best_layer": "layer_2",
        "best_accuracy": 0.956,
        "last_layer_accuracy": 0.886,
        "scalar_mix_accuracy": 0.95,
        "random_init_best_accuracy": 0.758,
        "baseline_accuracy": 0.87,
    }
    summary = {
        "test_examples": 1000,
        "majority_accuracy": 0.658,
        "random_init_accuracy": 0.707,
        "from_scratch_accuracy": None,
        "real_weights_accuracy": 0.84,
        "mlm_accuracy": 0.116,
        "mlm_unigram_accuracy": 0.044,
        "mlm_loss": 5.92,
        "mlm_unigram_loss": 6.35,
        "nsp_accuracy": 0.626,
        "nsp_majority_accuracy": 0.588,
        "nsp_loss": 0.644,
        "nsp_prior_loss": 0.677,
        "probe_layers": {
            "real_weights": {"report_dir": "r", "token": probe_row, "sentence_cls": dict(probe_row, best_layer="l4")},
            "from_scratch": {"report_dir": "s", "token": probe_row},
        },
        "new_sentences": [{"text": "Great taste.", "score": 0.912, "label": "great"}],
        "skipped_tours": {"distillation": "python -m experiments.demo --output_dir=runs/demo --tours=distillation"},
    }
    print_summary(steps, summary, 120.0, "runs/demo")
    lines = capsys.readouterr().out.splitlines()
    # Readable in a terminal of 80 columns: long names and results wrap.
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    step_lines = [line for line in lines if "1. learn" in line or "6. fine-tune" in line]
    assert len(step_lines) == 2
    # The seconds end in one column, however long the step's name; each result starts below its step.
    time_ends = {line.index(f"{seconds}s") + len(f"{seconds}s") for line, seconds in zip(step_lines, [11, 103])}
    assert len(time_ends) == 1
    result_lines = [next(line for line in lines if result in line) for result in ("5,964 pieces", "0.840")]
    assert {line.index(result) for line, result in zip(result_lines, ["5,964 pieces", "0.840"])} == {6}
    assert lines.index(result_lines[0]) == lines.index(step_lines[0]) + 1
    accuracy_lines = [line for line in lines if line.strip().startswith(("training majority class", "fine-tuned from"))]
    assert len(accuracy_lines) == 4 and "skipped" in accuracy_lines[2]
    assert len({len(line) for line in accuracy_lines}) == 1  # right-aligned: every accuracy ends in one column
    probe_lines = [line for line in lines if ", POS tags" in line or ", reviews, [CLS]" in line]
    assert len(probe_lines) == 3
    cells = ["0.886", "0.950", "0.758", "0.870"]
    assert len({tuple(_column_starts(line, cells)) for line in probe_lines}) == 1
    assert len({line.index("0.956") for line in probe_lines}) == 1
    # A skipped tour: its command, whole on a line of its own, to copy.
    assert "   skipped tours (options, minutes more each): distillation. To run them:" in lines
    assert "   python -m experiments.demo --output_dir=runs/demo --tours=distillation" in lines


def test_a_table_wider_than_its_width_wraps_its_widest_text_column():
    rows = [["a fairly long label that goes on and on past the edge", "0.912", "note"], ["short", "0.5", "n"]]
    lines = format_table(["label", "value", "note"], rows, align="<><", indent="  ", width=40)
    assert max(len(line) for line in lines) <= 40
    assert lines[2].startswith("  a fairly long label") and lines[2].rstrip().endswith("0.912  note")
    # The continuation lines hold only the rest of the wrapped cell, in its column.
    continuation = [line for line in lines[3:] if "0." not in line]
    assert continuation and all(line.startswith("  ") and line.strip() for line in continuation)
    assert " ".join([lines[2][2:25].strip()] + [line.strip() for line in continuation]).startswith(
        "a fairly long label"
    )
    assert format_table(["k", "v"], [["key", 1]], width=80) == format_table(["k", "v"], [["key", 1]])


def test_the_accuracy_bars_labels_do_not_overlap():
    from experiments.demo.report import curves_figure

    summary = {"mlm_unigram_loss": 6.3, "mlm_unigram_accuracy": 0.05, "nsp_majority_accuracy": 0.55}
    summary["majority_accuracy"] = 0.62
    classifiers = {label: {"test_accuracy": 0.7} for label in ("random_init", "from_scratch", "real_weights")}
    figure = curves_figure("/nonexistent", summary, classifiers)  # no pretraining curves: the bars alone
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    labels = [label for label in figure.axes[2].get_xticklabels() if label.get_text()]
    assert len(labels) == 4
    boxes = [label.get_window_extent(renderer) for label in labels]
    for left, right in zip(boxes, boxes[1:]):
        assert left.x1 < right.x0, (left, right)
