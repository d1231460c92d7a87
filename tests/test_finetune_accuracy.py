"""benchmarks/finetune_accuracy.py: each of our contenders is the fine-tuning job with the flags it names."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.absl_flags import temporary_flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import finetune_accuracy  # noqa: E402


@pytest.mark.parametrize("name", list(finetune_accuracy.OURS))
def test_each_contenders_flags_are_the_jobs_flags(name):
    from bert_tf.training import RuntimeConfig
    from experiments import finetune, job_flags

    extra = finetune_accuracy.OURS[name][1]
    with temporary_flags(finetune.define_flags, ["finetune", *extra]) as parsed:
        runtime = job_flags.config_from_flags(RuntimeConfig)
        assert all(parsed[flag.lstrip("-").split("=")[0].removeprefix("no")].present for flag in extra)
    assert runtime.mixed_precision == ("mixed_bfloat16" if name == "bfloat16" else "float32")


def test_the_bfloat16_contender_runs_the_packed_default_in_mixed_bfloat16(tmp_path, monkeypatch):
    commands = []

    def fake_job(command, **kwargs):
        commands.append(command)
        output_dir = next(flag.split("=", 1)[1] for flag in command if flag.startswith("--output_dir="))
        os.makedirs(output_dir)
        with open(os.path.join(output_dir, "eval_results.json"), "w", encoding="utf-8") as f:
            json.dump({"token_accuracy": 0.95}, f)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(finetune_accuracy.subprocess, "run", fake_job)
    accuracy = finetune_accuracy.run_ours(
        "tags", "bfloat16", "train.conll", "test.conll", "model", 2, 64, str(tmp_path), timeout=1
    )
    (command,) = commands
    assert accuracy == 0.95
    assert command[1:3] == ["-m", "experiments.finetune"]
    assert "--mixed_precision=mixed_bfloat16" in command and "--seed=2" in command
    assert not any(flag in command for flag in ("--nopacking", "--group_by_length"))
    assert f"--output_dir={tmp_path / 'tags_bfloat16_2'}" in command
