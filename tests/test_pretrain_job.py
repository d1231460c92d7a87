"""Tests of `python -m experiments.pretrain` and `run_pretraining`: outputs, kill-and-resume, warm start, flag checks.

`run_pretraining` is called through `tests.helpers.jobs.pretrain`, which builds its config objects from
the flat argument dicts below (the same dicts become the CLI's flags).

The kill-and-resume test runs, side by side, (A) `run_pretraining` uninterrupted in this process and
(B) the same run in a subprocess SIGKILLing itself after step 15 (after the step-10 checkpoint, before
the step-20 one); then it leaves the debris of an interrupted checkpoint write in B's directory and
runs the CLI there with the same flags (--flagfile), which resumes. With --deterministic (and dropout
on), B must end with A's weights exactly.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, load_encoder
from bert_tf.data.unigram_baseline import next_sentence_baseline, unigram_baseline
from bert_tf.training import JobArgumentError
from tests.helpers import jobs, training_data

BASELINES = ("mlm_unigram_accuracy", "mlm_unigram_loss", "nsp_majority_accuracy", "nsp_prior_loss")
HELPER = str(training_data.ROOT / "tests" / "helpers" / "training_run.py")
TIMEOUT = 150
STEPS = 20


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pretrain_job")
    records = training_data.write_pretraining_records(tmp / "records")
    config = training_data.tiny_bert_config(training_data.vocab_size(), num_layers=1)
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
        "num_train_steps": STEPS,
        "num_warmup_steps": 3,
        "save_checkpoints_steps": 10,
        "keep_checkpoint_max": 3,
        "max_eval_steps": 0,
        "dynamic_masking": False,
        "shuffle_buffer_size": 100,
    }
    return tmp, config, arguments


def _flags(arguments, output_dir):
    flags = [f"--output_dir={output_dir}", "--iterations_per_loop=5"]
    for name, value in arguments.items():
        if isinstance(value, bool):
            flags.append(f"--{name}" if value else f"--no{name}")
        else:
            flags.append(f"--{name}={value}")
    return flags


def _start(command, log_path):
    log = open(log_path, "w")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=str(training_data.ROOT), env=training_data.subprocess_env()
    )
    log.close()
    return process


def _finish(process, log_path):
    try:
        process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=60)
    return process.returncode, open(log_path).read()


def _checkpoint_values(path):
    # The object graph records Python-side names (e.g. Keras' global seed
    # generator counters), which differ between processes; values are what count.
    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name, _ in tf.train.list_variables(path)
        if not name.startswith(("train_iterator/", "save_counter/", "_CHECKPOINTABLE_OBJECT_GRAPH"))
    }


@pytest.fixture(scope="module")
def runs(setup):
    tmp, _, arguments = setup
    killed_dir = tmp / "killed"
    killed = _start(
        [
            sys.executable,
            HELPER,
            "pretrain",
            "--kill_at_step=15",
            "--args=" + json.dumps(dict(arguments, output_dir=str(killed_dir), steps_per_loop=5)),
        ],
        tmp / "killed.log",
    )
    try:
        # Meanwhile, the uninterrupted reference in this process.
        losses = []
        reference = jobs.pretrain(
            **arguments,
            output_dir=str(tmp / "uninterrupted"),
            steps_per_loop=5,
            loop_callback=lambda step, metrics: losses.append(metrics["loss"]),
        )
        killed_result = _finish(killed, tmp / "killed.log")
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait(timeout=60)
    listing_after_kill = sorted(os.listdir(killed_dir))
    # Debris of a save interrupted at step 20: data written, `checkpoint` index not yet updated.
    shutil.copyfile(killed_dir / "ckpt-10.index", killed_dir / "ckpt-20.index")
    (killed_dir / "ckpt-20.data-00000-of-00001").write_bytes(b"truncated")
    (killed_dir / "ckpt-20_temp").mkdir()
    flagfile = tmp / "flags.txt"
    flagfile.write_text("\n".join(_flags(arguments, killed_dir)) + "\n")
    resumed = _start([sys.executable, "-m", "experiments.pretrain", f"--flagfile={flagfile}"], tmp / "resumed.log")
    return {
        "reference": reference,
        "losses": losses,
        "killed": killed_result,
        "resumed": _finish(resumed, tmp / "resumed.log"),
        "listing_after_kill": listing_after_kill,
        "dirs": (tmp / "uninterrupted", killed_dir),
    }


def _evaluate_checkpoint(config, checkpoint, eval_file, batch_size):
    """The pretraining evaluation's metrics, computed with numpy from a checkpoint and the eval file in order:
    each batch's masked-LM accuracy (over its real predictions) and loss, weighted by the batch's examples."""
    from bert_tf import BertEncoder, BertPretrainer
    from bert_tf.data import pretraining_features

    model = BertPretrainer(BertEncoder(config))
    tf.train.Checkpoint(**model.checkpoint_items).read(checkpoint).expect_partial()
    spec = {
        name: tf.io.FixedLenFeature(
            [
                1
                if name == "next_sentence_labels"
                else training_data.MAX_PREDICTIONS
                if "masked" in name
                else training_data.SEQ_LENGTH
            ],
            tf.float32 if name in pretraining_features.FLOAT_FEATURES else tf.int64,
        )
        for name in pretraining_features.INT_FEATURES + pretraining_features.FLOAT_FEATURES
    }
    totals, count = {}, 0
    for records in tf.data.TFRecordDataset(eval_file).batch(batch_size):
        f = {k: v.numpy() for k, v in tf.io.parse_example(records, spec).items()}
        outputs = model(
            {
                "input_word_ids": f["input_ids"].astype("int32"),
                "input_mask": f["input_mask"].astype("int32"),
                "input_type_ids": f["segment_ids"].astype("int32"),
                "masked_lm_positions": f["masked_lm_positions"].astype("int32"),
            },
            training=False,
        )
        logits = np.asarray(outputs["mlm_logits"], np.float64)
        log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        log_probs -= logits.max(-1, keepdims=True)
        ids, weights = f["masked_lm_ids"], f["masked_lm_weights"]
        picked = np.take_along_axis(log_probs, ids[..., None], axis=-1)[..., 0]
        nsp = np.asarray(outputs["sentence_logits"], np.float64)
        nsp_log_probs = nsp - nsp.max(-1, keepdims=True)
        nsp_log_probs -= np.log(np.exp(nsp_log_probs).sum(-1, keepdims=True))
        labels = f["next_sentence_labels"][:, 0]
        batch = {
            "mlm_accuracy": ((logits.argmax(-1) == ids) * weights).sum() / (weights.sum() + 1e-5),
            "mlm_loss": -(picked * weights).sum() / (weights.sum() + 1e-5),
            "nsp_accuracy": (nsp.argmax(-1) == labels).mean(),
            "nsp_loss": -nsp_log_probs[np.arange(len(labels)), labels].mean(),
        }
        batch["loss"] = batch["mlm_loss"] + batch["nsp_loss"]
        for name, value in batch.items():
            totals[name] = totals.get(name, 0.0) + value * len(labels)
        count += len(labels)
    return dict({name: value / count for name, value in totals.items()}, num_examples=count)


def test_run_pretraining_writes_a_model_directory(setup, runs):
    tmp, config, arguments = setup
    output_dir = runs["dirs"][0]
    assert runs["reference"].step == STEPS
    assert runs["losses"][-1] < runs["losses"][0]
    assert BertConfig.from_json_file(str(output_dir / "bert_config.json")) == config
    assert (output_dir / "vocab.txt").read_bytes() == open(arguments["vocab_file"], "rb").read()
    assert tf.train.latest_checkpoint(str(output_dir)) == str(output_dir / f"ckpt-{STEPS}")
    assert sorted(os.listdir(output_dir / "summaries")) == ["eval", "train"]
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["step"] == STEPS and results["num_examples"] > 0
    assert results == pytest.approx(dict(runs["reference"].eval_metrics, step=STEPS))
    # The evaluation's numbers, recomputed here from the saved checkpoint and the eval file.
    expected = _evaluate_checkpoint(config, str(output_dir / f"ckpt-{STEPS}"), arguments["eval_input_file"], 8)
    baselines = {name: results.pop(name) for name in BASELINES}
    assert results == pytest.approx(dict(expected, step=STEPS), abs=1e-5)
    # Beside them, what a model that ignores its input scores (bert_tf.data.unigram_baseline).
    shapes = (arguments["max_seq_length"], arguments["max_predictions_per_seq"])
    unigram = unigram_baseline(arguments["input_file"], arguments["eval_input_file"], *shapes, config.vocab_size)
    nsp = next_sentence_baseline(arguments["eval_input_file"], *shapes)
    assert baselines == pytest.approx(
        {
            "mlm_unigram_accuracy": unigram.accuracy,
            "mlm_unigram_loss": unigram.loss,
            "nsp_majority_accuracy": nsp.accuracy,
            "nsp_prior_loss": nsp.loss,
        }
    )
    # A model directory for the rest of the package: the encoder loads from it.
    encoder = load_encoder(str(output_dir))
    saved = _checkpoint_values(str(output_dir / f"ckpt-{STEPS}"))
    np.testing.assert_array_equal(
        encoder.pooler.kernel.numpy(), saved["encoder/pooler/_kernel/.ATTRIBUTES/VARIABLE_VALUE"]
    )


def test_cli_with_flagfile_logs_progress(runs):
    returncode, log = runs["resumed"]
    assert returncode == 0, log[-3000:]
    # Progress lines every --iterations_per_loop=5 steps (from step 10, where it resumed), with ETA.
    progress = [line for line in log.splitlines() if f"/{STEPS} | loss " in line]
    assert [line.split("] ")[-1].split(" |")[0] for line in progress] == ["step 15/20", "step 20/20"]
    assert all("examples/s | ETA" in line for line in progress)
    assert f"Done at step {STEPS}" in log


def test_killed_run_resumes_to_the_same_weights(runs):
    returncode, log = runs["killed"]
    assert returncode == -signal.SIGKILL, log[-3000:]
    assert "ckpt-10.index" in runs["listing_after_kill"] and "ckpt-20.index" not in runs["listing_after_kill"]
    returncode, log = runs["resumed"]
    assert returncode == 0, log[-3000:]
    assert "(step 10)" in log and "Restored the training data position" in log
    reference_dir, resumed_dir = runs["dirs"]
    reference = _checkpoint_values(str(reference_dir / f"ckpt-{STEPS}"))
    resumed = _checkpoint_values(str(resumed_dir / f"ckpt-{STEPS}"))
    assert sorted(reference) == sorted(resumed)
    assert any(name.startswith("rng/") for name in reference)  # dropout state travels with the checkpoint
    assert any(name.startswith("optimizer/m/") for name in reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)
    assert json.loads((resumed_dir / "eval_results.json").read_text()) == json.loads(
        (reference_dir / "eval_results.json").read_text()
    )


def test_init_checkpoint_restores_encoder_and_heads_with_dynamic_masking(setup, runs, tmp_path):
    _, _, arguments = setup
    source = runs["dirs"][0]
    # One step with warm-up: its learning rate is 0, so the weights stay those restored.
    result = jobs.pretrain(
        **dict(
            arguments,
            eval_input_file=None,
            num_train_steps=1,
            num_warmup_steps=1,
            steps_per_loop=1,
            init_checkpoint=str(source),
            dynamic_masking=True,
        ),
        output_dir=str(tmp_path / "warm"),
    )
    assert result.step == 1 and np.isfinite(result.train_metrics["mlm_loss"])
    reference = _checkpoint_values(str(source / f"ckpt-{STEPS}"))
    warm = _checkpoint_values(result.checkpoint)
    for name, value in reference.items():
        if name.startswith(("encoder/", "masked_lm/", "next_sentence/")):
            np.testing.assert_array_equal(warm[name], value, err_msg=name)


def _rejects(arguments, tmp_path, match, error=JobArgumentError, **changes):
    with pytest.raises(error, match=match):
        jobs.pretrain(**dict(arguments, output_dir=str(tmp_path / "out"), **changes))
    assert not os.path.exists(tmp_path / "out")  # checked before anything is written


@pytest.mark.parametrize(
    "changes,match",
    [
        ({"preset": "bert_tiny"}, "exactly one of --bert_config_file and --preset"),
        ({"bert_config_file": None}, r"exactly one of --bert_config_file and --preset \(got neither\)"),
        ({"bert_config_file": None, "preset": "bert_huge"}, "--preset: Unknown BERT preset 'bert_huge'"),
        ({"input_file": "/nonexistent/*.tfrecord"}, "--input_file='/nonexistent/.*matches no file"),
        ({"eval_input_file": "/nonexistent.tfrecord"}, "--eval_input_file="),
        ({"max_seq_length": 64}, "--max_seq_length=64 exceeds the model's max_position_embeddings=32"),
        ({"max_seq_length": 16}, "--input_file: .*feature 'input_ids' has length 32 but seq_length=16"),
        ({"num_warmup_steps": 100}, f"--num_warmup_steps=100 exceeds --num_train_steps={STEPS}"),
        ({"train_batch_size": 0}, "--train_batch_size must be an integer >= 1"),
        ({"vocab_file": None, "dynamic_masking": True}, "--dynamic_masking needs --vocab_file"),
        ({"init_checkpoint": "/nonexistent/ckpt-5"}, "--init_checkpoint: Checkpoint not found"),
        ({"num_gpus": 4}, "--distribution_strategy=one_device: .*num_gpus=4"),
    ],
)
def test_bad_arguments_are_rejected_naming_the_flag(setup, tmp_path, changes, match):
    _, _, arguments = setup
    _rejects(arguments, tmp_path, match, **changes)


@pytest.mark.parametrize(
    "changes,match",
    [
        ({"distribution_strategy": "tpu"}, "--distribution_strategy=tpu needs --tpu"),
        ({"tpu": "my-tpu"}, "--tpu='my-tpu' is only used with --distribution_strategy=tpu"),
        ({"mixed_precision": "float16"}, "--mixed_precision='float16'"),
    ],
)
def test_bad_runtime_arguments_are_rejected_naming_the_flag(setup, tmp_path, changes, match):
    # RuntimeConfig, shared with fine-tuning, checks these; the one error type of the jobs.
    _, _, arguments = setup
    _rejects(arguments, tmp_path, match, error=JobArgumentError, **changes)


def test_vocab_larger_than_the_config_is_refused(setup, tmp_path):
    # The one rule (bert_tf.checkpoints.model_source): at most vocab_size tokens; fewer leave rows unused.
    _, config, arguments = setup
    vocab = tmp_path / "vocab.txt"
    size = config.vocab_size + 1
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n" + "".join(f"w{i}\n" for i in range(size - 5)))
    _rejects(
        arguments,
        tmp_path,
        f"vocab.txt has {size} tokens but the model's config has vocab_size=",
        vocab_file=str(vocab),
    )


def test_batch_size_must_divide_over_replicas(setup, tmp_path, monkeypatch):
    _, _, arguments = setup
    from bert_tf.training import distribution

    class ThreeReplicas:
        num_replicas_in_sync = 3

    monkeypatch.setattr(distribution, "get_strategy", lambda *args, **kwargs: ThreeReplicas())
    _rejects(arguments, tmp_path, "--train_batch_size=8 is not divisible by the 3 replicas")


def test_output_dir_of_another_model_is_not_resumed(setup, runs, tmp_path):
    _, config, arguments = setup
    other = tmp_path / "other.json"
    BertConfig.from_dict(dict(config.to_dict(), intermediate_size=48)).to_json_file(str(other))
    with pytest.raises(JobArgumentError, match="holds a run of another model"):
        jobs.pretrain(**dict(arguments, bert_config_file=str(other), output_dir=str(runs["dirs"][0])))


def test_resume_refuses_another_vocabulary_and_leaves_the_output_alone(setup, runs, tmp_path):
    _, _, arguments = setup
    output_dir = runs["dirs"][0]
    before = {name: (output_dir / name).read_bytes() for name in ("vocab.txt", "bert_config.json")}
    tokens = open(arguments["vocab_file"], encoding="utf-8").read().split("\n")
    tokens[-2] = tokens[-2] + "x"  # same size, one other token
    other = tmp_path / "other_vocab.txt"
    other.write_text("\n".join(tokens), encoding="utf-8")
    with pytest.raises(JobArgumentError, match="--vocab_file=.*other_vocab.txt differs from"):
        jobs.pretrain(**dict(arguments, vocab_file=str(other), output_dir=str(output_dir)))
    assert {name: (output_dir / name).read_bytes() for name in before} == before


def test_special_tokens_are_checked_without_dynamic_masking(setup, tmp_path):
    _, _, arguments = setup
    tokens = open(arguments["vocab_file"], encoding="utf-8").read().split("\n")
    vocab = tmp_path / "no_mask.txt"
    vocab.write_text("\n".join("[MASKED]" if t == "[MASK]" else t for t in tokens), encoding="utf-8")
    _rejects(
        arguments,
        tmp_path,
        r"--vocab_file: .*no_mask.txt.* lacks the special token\(s\) \[MASK\]",
        vocab_file=str(vocab),
        dynamic_masking=False,
    )


@pytest.fixture(scope="module")
def dynamic_runs(setup):
    """Dynamic masking: uninterrupted here; in a subprocess killed inside step 13, resumed here.

    Without the held-out records: only the weights are compared (`runs` checks the evaluation)."""
    tmp, _, arguments = setup
    arguments = dict(arguments, dynamic_masking=True, steps_per_loop=5, eval_input_file=None)
    killed_dir = tmp / "dynamic_killed"
    # Inside the inner loop of steps 11-15, in step 13 itself (after its forward pass, before its update),
    # whatever the machine's speed: the helper's kill point is part of the step.
    killed = _start(
        [
            sys.executable,
            HELPER,
            "pretrain",
            "--kill_in_step=13",
            "--args=" + json.dumps(dict(arguments, output_dir=str(killed_dir))),
        ],
        tmp / "dynamic_killed.log",
    )
    try:
        jobs.pretrain(**arguments, output_dir=str(tmp / "dynamic_uninterrupted"))
        killed_result = _finish(killed, tmp / "dynamic_killed.log")
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait(timeout=60)
    listing = sorted(os.listdir(killed_dir))
    resumed = jobs.pretrain(**arguments, output_dir=str(killed_dir))
    return {
        "killed": killed_result,
        "listing": listing,
        "resumed": resumed,
        "dirs": (tmp / "dynamic_uninterrupted", killed_dir),
    }


def test_killed_mid_loop_with_dynamic_masking_resumes_to_the_same_weights(dynamic_runs):
    returncode, log = dynamic_runs["killed"]
    assert returncode == -signal.SIGKILL, log[-3000:]
    assert "ckpt-10.index" in dynamic_runs["listing"] and "ckpt-20.index" not in dynamic_runs["listing"]
    assert dynamic_runs["resumed"].step == STEPS
    reference_dir, resumed_dir = dynamic_runs["dirs"]
    reference = _checkpoint_values(str(reference_dir / f"ckpt-{STEPS}"))
    resumed = _checkpoint_values(str(resumed_dir / f"ckpt-{STEPS}"))
    assert sorted(reference) == sorted(resumed)
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)


def test_a_new_model_table_is_the_vocabulary_padded_at_most_to_a_multiple_of_128():
    from bert_tf.checkpoints import model_source

    config = training_data.tiny_bert_config(896, num_layers=1)
    model_source.check_new_model_table(config, 776, vocab_file="vocab.txt")  # padded to 7 x 128
    with pytest.raises(JobArgumentError) as error:
        model_source.check_new_model_table(config, 768, vocab_file="vocab.txt")
    assert str(error.value).startswith(
        "--vocab_file: vocab.txt has 768 tokens but the model's config has vocab_size=896"
    )
    assert "(or pad it to at most 768, a multiple of 128)" in str(error.value)
    with pytest.raises(JobArgumentError, match="token ids past 895 would have no embedding"):
        model_source.check_new_model_table(config, 900, vocab_file="vocab.txt")


def test_eval_only_needs_held_out_records_and_a_checkpoint(tmp_path, capsys):
    from experiments import pretrain
    from tests.helpers.absl_flags import run_main

    flags = ["--eval_only", f"--output_dir={tmp_path}", "--input_file=train.tfrecord"]
    assert run_main(pretrain, flags) == 2
    assert (
        capsys.readouterr().err.strip()
        == "pretrain: error: --eval_only needs --eval_input_file (the held-out TFRecords)."
    )
    assert run_main(pretrain, [*flags, "--eval_input_file=eval.tfrecord"]) == 2
    assert capsys.readouterr().err.strip() == f"pretrain: error: --output_dir: no checkpoint to evaluate in {tmp_path}."
