"""Tests of bert_tf.training.distribution and of the loop under each strategy that runs on this machine.

Strategies that must be configured before TensorFlow starts run in subprocesses
(tests/helpers/training_run.py), all launched together by one module fixture:

* one process: one_device, then mirrored over 2 logical CPUs, then the clipping check (one
  MirroredStrategy per process);
* one process: one_device with mixed_float16, then mirrored with per-replica XLA (`:jit`, the step
  path that is not one fused computation);
* one process: mirrored with mixed_float16 (dynamic loss scaling across replicas);
* two processes: multi_worker_mirrored with `:jit`, 2 workers on 127.0.0.1;

then two multi_worker_mirrored workers killed after step 5 and restarted: the run that checks multi-worker
training and its checkpoints and summaries (a worker pair that nothing interrupts would add no check: the killed
run's first steps are in the checkpoint the restarted pair resumes from).

Every run trains on identical global batches (dropout 0), so all must end with the weights of the
one-device run of the same precision. TPUs cannot run here: the TPU path is tested up to the
resolver's errors.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import training
from tests.helpers import training_data

HELPER = str(training_data.ROOT / "tests" / "helpers" / "training_run.py")
TIMEOUT = 400  # five TensorFlow processes share the CI machine's two cores
STEPS = 6


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(args, log_path, **env):
    log = open(log_path, "w")
    process = subprocess.Popen(
        [sys.executable, HELPER] + args,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=training_data.subprocess_env(**env),
        cwd=str(training_data.ROOT),
    )
    process.log_path = log_path
    log.close()
    return process


def _wait(processes):
    """Waits for all processes (bounded); kills every one still running when one fails or time runs out."""
    try:
        for process in processes:
            process.wait(timeout=TIMEOUT)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)
    return [(process.returncode, open(process.log_path).read()) for process in processes]


def _workers(tmp, run, *extra, log_name=""):
    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    return [
        _launch(
            [
                "synthetic",
                f"--strategy={run}",
                f"--model_dir={tmp}",
                f"--out={tmp}/worker{i}",
                f"--steps={STEPS}",
                "--steps_per_loop=2",
                "--save_steps=3",
                *extra,
            ],
            f"{tmp}/{run}{log_name}.worker{i}.log",
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
        )
        for i in range(2)
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("strategies")
    common = ["--logical_cpus=2", f"--model_dir={tmp}", f"--steps={STEPS}", "--steps_per_loop=3", "--save_steps=3"]
    single = _launch(
        [
            "synthetic",
            "--strategy=one_device,mirrored",
            f"--out={tmp}/single",
            f"--clipping_out={tmp}/clipping.json",
            *common,
        ],
        f"{tmp}/single.log",
    )
    jit = _launch(
        ["synthetic", "--strategy=one_device:float16,mirrored:jit", f"--out={tmp}/jit", *common], f"{tmp}/jit.log"
    )
    float16 = _launch(
        ["synthetic", "--strategy=mirrored:float16", f"--out={tmp}/float16", *common], f"{tmp}/float16.log"
    )
    jit_workers = _workers(tmp, "multi_worker_mirrored:jit")
    results = _wait([single, jit, float16] + jit_workers)
    return tmp, results[0], {"jit": results[1], "float16": results[2], "jit_workers": results[3:]}


def _load(path):
    data = np.load(path)
    return {name: data[name] for name in data.files}


def _assert_same_training(run, reference, atol):
    weights = [name for name in reference if not name.startswith("__")]
    assert len(weights) > 20
    for name in weights:
        np.testing.assert_allclose(run[name], reference[name], atol=atol, rtol=0, err_msg=name)
    for metric in ("loss", "mlm_loss", "nsp_loss", "nsp_accuracy", "num_examples"):
        assert float(run[f"__eval_{metric}__"]) == pytest.approx(float(reference[f"__eval_{metric}__"]), abs=1e-5)


def test_mirrored_over_two_replicas_trains_like_one_device(runs):
    tmp, (returncode, log), _ = runs
    assert returncode == 0, log[-3000:]
    reference, mirrored = _load(f"{tmp}/single.one_device.npz"), _load(f"{tmp}/single.mirrored.npz")
    assert int(reference["__replicas__"]) == 1 and int(mirrored["__replicas__"]) == 2
    assert int(mirrored["__eval_num_examples__"]) == 20  # partial last batches are evaluated too
    _assert_same_training(mirrored, reference, atol=1e-6)


def test_clipping_uses_the_global_norm_of_the_summed_gradients(runs):
    tmp, (returncode, log), _ = runs
    assert returncode == 0, log[-3000:]
    result = json.loads(open(f"{tmp}/clipping.json").read())
    assert result["replicas"] == 2
    norm = np.hypot(0.8, 0.8)
    np.testing.assert_allclose(result["norms"], [norm, norm], rtol=1e-6)
    # m = (1 - beta_1) * clipped sum = 0.1 * [0.8, 0.8] / |[0.8, 0.8]| on both replicas.
    np.testing.assert_allclose(result["first_moment"], [[0.1 / np.sqrt(2)] * 2] * 2, rtol=1e-5)


@pytest.fixture(scope="module")
def resumed_workers(runs, tmp_path_factory):
    """Two workers killed after step 5 (the step-3 checkpoint is the latest), then restarted."""
    tmp = tmp_path_factory.mktemp("workers_resume")
    killed = _wait(_workers(tmp, "multi_worker_mirrored", "--kill_at_step=5", log_name=".killed"))
    listing = sorted(os.listdir(tmp / "multi_worker_mirrored"))
    resumed = _wait(_workers(tmp, "multi_worker_mirrored", log_name=".resumed"))
    return tmp, killed, listing, resumed


def test_multi_worker_mirrored_with_two_processes_trains_like_one_device(runs, resumed_workers):
    tmp, _, _, resumed = resumed_workers
    for returncode, log in resumed:
        assert returncode == 0, log[-3000:]
    model_dir = tmp / "multi_worker_mirrored"
    assert tf.train.latest_checkpoint(str(model_dir)) == str(model_dir / "ckpt-6")
    # The second worker keeps its own checkpoints (with its data position) apart from the model directory.
    assert tf.train.latest_checkpoint(str(model_dir / "workers" / "worker-1")).endswith("ckpt-6")
    assert not os.path.exists(model_dir / "workers" / "worker-0")
    assert sorted(os.listdir(model_dir / "summaries")) == ["eval", "train"]
    assert not os.path.exists(model_dir / "workers" / "worker-1" / "summaries")  # only the chief writes them
    reference = _load(f"{runs[0]}/single.one_device.npz")
    chief, worker = _load(f"{tmp}/worker0.multi_worker_mirrored.npz"), _load(f"{tmp}/worker1.multi_worker_mirrored.npz")
    assert bool(chief["__is_chief__"]) and not bool(worker["__is_chief__"])
    assert int(chief["__replicas__"]) == 2
    _assert_same_training(chief, reference, atol=1e-6)
    _assert_same_training(worker, reference, atol=1e-6)


def test_killed_multi_worker_run_resumes_to_the_weights_of_one_device(runs, resumed_workers):
    import signal

    tmp, killed, listing, resumed = resumed_workers
    # Each worker SIGKILLs itself after step 5; the one that gets there second may instead find its
    # peer gone in the middle of a collective, which fails it first: what a real worker loss does.
    assert -signal.SIGKILL in [returncode for returncode, _ in killed], [log[-3000:] for _, log in killed]
    for returncode, log in killed:
        assert returncode == -signal.SIGKILL or (returncode == 1 and "UnavailableError" in log), log[-3000:]
    assert "ckpt-3.index" in listing and "ckpt-6.index" not in listing
    for returncode, log in resumed:
        assert returncode == 0, log[-3000:]
        assert "Restored the training data position" in log
    reference = _load(f"{runs[0]}/single.one_device.npz")
    _assert_same_training(_load(f"{tmp}/worker0.multi_worker_mirrored.npz"), reference, atol=1e-6)
    _assert_same_training(_load(f"{tmp}/worker1.multi_worker_mirrored.npz"), reference, atol=1e-6)


def test_mirrored_with_per_replica_xla_trains_like_one_device(runs):
    tmp, _, more = runs
    returncode, log = more["jit"]
    assert returncode == 0, log[-3000:]
    reference, mirrored = _load(f"{tmp}/single.one_device.npz"), _load(f"{tmp}/jit.mirrored:jit.npz")
    assert int(mirrored["__replicas__"]) == 2
    # XLA fuses and reorders float32 arithmetic: equal up to rounding, far below the training's changes.
    _assert_same_training(mirrored, reference, atol=1e-5)


def test_multi_worker_mirrored_with_per_replica_xla_trains_like_one_device(runs):
    tmp, _, more = runs
    for returncode, log in more["jit_workers"]:
        assert returncode == 0, log[-3000:]
    reference = _load(f"{tmp}/single.one_device.npz")
    chief = _load(f"{tmp}/worker0.multi_worker_mirrored:jit.npz")
    assert int(chief["__replicas__"]) == 2 and bool(chief["__is_chief__"])
    _assert_same_training(chief, reference, atol=1e-5)
    _assert_same_training(_load(f"{tmp}/worker1.multi_worker_mirrored:jit.npz"), reference, atol=1e-5)


def test_mixed_float16_under_mirrored_scales_the_loss_and_trains_like_one_device(runs):
    tmp, _, more = runs
    for returncode, log in (more["jit"], more["float16"]):
        assert returncode == 0, log[-3000:]
    reference, mirrored = _load(f"{tmp}/jit.one_device:float16.npz"), _load(f"{tmp}/float16.mirrored:float16.npz")
    assert str(reference["__compute_dtype__"]) == str(mirrored["__compute_dtype__"]) == "float16"
    assert int(mirrored["__replicas__"]) == 2
    float32 = _load(f"{tmp}/single.one_device.npz")
    # float16 training differs from float32 by more than the replica split changes it.
    moved = max(np.abs(float32[k] - reference[k]).max() for k in reference if not k.startswith("__"))
    assert moved > 1e-4
    _assert_same_training(mirrored, reference, atol=1e-4)
    # The dynamic loss scale travelled with the checkpoint: a power of two, 2**15 or lower after overflows.
    checkpoint = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp / "mirrored:float16")))
    scale = float(checkpoint.get_tensor("loss_scale/scale/.ATTRIBUTES/VARIABLE_VALUE"))
    assert 1 <= scale <= 2**15 and np.log2(scale) == int(np.log2(scale))


def test_strategies_in_this_process():
    strategy = training.get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert training.is_chief(strategy) and training.worker_index(strategy) == 0 and training.num_workers(strategy) == 1
    mirrored = training.get_strategy("mirrored", num_gpus=0)
    assert isinstance(mirrored, tf.distribute.MirroredStrategy) and mirrored.num_replicas_in_sync == 1


def test_strategy_argument_errors(monkeypatch):
    with pytest.raises(ValueError, match="Unknown distribution strategy 'parameter_server'"):
        training.get_strategy("parameter_server")
    with pytest.raises(ValueError, match="num_gpus=1 but this machine has 0 visible GPU"):
        training.get_strategy("mirrored", num_gpus=1)
    with pytest.raises(ValueError, match="num_gpus must be a non-negative integer"):
        training.get_strategy("one_device", num_gpus=-1)
    with pytest.raises(ValueError, match="strategy is 'mirrored', not 'tpu'"):
        training.get_strategy("mirrored", tpu="my-tpu")
    with pytest.raises(ValueError, match="multi_worker_mirrored uses every local GPU"):
        training.get_strategy("multi_worker_mirrored", num_gpus=2)
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG environment variable is not valid JSON"):
        training.get_strategy("multi_worker_mirrored")
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}})
    )
    with pytest.raises(ValueError, match="is not in its cluster"):
        training.get_strategy("multi_worker_mirrored")


def test_tpu_path_up_to_the_missing_tpu():
    # Never a real TPU name here: resolving one contacts the cloud metadata server.
    with pytest.raises(ValueError, match="Please provide a TPU Name"):
        tf.distribute.cluster_resolver.TPUClusterResolver(tpu="")
    for address in (None, ""):
        with pytest.raises(ValueError, match="needs a TPU address"):
            training.get_strategy("tpu", tpu=address)
    with pytest.raises(training.TPUNotFoundError, match="No TPU system could be initialised at 'local'") as error:
        training.get_strategy("tpu", tpu="local")
    assert isinstance(error.value.__cause__, tf.errors.NotFoundError)
