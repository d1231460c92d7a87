"""The task registry: a plug-in in one new module runs through the job and the command line; bad names and
flags are refused with the registered names or the flag."""

import json
import os
import subprocess
import sys

import pytest

from bert_tf.errors import JobArgumentError
from bert_tf.tasks import registry
from tests.fixtures.finetune import synthetic
from tests.helpers import fasttext_task, training_data
from tests.helpers.absl_flags import run_main
from tests.helpers.jobs import finetune

COMMON = dict(max_seq_length=16, train_batch_size=32, learning_rate=1e-3, steps_per_loop=50, seed=1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return synthetic.make_model_dir(str(tmp_path_factory.mktemp("registry") / "model"))


def write_lines(path, rows, prefix="__label__") -> str:
    with open(path, "w", encoding="utf-8") as f:
        for text, label in rows:
            f.write(f"{prefix}{label} {text}\n")
    return str(path)


def test_a_plug_in_module_fine_tunes_through_run_finetuning(tmp_path, model_dir):
    assert "fasttext_classification" in registry.task_names()
    assert registry.task_class("fasttext_classification") is fasttext_task.FasttextTask
    train = write_lines(tmp_path / "train.txt", synthetic.sentiment_rows(320, 1))
    dev = write_lines(tmp_path / "dev.txt", synthetic.sentiment_rows(100, 2))
    output_dir = str(tmp_path / "out")
    results = finetune(
        "fasttext_classification",
        output_dir,
        train_file=train,
        eval_file=dev,
        model_dir=model_dir,
        num_train_steps=60,
        do_train=True,
        do_eval=True,
        **COMMON,
    )
    # Chance is 0.5: the plug-in's reader gave the labels, and the keyword rule is learned.
    assert results["accuracy"] >= 0.9 and results["num_examples"] == 100 and results["global_step"] == 60
    with open(os.path.join(output_dir, "task_config.json")) as f:
        record = json.load(f)
    assert record["task"] == "fasttext_classification" and record["label_list"] == ["neg", "pos"]

    # The plug-in's own config field: another prefix reads other files, and a bad one names its flag.
    other = write_lines(tmp_path / "other.txt", synthetic.sentiment_rows(100, 2), prefix="#")
    again = finetune("fasttext_classification", output_dir, eval_file=other, label_prefix="#", do_eval=True, **COMMON)
    assert again["accuracy"] == pytest.approx(results["accuracy"])
    with pytest.raises(JobArgumentError, match="--label_prefix"):
        finetune("fasttext_classification", output_dir, eval_file=dev, label_prefix=" ", do_eval=True)


def test_a_plug_in_runs_from_the_command_line(tmp_path, model_dir, capsys):
    from experiments import finetune as finetune_cli

    train = write_lines(tmp_path / "train.txt", synthetic.sentiment_rows(64, 1))
    dev = write_lines(tmp_path / "dev.txt", synthetic.sentiment_rows(20, 2))
    output_dir = str(tmp_path / "out")
    argv = [
        "--task=fasttext_classification",
        f"--train_file={train}",
        f"--eval_file={dev}",
        f"--model_dir={model_dir}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--do_eval",
        "--max_seq_length=16",
        "--train_batch_size=16",
        "--num_train_steps=4",
        "--steps_per_loop=2",
    ]
    assert run_main(finetune_cli, argv) == 0
    assert "num_examples = 20" in capsys.readouterr().out
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["global_step"] == 4

    # Another task's flag is refused, naming it, rather than silently unused.
    assert run_main(finetune_cli, [*argv, "--doc_stride=64", f"--output_dir={tmp_path / 'other'}"]) == 2
    err = capsys.readouterr().err
    assert "--doc_stride is an option of --task=squad" in err
    assert not os.path.exists(tmp_path / "other")


def test_an_unknown_task_exits_2_listing_the_registered_names(tmp_path, capsys):
    from experiments import finetune as finetune_cli

    status = run_main(finetune_cli, ["--task=sentiment", f"--output_dir={tmp_path}", "--do_train"])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--task must be one of" in err[0] and "'sentiment'" in err[0]
    for name in ("classification", "token_classification", "squad", "fasttext_classification"):
        assert name in err[0]


def test_a_task_gets_its_own_config_class(tmp_path, model_dir):
    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    from bert_tf.jobs.finetuning.job import run_finetuning
    from bert_tf.tasks import FinetuningTaskConfig, SquadConfig

    squad = write_lines(tmp_path / "squad.json", [])
    with pytest.raises(JobArgumentError, match="--task=squad takes a SquadConfig, not a FinetuningTaskConfig"):
        run_finetuning(
            str(tmp_path / "out"),
            FinetuningTaskConfig("squad"),
            ModelSource(model_dir=model_dir),
            FinetuningDataConfig(eval_file=squad),
            do_eval=True,
        )
    with pytest.raises(JobArgumentError, match="--max_seq_length .* must exceed --max_query_length"):
        SquadConfig(max_seq_length=32, max_query_length=40)
    with pytest.raises(JobArgumentError, match="--doc_stride"):
        SquadConfig(doc_stride=0)


def test_a_name_belongs_to_one_class():
    class Other(fasttext_task.FasttextTask):
        names = ("fasttext_classification",)

    with pytest.raises(ValueError, match="already registered to tests.helpers.fasttext_task.FasttextTask"):
        registry.register_task(Other)
    assert registry.task_class("fasttext_classification") is fasttext_task.FasttextTask


def test_listing_the_tasks_loads_no_keras(tmp_path):
    code = (
        "import sys; from bert_tf.tasks import registry; names = registry.task_names(); "
        "print(','.join(names), 'keras' in sys.modules, 'tensorflow' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=training_data.subprocess_env(),
        check=True,
    )
    assert result.stdout.split() == [
        "classification,sentence_pair_classification,regression,token_classification,squad",
        "False",
        "False",
    ]
