"""benchmarks/litert_classifier.py on a tiny fine-tuned classifier: every form's row, and its bad flags."""

import os
import sys

import pytest

from tests.helpers import export_fixtures

sys.path.insert(0, os.path.join(export_fixtures.REPO_ROOT, "benchmarks"))
import litert_classifier  # noqa: E402


def test_one_run_gives_size_accuracy_agreement_and_latency_of_each_form(tmp_path, capsys):
    model_dir, _ = export_fixtures.write_tiny_classifier_dir(str(tmp_path / "model"), export_fixtures.CLASSIFIER_LABELS)
    data = export_fixtures.write_train_tsv(tmp_path / "train.tsv")
    litert_classifier.main(
        [
            f"--model_dir={model_dir}",
            f"--test_file={data}",
            f"--train_file={data}",
            "--calibration_examples=4",
            "--latency_texts=2",
            "--rounds=1",
            f"--work_dir={tmp_path / 'work'}",
            "--timeout=300",
            "--no-write",
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in lines
        if line.startswith("| ")
    }
    contenders = ["SavedModel float32", "LiteRT float32", "LiteRT dynamic_int8", "LiteRT full_int8"]
    assert [name for name in rows if name != "contender"] == contenders
    count = len(export_fixtures.SENTENCES)
    for name in contenders:
        size, accuracy, diff, agree, ids, *latency = rows[name]
        assert float(size) > 0 and 0 <= float(accuracy) <= 1 and len(latency) == 4
        assert all(float(ms) > 0 for ms in latency[:2])
        if name.startswith("LiteRT"):
            assert ids == f"{count}/{count}"  # the tokenizer inside gives the preprocessor's ids
    assert float(rows["LiteRT float32"][2]) <= 1e-4 and rows["LiteRT float32"][3] == f"{count}/{count}"
    # The int8 files hold int8 weights: smaller than the float32 file by most of the float32 weights' bytes.
    sizes = {
        name: os.path.getsize(tmp_path / "work" / f"litert_{name}" / "classifier.tflite")
        for name in ("float32", "dynamic_int8")
    }
    assert sizes["dynamic_int8"] < sizes["float32"]


def test_bad_flags_name_the_flag(tmp_path, capsys):
    for argv, flag in (
        ([f"--model_dir={tmp_path}", "--forms=float16"], "--forms"),
        ([f"--model_dir={tmp_path}", "--rounds=0"], "--rounds"),
        ([f"--model_dir={tmp_path}"], "--model_dir"),  # no task_config.json
    ):
        with pytest.raises(SystemExit) as exit_info:
            litert_classifier.main(argv)
        assert exit_info.value.code == 2 and flag in capsys.readouterr().err
