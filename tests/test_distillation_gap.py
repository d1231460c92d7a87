"""benchmarks/distillation_gap.py: per-seed gaps and their means, reuse of finished teachers, bad flags."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import distillation_gap  # noqa: E402


def test_table_gives_each_seeds_gap_in_points_and_the_means():
    rows = [
        {"seed": 1, "teacher": 0.842, "student": 0.830},
        {"seed": 2, "teacher": 0.850, "student": 0.845},
        {"seed": 3, "teacher": 0.846, "student": 0.835},
    ]
    lines = distillation_gap.table(rows, num_layers=3)
    assert lines[0] == "| seed | teacher (6 layers) | student (3 layers) | gap (points) |"
    assert lines[2:5] == [
        "| 1 | 0.842 | 0.830 | -1.2 |",
        "| 2 | 0.850 | 0.845 | -0.5 |",
        "| 3 | 0.846 | 0.835 | -1.1 |",
    ]
    # The mean gap is the gap of the means: (0.8367 - 0.8460) = -0.93 points.
    assert lines[5] == "| **mean** | **0.846** | **0.837** | **-0.9** |"


def test_a_finished_teacher_is_reused_and_an_unfinished_one_refused(tmp_path, monkeypatch):
    def no_run(*args, **kwargs):
        raise AssertionError("a finished teacher was trained again")

    monkeypatch.setattr(distillation_gap, "_run", no_run)
    classifier = tmp_path / "teacher_seed_2" / "classifier"
    classifier.mkdir(parents=True)
    (classifier / "results.json").write_text(json.dumps({"test_accuracy": 0.8465}))
    accuracy, model_dir = distillation_gap.teacher_accuracy(str(tmp_path), 2, "unused", timeout=1)
    assert accuracy == 0.8465
    assert model_dir == str(tmp_path / "teacher_seed_2" / "task_model")

    (tmp_path / "teacher_seed_3").mkdir()
    with pytest.raises(RuntimeError, match="teacher_seed_3 holds an unfinished teacher"):
        distillation_gap.teacher_accuracy(str(tmp_path), 3, "unused", timeout=1)


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--seeds=1,x"], "--seeds: a comma-separated list of integers"),
        ([], "--export_dir: no encoder/saved_model.pb in"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(tmp_path, capsys, flags, expected):
    argv = [f"--export_dir={tmp_path}", f"--work_dir={tmp_path / 'work'}", *flags]
    with pytest.raises(SystemExit) as exit_info:
        distillation_gap.main(argv)
    assert exit_info.value.code == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "work").exists()
