"""Dropout under MirroredStrategy: every replica draws its own mask (issue 22).

Two logical CPUs (configured before TensorFlow starts, so in a subprocess), one `Dropout(0.1)` built under
the strategy and called in `strategy.run` on the same input on both replicas, inside one `tf.function` as the
training loop calls it, and in a model compiled with XLA per replica (the loop's `--jit_compile` path under
mirrored). Before the replica id was folded into the mask's key both replicas applied one mask.
"""

import json
import subprocess
import sys

import numpy as np

from tests.helpers import training_data

SCRIPT = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from bert_tf.layers import Dropout

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    layer = Dropout(0.1, seed=5)
x = tf.ones([64, 512])

@tf.function
def step():
    return strategy.run(lambda: layer(x, training=True))

masks = {}
for call in range(2):
    per_replica = strategy.experimental_local_results(step())
    masks[call] = [(r.numpy() == 0).astype("uint8").tolist() for r in per_replica]
# The loop's per-replica XLA path (`--jit_compile` under mirrored): a Keras model built in the scope, its
# forward compiled with XLA on each replica.
with strategy.scope():
    inputs = keras.Input((512,))
    model = keras.Model(inputs, Dropout(0.1, seed=6)(inputs, training=True))
compiled = tf.function(lambda batch: model(batch, training=True), jit_compile=True, autograph=False)


@tf.autograph.experimental.do_not_convert
def replica_step(batch):  # as bert_tf/training/loop.py wraps its compiled step
    return compiled(batch)


jit = strategy.experimental_local_results(tf.function(lambda: strategy.run(replica_step, args=(x,)))())
masks["jit"] = [(r.numpy() == 0).astype("uint8").tolist() for r in jit]
# The one-device mask of the same seed, for the replica-0 check.
single = Dropout(0.1, seed=5)
masks["one_device"] = (single(x, training=True).numpy() == 0).astype("uint8").tolist()
json.dump(masks, open(sys.argv[1], "w"))
"""


def test_each_replica_draws_its_own_dropout_mask(tmp_path):
    out = tmp_path / "masks.json"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out)],
        env=training_data.subprocess_env(KERAS_BACKEND="tensorflow"),
        cwd=str(training_data.ROOT),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    masks = json.loads(out.read_text())
    for call in ("0", "1", "jit"):
        first, second = (np.array(m, bool) for m in masks[call])
        assert not np.array_equal(first, second), f"call {call}: both replicas dropped the same elements"
        for mask in (first, second):
            # 32,768 elements at rate 0.1: a standard deviation of 0.0017.
            assert abs(mask.mean() - 0.1) < 0.01
        # Independent masks share about rate**2 of the elements, not rate.
        assert abs((first & second).mean() - 0.01) < 0.005
    # Replica 0 draws what one device draws with the same seed state, so one-device runs are unchanged.
    np.testing.assert_array_equal(np.array(masks["0"][0], bool), np.array(masks["one_device"], bool))
    assert not np.array_equal(np.array(masks["0"][0], bool), np.array(masks["1"][0], bool))
