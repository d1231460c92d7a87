"""Tests of bert_tf.pretraining_data.instance_workers: helpers without TensorFlow that build pretraining records."""

import concurrent.futures
import io
import operator
import os
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from bert_tf.data import pretraining_features
from bert_tf.pretraining_data import instance_workers
from bert_tf.pretraining_data import instances as pi
from tests.helpers.processes import children


def _settings(seed=7):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40)] + ["##s"]
    return instance_workers.BuilderSettings(
        config=pi.InstanceConfig(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2),
        vocab=pi.VocabInfo.from_tokens(tokens),
        random_seed=seed,
        int_features=pretraining_features.INT_FEATURES,
        float_features=pretraining_features.FLOAT_FEATURES,
    )


def _chunk(seed=0):
    rng = np.random.default_rng(seed)
    documents = [[list(rng.integers(5, 46, rng.integers(3, 12))) for _ in range(rng.integers(2, 6))] for _ in range(8)]
    return pi.DocumentChunk.from_documents(documents)


def test_importing_the_helper_side_loads_neither_tensorflow_nor_keras():
    code = (
        "import sys; from bert_tf.pretraining_data import instance_workers; "
        "print(sorted({'tensorflow', 'keras', 'jax', 'absl'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_serve_answers_each_request_like_the_builder_in_this_process():
    settings = _settings()
    requests = io.BytesIO()
    pickle.dump(settings, requests)
    for index in (0, 3):
        pickle.dump((index, _chunk(index)), requests)
    pickle.dump((1, "not a chunk"), requests)
    requests.seek(0)
    results = io.BytesIO()
    instance_workers.serve(requests, results)
    results.seek(0)
    builder = instance_workers.InstanceBuilder(settings)
    for index in (0, 3):
        status, (records, stats) = pickle.load(results)
        expected_records, expected_stats = builder(index, _chunk(index))
        assert status == "ok" and records == expected_records and stats == expected_stats
        assert stats.num_instances == len(records) > 0
    status, message = pickle.load(results)
    assert status == "error" and "Traceback" in message


def test_helper_process_results_errors_and_death():
    settings = _settings()
    helper = instance_workers.HelperProcess(settings)
    try:
        futures = [helper.submit(index, _chunk(index)) for index in range(3)]
        builder = instance_workers.InstanceBuilder(settings)
        for index, future in enumerate(futures):
            assert future.result(timeout=60)[0] == builder(index, _chunk(index))[0]
        with pytest.raises(instance_workers.HelperError, match="(?s)instance helper process failed:.*AttributeError"):
            helper.submit(0, "not a chunk").result(timeout=60)
        helper._process.kill()
        with pytest.raises(instance_workers.HelperError, match=r"exited with status -9 \(killed by SIGKILL\)"):
            helper.submit(0, _chunk()).result(timeout=60)
    finally:
        helper.close(kill=True)


def test_a_helper_that_died_idle_fails_the_next_chunk_at_once():
    # The order that used to hang: the helper dies with nothing in flight, its reader has finished,
    # then a chunk is sent to it. The chunk's future must fail at once, and the pool must refuse it.
    pool = instance_workers.HelperPool(_settings(), num_helpers=1)
    try:
        (helper,) = pool._helpers
        helper._process.kill()
        helper._process.wait(timeout=60)
        helper._reader.join(timeout=60)
        assert not helper._reader.is_alive() and not helper.alive()
        future = helper.submit(0, _chunk())
        assert future.done()
        with pytest.raises(instance_workers.HelperError, match=f"helper process {helper.pid} exited with status -9"):
            future.result(timeout=0)
        with pytest.raises(instance_workers.HelperError, match="exited with status -9") as raised:
            pool.idle_helper()
        assert raised.value.exit_status == -9
    finally:
        pool.close()
    assert helper.pid not in children()


def test_a_helper_that_crashes_at_start_up_fails_the_run(monkeypatch):
    crash = [sys.executable, "-c", "raise SystemExit(3)"]
    monkeypatch.setattr(instance_workers, "_helper_command", lambda request_fd, result_fd: crash)
    pool = instance_workers.HelperPool(_settings(), num_helpers=1)
    try:
        (helper,) = pool._helpers
        helper._process.wait(timeout=60)
        with pytest.raises(instance_workers.HelperError, match="exited with status 3$"):
            # Whether the pool has noticed yet or not, the first chunk cannot wait forever.
            chosen = pool.idle_helper()
            instance_workers.wait_for(chosen.submit(0, _chunk()), chosen, poll_seconds=0.05)
    finally:
        pool.close()


def test_wait_for_notices_a_dead_helper():
    helper = instance_workers.HelperProcess(_settings())
    try:
        future = concurrent.futures.Future()  # a result no helper will ever give
        helper._process.kill()
        with pytest.raises(instance_workers.HelperError, match="exited with status -9"):
            instance_workers.wait_for(future, helper, poll_seconds=0.05)
    finally:
        helper.close(kill=True)


class _WritesToFd1:
    """Unpickles as the byte count of a C-level write to file descriptor 1 (what a noisy library does)."""

    def __reduce__(self):
        return os.write, (1, b"a stray write to fd 1\n")


class _Zero:
    def __reduce__(self):
        return operator.mul, (_WritesToFd1(), 0)


class _NoisyIndex:
    """Unpickles as `index`, writing to the helper's fd 1 on the way."""

    def __init__(self, index):
        self.index = index

    def __reduce__(self):
        return operator.add, (self.index, _Zero())


def test_writes_to_a_helpers_stdout_do_not_reach_its_results(capfd):
    settings = _settings()
    helper = instance_workers.HelperProcess(settings)
    try:
        future = helper.submit(_NoisyIndex(2), _chunk(2))
        assert future.result(timeout=60) == instance_workers.InstanceBuilder(settings)(2, _chunk(2))
    finally:
        helper.close()
    assert "a stray write to fd 1" in capfd.readouterr().err  # the helper's stdout is this process's stderr


def test_helpers_import_this_package_not_the_current_directorys(tmp_path, monkeypatch):
    # Another checkout's bert_tf in the current directory must not be what the helper runs.
    shadow = tmp_path / "bert_tf" / "pretraining_data"
    shadow.mkdir(parents=True)
    (shadow.parent / "__init__.py").write_text("")
    (shadow / "__init__.py").write_text("")
    (shadow / "instance_workers.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\nraise SystemExit(3)\n"
    )
    monkeypatch.chdir(tmp_path)
    settings = _settings()
    helper = instance_workers.HelperProcess(settings)
    try:
        assert helper.submit(1, _chunk(1)).result(timeout=60) == instance_workers.InstanceBuilder(settings)(
            1, _chunk(1)
        )
    finally:
        helper.close()
    assert not (tmp_path / "imported").exists()


def test_pool_keeps_each_helper_at_most_max_in_flight_ahead():
    pool = instance_workers.HelperPool(_settings(), num_helpers=1, max_in_flight=1)
    try:
        helper = pool.idle_helper()
        # A stopped helper cannot answer: the chunk stays in flight while the test looks.
        os.kill(helper.pid, signal.SIGSTOP)
        try:
            future = helper.submit(0, _chunk())
            assert not future.done() and helper.in_flight() == 1
            assert pool.idle_helper() is None
        finally:
            os.kill(helper.pid, signal.SIGCONT)
        future.result(timeout=60)
        assert helper.in_flight() == 0 and pool.idle_helper() is helper
    finally:
        pool.close()
    empty = instance_workers.HelperPool(_settings(), num_helpers=0)
    assert len(empty) == 0 and empty.idle_helper() is None


def test_closing_the_pool_leaves_no_process_behind():
    pool = instance_workers.HelperPool(_settings(), num_helpers=2)
    pids = [helper.pid for helper in pool._helpers]
    assert set(pids) <= set(children())
    pool.idle_helper().submit(0, _chunk()).result(timeout=60)
    pool.close()
    assert not set(pids) & set(children())


def _exited(pid):
    """True once `pid` has exited (gone, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_helpers_exit_when_the_tool_is_killed():
    # A tool killed with SIGKILL runs no clean-up: its helpers see the end of their request pipe and exit.
    code = (
        "import os, signal, sys; from tests.test_instance_workers import _settings, _chunk; "
        "from bert_tf.pretraining_data import instance_workers; "
        "pool = instance_workers.HelperPool(_settings(), num_helpers=2); "
        "pool.idle_helper().submit(0, _chunk()).result(timeout=60); "
        "print(' '.join(str(h.pid) for h in pool._helpers), flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    pids = [int(pid) for pid in result.stdout.split()]
    assert len(pids) == 2
    # Exiting takes milliseconds; the bound only keeps a failure from hanging the test.
    deadline = time.monotonic() + 60
    while not all(_exited(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_exited(pid) for pid in pids)
