"""Fine-tuning and prediction under MirroredStrategy over two logical CPUs, and mixed precision.

The logical devices must be configured before TensorFlow initialises, so the
mirrored run happens in a subprocess.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune, record_compute_dtypes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path.insert(0, {repo!r})
    from bert_tf.models import BertEncoder
    from bert_tf.tasks.base import numpy_dataset
    from bert_tf.tasks.inference import predict_outputs
    from tests.fixtures.finetune import synthetic
    from tests.helpers.jobs import finetune

    args = json.loads(sys.argv[1])
    results = finetune("classification", args["output_dir"], train_file=args["train"],
                       eval_file=args["dev"], model_dir=args["model_dir"], max_seq_length=16,
                       train_batch_size=32, eval_batch_size=6, learning_rate=1e-3, num_train_steps=60,
                       steps_per_loop=30, do_train=True, do_eval=True, distribution_strategy="mirrored",
                       seed=1)
    # Outputs come back in feature order, whatever the replica split and the padded last batch.
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        encoder = BertEncoder(synthetic.tiny_config())
    pooled = lambda inputs, training=False: encoder(inputs, training=training)["pooled_output"]
    rng = np.random.default_rng(0)
    arrays = {{"input_word_ids": rng.integers(5, 40, (13, 8)).astype("int32"),
              "input_mask": np.ones((13, 8), "int32"), "input_type_ids": np.zeros((13, 8), "int32")}}
    mirrored = predict_outputs(pooled, numpy_dataset(arrays, 4, training=False), strategy=strategy,
                               num_features=13)["logits"]
    single = np.asarray(encoder(arrays)["pooled_output"])
    results["max_difference"] = float(np.abs(mirrored - single).max())
    results["replicas"] = strategy.num_replicas_in_sync
    print("RESULTS " + json.dumps(results))
""")


def test_mirrored_strategy_over_two_replicas(tmp_path):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], synthetic.sentiment_rows(320, 1))
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["text_a", "label"], synthetic.sentiment_rows(50, 2))
    args = {"output_dir": str(tmp_path / "out"), "train": train, "dev": dev, "model_dir": model_dir}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT.format(repo=REPO), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULTS "))
    results = json.loads(line[len("RESULTS ") :])
    assert results["replicas"] == 2
    assert results["num_examples"] == 50  # 50 = 8 batches of 6 + 2, padded and dropped again
    assert results["accuracy"] >= 0.9
    assert results["max_difference"] < 1e-5


@pytest.mark.parametrize("jit_compile", [True, False], ids=["xla", "eager_graph"])
def test_mixed_bfloat16_computes_in_bfloat16_learns_and_saves_float32(tmp_path, monkeypatch, jit_compile):
    """Packed rows (the default) in mixed_bfloat16, with and without XLA (`--jit_compile`, off by default)."""
    from bert_tf.checkpoints import weights_file

    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], synthetic.sentiment_rows(320, 1))
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["text_a", "label"], synthetic.sentiment_rows(50, 2))
    compute_dtypes = record_compute_dtypes(monkeypatch)
    policy = keras.mixed_precision.global_policy().name
    results = finetune(
        "classification",
        str(tmp_path / "out"),
        train_file=train,
        eval_file=dev,
        model_dir=model_dir,
        max_seq_length=16,
        train_batch_size=32,
        learning_rate=1e-3,
        num_train_steps=60,
        steps_per_loop=20,
        do_train=True,
        do_eval=True,
        seed=1,
        mixed_precision="mixed_bfloat16",
        jit_compile=jit_compile,
    )
    # The encoder computed in bfloat16, and it learned the task (chance is 0.5 accuracy, 0 MCC).
    assert compute_dtypes and set(compute_dtypes) == {"bfloat16"}
    assert results["num_examples"] == 50
    assert results["accuracy"] >= 0.9 and results["matthews_corrcoef"] >= 0.8
    # Variables stay float32: the weights file and the checkpoint hold no bfloat16 copy.
    tensors, _ = weights_file.read_weights_file(str(tmp_path / "out"))
    assert tensors and {str(t.dtype) for t in tensors.values()} == {"float32"}
    checkpoint = _checkpoint_values(str(tmp_path / "out" / "ckpt-60"))
    assert {str(v.dtype) for v in checkpoint.values() if str(v.dtype).startswith(("float", "bfloat"))} == {"float32"}
    # The job restores the global dtype policy it changed.
    assert keras.mixed_precision.global_policy().name == policy


def _checkpoint_values(path):
    import tensorflow as tf

    # Values, not the object graph: Python-side names (e.g. Keras' seed counters) differ between processes.
    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name, _ in tf.train.list_variables(path)
        if not name.startswith(("train_iterator/", "save_counter/", "_CHECKPOINTABLE_OBJECT_GRAPH"))
    }


KILL_ARGUMENTS = dict(
    task="classification",
    max_seq_length=16,
    # With --nopacking, length buckets of 4 (batches of 8, 12 or 16 pieces): resuming must restore the bucketed
    # order exactly; by default, packed rows: it must restore the packed order.
    bucket_width=4,
    train_batch_size=16,
    learning_rate=1e-3,
    num_train_steps=12,
    steps_per_loop=3,
    save_checkpoints_steps=6,
    do_train=True,
    deterministic=True,
    seed=3,
)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """packing -> the arguments and final checkpoint of a fine-tuning run that nothing interrupts (run once)."""
    tmp = tmp_path_factory.mktemp("finetune_kill")
    common = dict(
        KILL_ARGUMENTS,
        model_dir=synthetic.make_model_dir(str(tmp / "model")),
        train_file=synthetic.write_tsv(str(tmp / "train.tsv"), ["text_a", "label"], synthetic.sentiment_rows(96, 1)),
    )
    runs = {}

    def run(packing):
        if packing not in runs:
            arguments = common if packing is None else dict(common, packing=packing)  # None: the default
            output_dir = tmp / f"uninterrupted_{packing}"
            finetune(**dict(arguments, output_dir=str(output_dir)))
            runs[packing] = arguments, _checkpoint_values(str(output_dir / "ckpt-12"))
        return runs[packing]

    return run


@pytest.mark.parametrize(
    "packing, kill",
    [
        # Deterministic: inside step 8, between its forward pass and its update (after the step-6 checkpoint).
        (None, ["--kill_in_step=8"]),
        # An arbitrary moment after the inner loop ending at step 6, fixed by the seed: wherever it lands
        # (in a step, in the step-12 checkpoint write, after it), resuming must give the same weights.
        (None, ["--kill_at_step=6", "--kill_at_random_moment=5"]),
        (False, ["--kill_in_step=8"]),
    ],
    ids=["packed_in_step_8", "packed_random_moment_seed_5", "nopacking_in_step_8"],
)
def test_killed_finetuning_resumes_to_the_same_weights(uninterrupted, tmp_path, packing, kill):
    """Killed (in a subprocess), resumed: the weights of an uninterrupted run, bit for bit."""
    arguments, reference = uninterrupted(packing)
    killed_dir = tmp_path / "killed"
    helper = os.path.join(REPO, "tests", "helpers", "training_run.py")
    killed = subprocess.Popen(
        [
            sys.executable,
            helper,
            "finetune",
            *kill,
            "--args=" + json.dumps(dict(arguments, output_dir=str(killed_dir))),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    try:
        log, _ = killed.communicate(timeout=300)
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait(timeout=60)
    assert killed.returncode == -signal.SIGKILL, log[-3000:]
    assert ("Packed rows, training" in log) == (packing is None), log[-3000:]  # the path the test names
    assert os.path.exists(killed_dir / "ckpt-6.index")
    if kill == ["--kill_in_step=8"]:
        assert not os.path.exists(killed_dir / "ckpt-12.index") and "step 9/12" not in log
    finetune(**dict(arguments, output_dir=str(killed_dir)))
    resumed = _checkpoint_values(str(killed_dir / "ckpt-12"))
    assert sorted(reference) == sorted(resumed)
    assert any(name.startswith("optimizer/") for name in reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)
