"""Tests of bert_tf.training.loop on one device: learning, XLA, outputs, non-finite loss, precision, generic models.

Multi-replica strategies run in subprocesses in test_distribution.py; kill-and-resume of a
pretraining run is in test_pretrain_job.py.
"""

import json
import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertEncoder, BertPretrainer, pretraining_losses, training
from bert_tf.checkpoints import restore
from bert_tf.data.pretraining_dataset import pretraining_dataset
from tests.helpers import training_data
from tests.helpers.absl_flags import listening_to_absl

REAL_STEPS = 40
BATCH = 16


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return training_data.write_pretraining_records(tmp_path_factory.mktemp("records"))


def _synthetic_config(dropout=0.1):
    # One layer: these tests exercise the loop, and tracing time grows with the model.
    return training_data.tiny_bert_config(
        training_data.SYNTHETIC_VOCAB, max_positions=training_data.SYNTHETIC_SEQ, num_layers=1, dropout=dropout
    )


def _synthetic_run(model_dir, jit_compile=False, dataset_fn=None, callback=None, steps_per_loop=2, save_steps=2):
    training.enable_determinism(3)
    # No dropout: XLA draws other dropout masks than the TF kernels for the same seeds.
    config = _synthetic_config(dropout=0.0)
    loop_config = training.TrainingConfig(
        num_train_steps=6,
        learning_rate=1e-3,
        steps_per_loop=steps_per_loop,
        save_checkpoints_steps=save_steps,
    )
    return training.train(
        training.get_strategy("one_device"),
        lambda: BertPretrainer(BertEncoder(config)),
        pretraining_losses,
        dataset_fn or training_data.synthetic_dataset_fn(4),
        str(model_dir),
        loop_config,
        loop_callback=callback,
        jit_compile=jit_compile,
    )


@pytest.fixture(scope="module")
def synthetic_reference(tmp_path_factory):
    """An uninterrupted 6-step run on synthetic data, and its per-loop losses."""
    losses = []
    result = _synthetic_run(
        tmp_path_factory.mktemp("synthetic"), callback=lambda step, metrics: losses.append(metrics["loss"])
    )
    return result, losses


def _pretrain(records, model_dir, callback=None):
    training.enable_determinism(3)
    config = training_data.tiny_bert_config(training_data.vocab_size())

    def train_fn(input_context):
        return pretraining_dataset(
            records["train"],
            BATCH,
            training_data.SEQ_LENGTH,
            training_data.MAX_PREDICTIONS,
            input_context=input_context,
            seed=5,
            shuffle_buffer_size=200,
        )

    def eval_fn(input_context):
        return pretraining_dataset(
            records["eval"],
            BATCH,
            training_data.SEQ_LENGTH,
            training_data.MAX_PREDICTIONS,
            training=False,
            input_context=input_context,
            drop_remainder=False,
        )

    loop_config = training.TrainingConfig(
        num_train_steps=REAL_STEPS,
        learning_rate=2e-3,
        num_warmup_steps=6,
        steps_per_loop=10,
        save_checkpoints_steps=10,
        keep_checkpoint_max=2,
    )
    return training.train(
        training.get_strategy("one_device"),
        lambda: BertPretrainer(BertEncoder(config)),
        pretraining_losses,
        train_fn,
        str(model_dir),
        loop_config,
        eval_dataset_fn=eval_fn,
        loop_callback=callback,
    )


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def real_text_run(records, tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("real_text")
    losses = []
    with listening_to_absl(_Lines()) as handler:
        result = _pretrain(records, model_dir, callback=lambda step, metrics: losses.append((step, metrics)))
    return result, losses, model_dir, handler.lines


def _scalars(event_dir):
    values = {}
    for name in os.listdir(event_dir):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(event_dir, name)):
            for value in event.summary.value:
                values.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return values


def test_loss_falls_on_real_text(real_text_run):
    result, losses, *_ = real_text_run
    assert [step for step, _ in losses] == [10, 20, 30, 40]
    first, last = losses[0][1], losses[-1][1]
    chance = np.log(training_data.vocab_size())
    assert first["mlm_loss"] > chance - 1.0  # the first 10 steps (warm-up included) are near chance
    assert last["loss"] < first["loss"] - 0.7
    assert last["mlm_accuracy"] > first["mlm_accuracy"]
    assert result.step == REAL_STEPS
    assert result.eval_metrics["mlm_loss"] < chance - 0.3  # held-out text is predicted better than chance
    assert result.eval_metrics["num_examples"] > 0


def test_outputs_summaries_checkpoints_and_eval_results(real_text_run):
    result, losses, model_dir, _ = real_text_run
    assert result.checkpoint == str(model_dir / "ckpt-40")
    # keep_checkpoint_max=2 of ckpt-10/20/30/40.
    assert sorted(name for name in os.listdir(model_dir) if name.endswith(".index")) == [
        "ckpt-30.index",
        "ckpt-40.index",
    ]
    train = _scalars(model_dir / "summaries" / "train")
    for tag in ("loss", "mlm_accuracy", "nsp_accuracy", "learning_rate", "examples_per_second", "gradient_norm"):
        assert [step for step, _ in train[tag]] == [10, 20, 30, 40], tag
    assert train["loss"][-1][1] == pytest.approx(losses[-1][1]["loss"], rel=1e-6)
    lr = dict(train["learning_rate"])
    assert lr[10] == pytest.approx(2e-3 * (1 - 9 / REAL_STEPS), rel=1e-5)  # lr of the last update (step 9)
    eval_scalars = _scalars(model_dir / "summaries" / "eval")
    assert eval_scalars["mlm_accuracy"] == [(40, pytest.approx(result.eval_metrics["mlm_accuracy"], rel=1e-6))]
    saved = json.loads((model_dir / "eval_results.json").read_text())
    assert saved["step"] == 40
    assert saved["nsp_accuracy"] == pytest.approx(result.eval_metrics["nsp_accuracy"])
    # The checkpoint is a model-directory checkpoint: a fresh pretrainer restores the trained weights.
    fresh = BertPretrainer(BertEncoder(training_data.tiny_bert_config(training_data.vocab_size())))
    restore(fresh, result.checkpoint)
    for a, b in zip(fresh.weights, result.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_progress_lines(real_text_run):
    *_, lines = real_text_run
    progress = [line for line in lines if line.startswith("step ")]
    assert [line.split(" |")[0] for line in progress] == [f"step {s}/{REAL_STEPS}" for s in range(10, 41, 10)]
    assert all(" | loss " in line and " examples/s | " in line and "| ETA 0:" in line for line in progress)
    assert any(line.startswith("Saved checkpoint") and line.endswith("ckpt-40.") for line in lines)
    assert any(line.startswith("eval at step 40: ") for line in lines)


def test_xla_step_computes_the_same_training(synthetic_reference, tmp_path):
    reference, reference_losses = synthetic_reference
    losses = []
    result = _synthetic_run(tmp_path, jit_compile=True, callback=lambda step, metrics: losses.append(metrics["loss"]))
    # Same data and initialisation; only XLA's float rounding differs.
    np.testing.assert_allclose(losses, reference_losses, rtol=1e-5)
    assert result.step == reference.step
    for a, b in zip(result.model.trainable_variables, reference.model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, err_msg=a.path)


def _assert_same_weights(result, reference):
    assert result.step == reference.step
    for a, b in zip(result.model.trainable_variables, reference.model.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def _checkpoints(model_dir):
    return sorted(name for name in os.listdir(model_dir) if name.endswith(".index"))


def test_a_host_call_ends_after_the_progress_interval(synthetic_reference, tmp_path, monkeypatch):
    from bert_tf import progress

    # An interval of 0 s: every call ends after its first step, whatever steps_per_loop is.
    monkeypatch.setattr(progress, "INTERVAL_SECONDS", 0.0)
    steps = []
    result = _synthetic_run(
        tmp_path, callback=lambda step, metrics: steps.append(step), steps_per_loop=100, save_steps=1000
    )
    assert steps == [1, 2, 3, 4, 5, 6]
    # A short run keeps its end (save_checkpoints_steps past it); where calls end does not change the training.
    assert _checkpoints(tmp_path) == ["ckpt-6.index"]
    _assert_same_weights(result, synthetic_reference[0])


def test_ctrl_c_saves_the_steps_since_the_last_checkpoint_and_resumes(synthetic_reference, tmp_path):
    def interrupt(step, metrics):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _synthetic_run(tmp_path, callback=interrupt, steps_per_loop=1, save_steps=1000)
    assert _checkpoints(tmp_path) == ["ckpt-3.index"]
    _assert_same_weights(_synthetic_run(tmp_path, steps_per_loop=1, save_steps=1000), synthetic_reference[0])
    assert _checkpoints(tmp_path) == ["ckpt-3.index", "ckpt-6.index"]


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    training.enable_determinism(3)
    config = _synthetic_config()
    # Global batch 5 (0-based) has NaN masked-LM weights: step 6 has a NaN loss.
    dataset_fn = training_data.synthetic_dataset_fn(8, nan_batch=5)
    loop_config = training.TrainingConfig(num_train_steps=20, steps_per_loop=4, save_checkpoints_steps=2)
    with pytest.raises(training.NonFiniteLossError, match=r"Non-finite training loss \(nan\) at step 6;") as error:
        training.train(
            training.get_strategy("one_device"),
            lambda: BertPretrainer(BertEncoder(config)),
            pretraining_losses,
            dataset_fn,
            str(tmp_path),
            loop_config,
        )
    assert "ckpt-4" in str(error.value)
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-4")
    assert not any(name.startswith("ckpt-6") for name in os.listdir(tmp_path))
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt-4"))
    assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 4
    for name, _ in tf.train.list_variables(str(tmp_path / "ckpt-4")):
        if name.startswith("train_iterator/"):
            continue
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.isfinite(value).all(), name


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains_with_float32_variables(policy, tmp_path):
    training.enable_determinism(3)
    config = _synthetic_config()
    training.set_precision_policy(policy)
    try:
        loop_config = training.TrainingConfig(
            num_train_steps=4, learning_rate=1e-3, steps_per_loop=2, save_checkpoints_steps=4
        )
        result = training.train(
            training.get_strategy("one_device"),
            lambda: BertPretrainer(BertEncoder(config)),
            pretraining_losses,
            training_data.synthetic_dataset_fn(8),
            str(tmp_path),
            loop_config,
        )
    finally:
        training.set_precision_policy("float32")
    assert result.model.dtype_policy.name == policy
    assert all(v.dtype == "float32" for v in result.model.trainable_variables)
    assert np.isfinite(result.train_metrics["loss"])
    saved = {name.split("/")[0] for name, _ in tf.train.list_variables(result.checkpoint)}
    if policy == "mixed_float16":
        assert result.train_metrics["loss_scale"] == 2.0**15
        assert "loss_scale" in saved
    else:
        assert "loss_scale" not in result.train_metrics and "loss_scale" not in saved


def test_dynamic_loss_scale_halves_on_overflow_and_grows_after_finite_steps():
    scale = training.DynamicLossScale(initial_scale=8.0, growth_interval=2)
    grads, finite = scale.unscale([tf.constant([16.0, np.inf])])
    assert not bool(finite)
    scale.update(finite)
    assert float(scale.scale.numpy()) == 4.0
    grads, finite = scale.unscale([tf.constant([8.0])])
    np.testing.assert_array_equal(grads[0].numpy(), [2.0])
    scale.update(finite)
    assert float(scale.scale.numpy()) == 4.0
    scale.update(tf.constant(True))
    assert float(scale.scale.numpy()) == 8.0 and int(scale.good_steps.numpy()) == 0
    assert float(scale.scale_loss(tf.constant(1.5))) == 12.0


def _classifier():
    inputs = keras.Input(shape=(3,), name="features")
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    outputs = keras.layers.Dense(2, name="logits")(keras.layers.Dropout(0.1)(hidden))
    return keras.Model(inputs, outputs)


def _classification_loss(batch, logits):
    _, labels = batch
    loss = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32))
    return {"loss": tf.reduce_mean(loss), "accuracy": accuracy}


def _classification_data(input_context):
    rng = np.random.default_rng(input_context.input_pipeline_id)
    features = rng.normal(size=(64, 3)).astype("float32")
    labels = (features[:, 0] > 0).astype("int32")
    return (
        tf.data.Dataset.from_tensor_slices((features, labels))
        .repeat()
        .batch(input_context.get_per_replica_batch_size(16), drop_remainder=True)
    )


def test_generic_model_with_labels_resumes_without_reinitialising(tmp_path):
    init_calls = []

    def run(num_train_steps, model_fn=_classifier):
        loop_config = training.TrainingConfig(
            num_train_steps=num_train_steps, learning_rate=0.05, steps_per_loop=5, save_checkpoints_steps=5
        )
        return training.train(
            training.get_strategy("one_device"),
            model_fn,
            _classification_loss,
            _classification_data,
            str(tmp_path),
            loop_config,
            checkpoint_items_fn=lambda model: {"model": model},
            init_fn=init_calls.append,
            eval_dataset_fn=lambda ctx: _classification_data(ctx).take(2),
        )

    first = run(10)
    assert first.step == 10 and len(init_calls) == 1
    second = run(30)
    assert second.step == 30 and len(init_calls) == 1  # resumed: init_fn is for fresh starts only
    assert second.eval_metrics["accuracy"] > 0.8
    assert sorted(second.eval_metrics) == ["accuracy", "loss", "num_examples"]
    saved = {name.split("/")[0] for name, _ in tf.train.list_variables(second.checkpoint)}
    assert {"model", "optimizer", "step", "rng", "train_iterator"} <= saved

    def other_model():
        inputs = keras.Input(shape=(3,), name="features")
        return keras.Model(inputs, keras.layers.Dense(2, name="logits")(inputs))

    with pytest.raises(ValueError, match="Cannot resume from .*ckpt-30"):
        run(40, other_model)


def _dropout_free_classifier():
    inputs = keras.Input(shape=(3,), name="features")
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(2, name="logits")(hidden))


def _microbatch_run(model_dir, num_microbatches):
    training.enable_determinism(3)
    metrics = []
    result = training.train(
        training.get_strategy("one_device"),
        _dropout_free_classifier,
        _classification_loss,
        _classification_data,
        str(model_dir),
        training.TrainingConfig(
            num_train_steps=8, learning_rate=0.05, steps_per_loop=4, num_microbatches=num_microbatches
        ),
        checkpoint_items_fn=lambda model: {"model": model},
        loop_callback=lambda step, loop_metrics: metrics.append(loop_metrics),
    )
    return result, metrics


def test_microbatches_train_like_the_whole_batch(tmp_path):
    # A loss that is a mean over examples, no dropout: 4 pieces of 4 sum to the batch of 16's gradient.
    whole, whole_metrics = _microbatch_run(tmp_path / "whole", 1)
    pieces, piece_metrics = _microbatch_run(tmp_path / "pieces", 4)
    assert pieces.step == whole.step == 8
    for a, b in zip(whole_metrics, piece_metrics):
        # The gradient norm is the summed gradient's, before clipping: a piece weighted wrongly changes it.
        for name in ("accuracy", "gradient_norm", "loss", "learning_rate"):
            np.testing.assert_allclose(b[name], a[name], rtol=1e-5, err_msg=name)
    for a, b in zip(pieces.model.weights, whole.model.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
    assert whole_metrics[-1]["loss"] < whole_metrics[0]["loss"]  # it trained


def test_microbatches_must_divide_the_batch(tmp_path):
    with pytest.raises(training.JobArgumentError, match=r"--num_microbatches=3 must divide the batch size per replica"):
        _microbatch_run(tmp_path, 3)
    assert not os.listdir(tmp_path) or not any(name.startswith("ckpt") for name in os.listdir(tmp_path))
    with pytest.raises(training.JobArgumentError, match="num_microbatches"):
        training.TrainingConfig(num_train_steps=10, num_microbatches=0)
    training.check_microbatches(4, 32, num_replicas=2)
    with pytest.raises(training.JobArgumentError, match=r"32 over 4 replica"):
        training.check_microbatches(3, 32, num_replicas=4)


class _Stop(Exception):
    pass


def test_resume_fast_forwards_when_the_data_position_cannot_be_restored(synthetic_reference, tmp_path, caplog):
    reference, _ = synthetic_reference

    def stop_at_4(step, metrics):
        if step == 4:
            raise _Stop()

    with pytest.raises(_Stop):
        _synthetic_run(tmp_path, callback=stop_at_4)
    # The same batches through a different pipeline: its saved iterator state no longer fits.
    caplog.set_level(logging.INFO, logger="absl")
    synthetic = training_data.synthetic_dataset_fn(4)
    resumed = _synthetic_run(tmp_path, dataset_fn=lambda ctx: synthetic(ctx).take(10**6))
    messages = "\n".join(record.getMessage() for record in caplog.records)
    assert "Could not restore the training data position" in messages
    assert "Fast-forwarding the training data by 4 per-replica batches (step 4)" in messages
    for a, b in zip(resumed.model.weights, reference.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_tpu_input_and_step_path_trains_and_resumes_like_the_default_path(
    synthetic_reference, tmp_path, monkeypatch, caplog
):
    """The loop's TPU branches (strategy-distributed input, one fused step without explicit XLA, no
    iterator in the checkpoint, fast-forward on resume) under OneDeviceStrategy, whose one replica has
    a TPUStrategy's per-replica semantics; TPUs themselves cannot run here."""
    from bert_tf.training import distribution

    reference, _ = synthetic_reference
    monkeypatch.setattr(distribution, "is_tpu_strategy", lambda strategy: True)

    def stop_at_4(step, metrics):
        if step == 4:
            raise _Stop()

    with pytest.raises(_Stop):
        _synthetic_run(tmp_path, callback=stop_at_4)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
    assert not any(name.startswith("train_iterator") for name in reader.get_variable_to_shape_map())
    caplog.set_level(logging.INFO, logger="absl")
    resumed = _synthetic_run(tmp_path)
    messages = "\n".join(record.getMessage() for record in caplog.records)
    assert "Fast-forwarding the training data by 4 per-replica batches (step 4)" in messages
    assert resumed.step == reference.step
    for a, b in zip(resumed.model.weights, reference.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_training_config_rejects_bad_values():
    with pytest.raises(ValueError, match="num_train_steps"):
        training.TrainingConfig(num_train_steps=0)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        training.TrainingConfig(num_train_steps=10, num_warmup_steps=11)
    with pytest.raises(ValueError, match="steps_per_loop"):
        training.TrainingConfig(num_train_steps=10, steps_per_loop=0)
    with pytest.raises(ValueError, match="learning_rate"):
        training.TrainingConfig(num_train_steps=10, learning_rate=0.0)
    with pytest.raises(ValueError, match="clip_norm"):
        training.TrainingConfig(num_train_steps=10, clip_norm=-1.0)


def test_only_a_dataset_known_to_be_finite_is_warned_about(caplog):
    from bert_tf.training.data_position import TrainingInput

    caplog.set_level("WARNING", logger="absl")
    endless = tf.data.Dataset.counter().flat_map(lambda i: tf.data.Dataset.range(3))  # cardinality unknown (-2)
    datasets = {
        "finite": tf.data.Dataset.range(3),
        "endless flat_map": endless,
        "repeated": tf.data.Dataset.range(3).repeat(),
    }
    warned = {}
    for name, dataset in datasets.items():
        caplog.clear()
        TrainingInput(tf.distribute.get_strategy(), lambda context, d=dataset: d).make_iterator(0, None)
        warned[name] = any("training dataset is finite" in r.getMessage() for r in caplog.records)
    assert warned == {"finite": True, "endless flat_map": False, "repeated": False}
