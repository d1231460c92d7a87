"""Tests of `bert_tf.training.preemption`: training jobs stopped by SIGTERM save, exit 143 and resume exactly.

The watcher's own contract runs in this process. The jobs run as their command lines (`python -m
experiments.pretrain` / `experiments.finetune`, through `tests/helpers/training_run.py cli`), which SIGTERM
themselves inside a training step drawn at random (seeded) and wait there until the watcher has seen the signal,
so the step they stop after does not depend on the machine's speed. All of them start together in one module
fixture:

* pretraining in one process, beside the same run uninterrupted in this process;
* pretraining and fine-tuning under multi_worker_mirrored, two workers on 127.0.0.1, only the second one
  signalled, beside the same two workers uninterrupted: both must stop after the same step.

Fine-tuning is not also preempted in one process: the loop's one-process stop is the pretraining run's, the
fine-tuning command's exit 143 and its resumption are its workers', and a fine-tuning run killed in one process
resumes bit for bit in tests/test_finetune_distributed.py.

Each preempted run must exit with status 143 and one line naming the step and the checkpoint, leave that
step's checkpoint as the latest, and, run again, end with the uninterrupted run's weights bit for bit
(`--deterministic`, dropout on).
"""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.cli import PREEMPTED_EXIT_CODE
from bert_tf.errors import JobArgumentError
from bert_tf.training import PreemptionWatcher, RuntimeConfig
from bert_tf.training.preemption import GRACE_EXPIRED_EXIT_CODE
from tests.fixtures.finetune import synthetic
from tests.helpers import jobs, training_data

HELPER = str(training_data.ROOT / "tests" / "helpers" / "training_run.py")
TIMEOUT = 900  # up to ten TensorFlow processes share the CI machine's two cores
STEPS = 12
# The training step inside which each run is sent its SIGTERM (1-based, counted from the run's start).
PRETRAIN_STEP = random.Random(55).randint(1, STEPS - 1)
WORKERS_STEPS = {
    "pretrain": random.Random(57).randint(1, STEPS - 1),
    "finetune": random.Random(58).randint(1, STEPS - 1),
}
MODULES = {"pretrain": "experiments.pretrain", "finetune": "experiments.finetune"}


# --- the watcher in this process ----------------------------------------------------


def _current_wakeup_fd():
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


def test_the_watcher_handles_sigterm_only_while_entered():
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), _current_wakeup_fd())
    watcher = PreemptionWatcher(grace_seconds=30)
    with watcher:
        assert watcher.active and not watcher.requested()
        assert signal.getsignal(signal.SIGTERM) is not before[0] and _current_wakeup_fd() != before[2]
        os.kill(os.getpid(), signal.SIGTERM)
        assert watcher.wait_until_requested(timeout=60)
        # What the loop's graph reads after each step: one worker here, so no all-reduce.
        assert bool(watcher.stop_requested(tf.distribute.get_strategy(), num_workers=1, use_tpu=False))
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), _current_wakeup_fd()) == before
    # Its thread and its grace-period deadline are gone with it: nothing will end this process later.
    assert not [t for t in threading.enumerate() if t.name == "PreemptionWatcher" or isinstance(t, threading.Timer)]


def test_sigint_interrupts_before_a_sigterm_and_is_ignored_after_it():
    # Python's own Ctrl-C handler, whatever an earlier test in this worker left installed.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_then_preempt()
    finally:
        signal.signal(signal.SIGINT, inherited)


def _interrupt_then_preempt():
    watcher = PreemptionWatcher(grace_seconds=30)
    with watcher:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(60)  # interrupted by the handler
        os.kill(os.getpid(), signal.SIGTERM)
        assert watcher.wait_until_requested(timeout=60)
        # Saving the preemption checkpoint now: neither a second SIGTERM nor Ctrl-C may interrupt it.
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)


def test_a_stop_that_outlasts_the_grace_period_ends_the_process_with_status_1():
    script = (
        "import os, signal, time\n"
        "from bert_tf.training.preemption import PreemptionWatcher\n"
        "with PreemptionWatcher(grace_seconds=1) as watcher:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    watcher.wait_until_requested(timeout=60)\n"
        "    time.sleep(120)  # a step or a save that does not end\n"
        "print('not reached')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=str(training_data.ROOT),
        env=training_data.subprocess_env(),
    )
    assert result.returncode == GRACE_EXPIRED_EXIT_CODE == 1, result.stderr[-3000:]
    assert "not reached" not in result.stdout
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: preemption: no checkpoint saved within the grace period of 1 s after SIGTERM; exiting.")
    )


def test_the_grace_period_is_checked_and_zero_turns_the_handling_off():
    assert RuntimeConfig().preemption_watcher().grace_seconds == 30
    assert RuntimeConfig(preemption_grace_seconds=0).preemption_watcher() is None
    for bad in (-1, float("inf"), float("nan"), True, "30"):
        with pytest.raises(JobArgumentError, match="--preemption_grace_seconds must be a number of seconds >= 0"):
            RuntimeConfig(preemption_grace_seconds=bad)


# --- jobs stopped by SIGTERM ------------------------------------------------------------


def _flags(arguments):
    return [
        f"--{name}" if value is True else f"--no{name}" if value is False else f"--{name}={value}"
        for name, value in arguments.items()
    ]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(module, arguments, log_path, term_in_step=0, **env):
    command = [sys.executable, HELPER, "cli", f"--module={module}", "--args=" + json.dumps(_flags(arguments))]
    if term_in_step:
        command.append(f"--term_in_step={term_in_step}")
    log = open(log_path, "w")
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=training_data.subprocess_env(**env),
        cwd=str(training_data.ROOT),
    )
    log.close()
    process.log_path = log_path
    return process


def _workers(job, arguments, log_prefix, term_in_step=0):
    """Two multi_worker_mirrored workers of `job`'s command line; only the second gets `term_in_step`."""
    cluster = {"worker": [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]}
    return [
        _launch(
            MODULES[job],
            dict(arguments, distribution_strategy="multi_worker_mirrored"),
            f"{log_prefix}.worker{i}.log",
            term_in_step=term_in_step if i == 1 else 0,
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
        )
        for i in range(2)
    ]


def _wait(processes):
    """Waits for all (bounded); kills every one still running when time runs out. Returns (status, log)s."""
    try:
        for process in processes:
            process.wait(timeout=TIMEOUT)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)
    return [(process.returncode, open(process.log_path).read()) for process in processes]


def _checkpoint_values(path):
    # Values, not the object graph; save_counter counts the preempted run's extra save.
    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name, _ in tf.train.list_variables(path)
        if not name.startswith(("train_iterator/", "save_counter/", "_CHECKPOINTABLE_OBJECT_GRAPH"))
    }


def _assert_same_weights(path, reference_path):
    reference, values = _checkpoint_values(reference_path), _checkpoint_values(path)
    assert sorted(values) == sorted(reference)
    assert any(name.startswith("optimizer/") for name in reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(values[name], value, err_msg=name)


def _arguments(tmp):
    """{job: its flags as a flat dict}: a 1-layer BERT, 12 steps, checkpoints every 6, loops of 4."""
    records = training_data.write_pretraining_records(tmp / "records")
    training_data.tiny_bert_config(training_data.vocab_size(), num_layers=1).to_json_file(str(tmp / "bert_config.json"))
    schedule = dict(num_train_steps=STEPS, steps_per_loop=4, save_checkpoints_steps=6, deterministic=True)
    pretraining = dict(
        schedule,
        input_file=records["train"],
        bert_config_file=str(tmp / "bert_config.json"),
        vocab_file=records["vocab"],
        seed=11,
        max_seq_length=training_data.SEQ_LENGTH,
        max_predictions_per_seq=training_data.MAX_PREDICTIONS,
        train_batch_size=8,
        learning_rate=2e-3,
        num_warmup_steps=3,
        dynamic_masking=False,
        shuffle_buffer_size=100,
    )
    finetuning = dict(
        schedule,
        task="classification",
        model_dir=synthetic.make_model_dir(str(tmp / "model")),
        train_file=synthetic.write_tsv(str(tmp / "train.tsv"), ["text_a", "label"], synthetic.sentiment_rows(96, 1)),
        max_seq_length=16,
        train_batch_size=16,
        learning_rate=1e-3,
        do_train=True,
        seed=3,
        **synthetic.ORIGINAL_UPDATE,
    )
    return {"pretrain": pretraining, "finetune": finetuning}


def _in_process(job, arguments, output_dir):
    """`job` uninterrupted (or resumed) in this process."""
    run = jobs.pretrain if job == "pretrain" else jobs.finetune
    run(**dict(arguments, output_dir=str(output_dir)))


def _preempt(tmp, arguments, dirs):
    """Every run that gets a SIGTERM, beside the uninterrupted workers and (here) the one-process reference.

    Returns {run: (exit status, log)}: "pretrain", "<job>_worker<i>" (preempted), "<job>_ref<i>" (not).
    """
    processes = {
        "pretrain": [
            _launch(
                MODULES["pretrain"],
                dict(arguments["pretrain"], output_dir=dirs["pretrain"]),
                tmp / "pretrain.log",
                PRETRAIN_STEP,
            )
        ]
    }
    for job in MODULES:  # two workers each, preempted and not
        processes[f"{job}_worker"] = _workers(
            job, dict(arguments[job], output_dir=dirs[f"{job}_workers"]), tmp / job, WORKERS_STEPS[job]
        )
        processes[f"{job}_ref"] = _workers(
            job, dict(arguments[job], output_dir=dirs[f"{job}_workers_reference"]), tmp / f"{job}_ref"
        )
    try:  # meanwhile, the uninterrupted one-process run
        _in_process("pretrain", arguments["pretrain"], dirs["pretrain_reference"])
    finally:
        results = _wait([process for group in processes.values() for process in group])
    preempted = {}
    for name, group in processes.items():
        for i in range(len(group)):
            preempted[name if len(group) == 1 else f"{name}{i}"] = results.pop(0)
    return preempted


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run's exit status and log, the latest checkpoints after the SIGTERMs, and the resumed workers'."""
    tmp = tmp_path_factory.mktemp("preemption")
    arguments = _arguments(tmp)
    names = ["pretrain", "pretrain_reference"]
    names += [job + run for job in MODULES for run in ("_workers", "_workers_reference")]
    dirs = {name: tmp / name for name in names}
    preempted = _preempt(tmp, arguments, dirs)
    checkpoints = {name: tf.train.latest_checkpoint(str(path)) for name, path in dirs.items()}
    for job in MODULES:
        checkpoints[f"{job}_worker-1"] = tf.train.latest_checkpoint(
            str(dirs[f"{job}_workers"] / "workers" / "worker-1")
        )
    # Run again: each resumes from the checkpoint of the step it stopped after.
    resumed = {
        job: _workers(job, dict(arguments[job], output_dir=dirs[f"{job}_workers"]), tmp / f"{job}_resumed")
        for job in MODULES
    }
    try:
        _in_process("pretrain", arguments["pretrain"], dirs["pretrain"])
    finally:
        results = _wait([process for group in resumed.values() for process in group])
    resumed_workers = {job: results[2 * i : 2 * i + 2] for i, job in enumerate(MODULES)}
    return {
        "tmp": tmp,
        "dirs": dirs,
        "preempted": preempted,
        "checkpoints_after_preemption": checkpoints,
        "resumed_workers": resumed_workers,
    }


def _assert_preempted(result, prog, step, checkpoint):
    returncode, log = result
    assert returncode == PREEMPTED_EXIT_CODE, log[-3000:]
    assert log.strip().splitlines()[-1] == (
        f"{prog}: preempted (SIGTERM): stopped after step {step} with the checkpoint {checkpoint}; "
        "run the same command again to resume."
    )


def _saved_step(checkpoint):
    return int(tf.train.load_checkpoint(checkpoint).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))


def test_sigterm_in_a_step_saves_that_step_exits_143_and_resumes_exactly(runs):
    out, step = runs["dirs"]["pretrain"], PRETRAIN_STEP
    checkpoint = str(out / f"ckpt-{step}")
    _assert_preempted(runs["preempted"]["pretrain"], "pretrain", step, checkpoint)
    assert runs["checkpoints_after_preemption"]["pretrain"] == checkpoint and _saved_step(checkpoint) == step
    _assert_same_weights(str(out / f"ckpt-{STEPS}"), str(runs["dirs"]["pretrain_reference"] / f"ckpt-{STEPS}"))


@pytest.mark.parametrize("job", list(MODULES))
def test_every_worker_stops_after_the_step_of_the_one_signalled_and_resumes_exactly(runs, job):
    out, step = runs["dirs"][f"{job}_workers"], WORKERS_STEPS[job]
    for i in (0, 1):
        returncode, log = runs["preempted"][f"{job}_ref{i}"]
        assert returncode == 0, log[-3000:]
    # Only worker 1 received the SIGTERM; the chief stops after the same step, and both save it.
    chief, worker = str(out / f"ckpt-{step}"), str(out / "workers" / "worker-1" / f"ckpt-{step}")
    _assert_preempted(runs["preempted"][f"{job}_worker0"], job, step, chief)
    _assert_preempted(runs["preempted"][f"{job}_worker1"], job, step, chief)
    assert "SIGTERM: stopping after the current step" not in runs["preempted"][f"{job}_worker0"][1]
    assert runs["checkpoints_after_preemption"][f"{job}_workers"] == chief and _saved_step(chief) == step
    assert runs["checkpoints_after_preemption"][f"{job}_worker-1"] == worker and _saved_step(worker) == step
    for returncode, log in runs["resumed_workers"][job]:
        assert returncode == 0, log[-3000:]
        assert f"(step {step})" in log and "Restored the training data position" in log
    reference = runs["dirs"][f"{job}_workers_reference"]
    _assert_same_weights(str(out / f"ckpt-{STEPS}"), str(reference / f"ckpt-{STEPS}"))
    _assert_same_weights(
        str(out / "workers" / "worker-1" / f"ckpt-{STEPS}"), str(reference / "workers" / "worker-1" / f"ckpt-{STEPS}")
    )
