"""Tests of tfrecords_tools.instance_workers: helpers without TensorFlow that build pretraining records."""

import io
import pickle
import subprocess
import sys

import numpy as np
import pytest

from bert_tf.data import pretraining_features
from tfrecords_tools import instance_workers
from tfrecords_tools import pretraining_instances as pi


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


def test_importing_the_helper_side_loads_neither_tensorflow_nor_bert_tf():
    code = (
        "import sys; from tfrecords_tools import instance_workers; "
        "print(sorted({'tensorflow', 'bert_tf', 'keras'} & set(sys.modules)))"
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
        with pytest.raises(RuntimeError, match="(?s)instance helper process failed:.*AttributeError"):
            helper.submit(0, "not a chunk").result(timeout=60)
        helper._process.kill()
        with pytest.raises(RuntimeError, match="exited with status -9"):
            helper.submit(0, _chunk()).result(timeout=60)
    finally:
        helper.close(kill=True)


def test_pool_keeps_each_helper_at_most_max_in_flight_ahead():
    pool = instance_workers.HelperPool(_settings(), num_helpers=1, max_in_flight=1)
    try:
        helper = pool.idle_helper()
        future = helper.submit(0, _chunk())
        if not future.done():
            assert pool.idle_helper() is None
        future.result(timeout=60)
        assert pool.idle_helper() is helper
    finally:
        pool.close()
    empty = instance_workers.HelperPool(_settings(), num_helpers=0)
    assert len(empty) == 0 and empty.idle_helper() is None
