"""The pretraining job on each objective's records and options: it trains the records' sentence task (nsp,
sop, none), refuses mixed or contradictory inputs, and a run with every new option at once (sentence-order
records, an ALBERT-style model, LAMB, dynamic span masking) resumes exactly after a kill mid-step.

The data's statistics: tests/test_pretraining_objectives.py; the kill-and-resume machinery and the default
objective: tests/test_pretrain_job.py.
"""

import json
import signal
import sys

import numpy as np
import pytest

from bert_tf.errors import JobArgumentError
from tests.helpers import absl_flags, jobs, training_data
from tests.test_pretrain_job import HELPER, _checkpoint_values, _finish, _start

STEPS = 20


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("objective_records")
    return {task: training_data.write_pretraining_records(tmp / task, sentence_task=task) for task in ("sop", "none")}


def _arguments(tmp, records, **changes):
    config = training_data.tiny_bert_config(training_data.vocab_size(), num_layers=2)
    config_file = tmp / "bert_config.json"
    config.to_json_file(str(config_file))
    arguments = {
        "input_file": records["train"],
        "eval_input_file": records["eval"],
        "bert_config_file": str(config_file),
        "vocab_file": records["vocab"],
        "deterministic": True,
        "seed": 11,
        "max_seq_length": training_data.SEQ_LENGTH,
        "max_predictions_per_seq": training_data.MAX_PREDICTIONS,
        "train_batch_size": 8,
        "eval_batch_size": 8,
        "learning_rate": 2e-3,
        "num_train_steps": 4,
        "num_warmup_steps": 1,
        "save_checkpoints_steps": 10,
        "steps_per_loop": 2,
        "max_eval_steps": 2,
        "shuffle_buffer_size": 100,
    }
    arguments.update(changes)
    return arguments


def test_full_sentence_records_train_the_masked_lm_alone(records, tmp_path, caplog):
    caplog.set_level("INFO", logger="absl")  # whatever verbosity an earlier tool in this process set
    result = jobs.pretrain(**_arguments(tmp_path, records["none"]), output_dir=str(tmp_path / "run"))
    assert "Training objective: masked LM only" in caplog.text
    assert {"loss", "mlm_loss", "mlm_accuracy", "mlm_unigram_accuracy"} <= set(result.eval_metrics)
    assert not any(name.startswith(("nsp", "sop")) for name in set(result.eval_metrics) | set(result.train_metrics))
    assert result.train_metrics["loss"] == pytest.approx(result.train_metrics["mlm_loss"])
    # The sentence head is kept for the checkpoint's layout, frozen: no gradient, no decay, no slots.
    head = result.model.next_sentence
    assert not head.trainable and not any(
        id(w) in {id(v) for v in result.model.trainable_variables} for w in head.weights
    )


def test_sentence_order_records_train_the_sentence_head_on_sentence_order(records, tmp_path, caplog):
    caplog.set_level("INFO", logger="absl")  # whatever verbosity an earlier tool in this process set
    result = jobs.pretrain(**_arguments(tmp_path, records["sop"]), output_dir=str(tmp_path / "run"))
    assert "Training objective: masked LM + sentence-order prediction (ALBERT)" in caplog.text
    assert {"sop_loss", "sop_accuracy"} <= set(result.eval_metrics) and "nsp_loss" not in result.eval_metrics
    # The yardstick is the held-out sentence-order labels' majority (about half are swapped).
    assert (
        0.5 <= result.eval_metrics["sop_majority_accuracy"] < 0.8 and "nsp_majority_accuracy" not in result.eval_metrics
    )
    metrics = result.train_metrics
    assert metrics["loss"] == pytest.approx(metrics["mlm_loss"] + metrics["sop_loss"], rel=1e-5)


def test_mixed_sentence_tasks_and_static_masking_options_are_refused(records, tmp_path):
    mixed = _arguments(tmp_path, records["sop"], eval_input_file=records["none"]["eval"])
    with pytest.raises(JobArgumentError, match="--eval_input_file: .* --sentence_task=none but .* --sentence_task=sop"):
        jobs.pretrain(**mixed, output_dir=str(tmp_path / "mixed"))
    assert not (tmp_path / "mixed").exists()
    with pytest.raises(JobArgumentError, match="--masking=span needs --dynamic_masking"):
        jobs.pretrain(**_arguments(tmp_path, records["sop"], masking="span"), output_dir=str(tmp_path / "static"))


def test_command_line_refuses_span_masking_of_static_records_in_one_line(records, tmp_path, capsys):
    from experiments import pretrain

    argv = [f"--{name}={value}" for name, value in _arguments(tmp_path, records["sop"]).items()]
    argv += [f"--output_dir={tmp_path / 'cli'}", "--masking=span", "--optimizer=lamb"]
    assert absl_flags.run_main(pretrain, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--masking=span needs --dynamic_masking" in err[0]
    assert not (tmp_path / "cli").exists()


@pytest.fixture(scope="module")
def every_option_runs(records, tmp_path_factory):
    """Uninterrupted here; in a subprocess killed inside step 13, resumed here (as tests/test_pretrain_job.py)."""
    tmp = tmp_path_factory.mktemp("every_option")
    config = training_data.tiny_bert_config(training_data.vocab_size(), num_layers=2)
    config = type(config).from_dict(dict(config.to_dict(), embedding_size=16, share_layer_weights=True))
    config_file = tmp / "albert_config.json"
    config.to_json_file(str(config_file))
    arguments = _arguments(
        tmp,
        records["sop"],
        bert_config_file=str(config_file),
        num_train_steps=STEPS,
        num_warmup_steps=3,
        steps_per_loop=5,
        max_eval_steps=0,
        optimizer="lamb",
        dynamic_masking=True,
        masking="span",
    )
    killed_dir = tmp / "killed"
    killed = _start(
        [
            sys.executable,
            HELPER,
            "pretrain",
            "--kill_in_step=13",
            "--args=" + json.dumps(dict(arguments, output_dir=str(killed_dir))),
        ],
        tmp / "killed.log",
    )
    try:
        reference = jobs.pretrain(**arguments, output_dir=str(tmp / "uninterrupted"))
        killed_result = _finish(killed, tmp / "killed.log")
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait(timeout=60)
    resumed = jobs.pretrain(**arguments, output_dir=str(killed_dir))
    return {
        "killed": killed_result,
        "reference": reference,
        "resumed": resumed,
        "dirs": (tmp / "uninterrupted", killed_dir),
    }


def test_every_option_at_once_resumes_to_the_same_weights(every_option_runs):
    returncode, log = every_option_runs["killed"]
    assert returncode == -signal.SIGKILL, log[-3000:]
    assert every_option_runs["resumed"].step == STEPS
    reference_dir, resumed_dir = every_option_runs["dirs"]
    reference = _checkpoint_values(str(reference_dir / f"ckpt-{STEPS}"))
    resumed = _checkpoint_values(str(resumed_dir / f"ckpt-{STEPS}"))
    assert sorted(reference) == sorted(resumed)
    # One shared block; LAMB's moments under Adam's names.
    assert len([name for name in reference if name.startswith("encoder/") and "attention/query/bias" in name]) == 1
    assert "optimizer/m/0/.ATTRIBUTES/VARIABLE_VALUE" in reference
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)
    assert {"sop_loss", "sop_accuracy"} <= set(every_option_runs["reference"].eval_metrics)
