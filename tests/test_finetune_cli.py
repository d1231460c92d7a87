"""`python -m experiments.finetune`: flags to results, and one-line errors for bad input."""

import json
import os
import subprocess
import sys

from tests.fixtures.finetune import synthetic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*flags):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "experiments.finetune", *flags],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )


def test_train_eval_predict_from_flags(tmp_path):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), None, synthetic.sentiment_rows(64, 1))
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), None, synthetic.sentiment_rows(20, 2))
    output_dir = str(tmp_path / "out")
    result = run_cli(
        "--task=classification",
        f"--train_file={train}",
        f"--eval_file={dev}",
        f"--predict_file={dev}",
        "--has_header=false",
        "--text_a_column=0",
        "--label_column=1",
        "--label_list=pos,neg",
        f"--model_dir={model_dir}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--max_seq_length=16",
        "--train_batch_size=16",
        "--num_train_steps=4",
        "--steps_per_loop=2",
        "--eval_batch_size=8",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "***** Eval results *****" in result.stdout and "accuracy = " in result.stdout
    # The default batches are packed rows; the log gives their share of real tokens, and the precision.
    assert "Packed rows, training (epoch 1)" in result.stderr and "of the tokens are real" in result.stderr
    assert "Precision float32 (--mixed_precision)" in result.stderr
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["num_examples"] == 20 and results["global_step"] == 4
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f)["label_list"] == ["pos", "neg"]  # the given order, not sorted
    with open(os.path.join(output_dir, "predictions.tsv")) as f:
        assert f.readline().rstrip("\n").split("\t") == [
            "guid",
            "text_a",
            "label",
            "prediction",
            "probability_pos",
            "probability_neg",
        ]
        assert len(f.readlines()) == 20


def test_bad_input_is_one_clear_line(tmp_path):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["sentence", "label"], [("good", "pos"), ("bad", "neg")])
    result = run_cli(
        "--task=classification",
        f"--train_file={train}",
        "--text_a_column=text",
        f"--model_dir={model_dir}",
        "--max_seq_length=16",
        f"--output_dir={tmp_path / 'out'}",
        "--do_train",
    )
    assert result.returncode == 2
    assert "finetune: error:" in result.stderr and "train.tsv: no text_a column 'text'" in result.stderr
    assert "Traceback" not in result.stderr


def test_explicit_packing_where_it_cannot_apply_exits_2_naming_the_flag(tmp_path):
    """--num_microbatches above 1 turns the default packing off (logged); --packing given with it is refused
    before any work."""
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    result = run_cli(
        "--task=classification",
        "--packing",
        "--num_microbatches=2",
        f"--train_file={tmp_path / 'train.tsv'}",
        f"--model_dir={model_dir}",
        f"--output_dir={tmp_path / 'out'}",
        "--do_train",
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "finetune: error: --packing" in result.stderr and "--num_microbatches" in result.stderr
    assert "Traceback" not in result.stderr and not os.path.exists(tmp_path / "out")
