import dataclasses
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from bert_tf import (
    BertClassifier,
    BertConfig,
    BertEncoder,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
    pretraining_losses,
)
from tests import bert_numpy_reference as reference

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(batch):
    return {k: batch[k] for k in ENCODER_KEYS}


def test_encoder_matches_numpy_reference(tiny_config, tiny_batch):
    encoder = BertEncoder(tiny_config)
    outputs = encoder(encoder_inputs(tiny_batch))
    sequence, pooled, layers = reference.encoder_forward(encoder, tiny_batch)
    mask = tiny_batch["input_mask"].astype(bool)
    # Padding positions' outputs are never used; compare real tokens only.
    np.testing.assert_allclose(np.asarray(outputs["sequence_output"])[mask], sequence[mask], atol=2e-5)
    np.testing.assert_allclose(np.asarray(outputs["pooled_output"]), pooled, atol=2e-5)
    assert len(outputs["encoder_outputs"]) == tiny_config.num_hidden_layers
    for got, want in zip(outputs["encoder_outputs"], layers):
        np.testing.assert_allclose(np.asarray(got)[mask], want[mask], atol=2e-5)
    np.testing.assert_array_equal(np.asarray(outputs["encoder_outputs"][-1]), np.asarray(outputs["sequence_output"]))


def test_padding_does_not_change_real_tokens(tiny_config, tiny_batch):
    encoder = BertEncoder(tiny_config)
    inputs = encoder_inputs(tiny_batch)
    changed = dict(inputs)
    changed["input_word_ids"] = np.where(inputs["input_mask"] == 0, 42, inputs["input_word_ids"]).astype("int32")
    a = np.asarray(encoder(inputs)["sequence_output"])
    b = np.asarray(encoder(changed)["sequence_output"])
    mask = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(a[mask], b[mask], atol=1e-6)
    # ...while the inputs themselves matter.
    assert not np.allclose(a[~mask], b[~mask], atol=1e-3)


@pytest.mark.parametrize("seq_length", [1, 7, 48])
def test_any_sequence_length_up_to_max_positions(tiny_config, seq_length):
    encoder = BertEncoder(tiny_config)
    ones = np.ones((2, seq_length), "int32")
    outputs = encoder({"input_word_ids": ones * 5, "input_mask": ones, "input_type_ids": ones * 0})
    assert outputs["sequence_output"].shape == (2, seq_length, 32)
    assert outputs["pooled_output"].shape == (2, 32)


def test_dropout_only_in_training(tiny_batch):
    config = BertConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=48,
        hidden_dropout_prob=0.3,
    )
    encoder = BertEncoder(config)
    inputs = encoder_inputs(tiny_batch)
    eval_a = np.asarray(encoder(inputs, training=False)["pooled_output"])
    eval_b = np.asarray(encoder(inputs, training=False)["pooled_output"])
    train = np.asarray(encoder(inputs, training=True)["pooled_output"])
    np.testing.assert_array_equal(eval_a, eval_b)
    assert not np.allclose(eval_a, train, atol=1e-4)


def test_pretrainer_logits_and_tied_embeddings(tiny_config, tiny_batch):
    pretrainer = BertPretrainer(BertEncoder(tiny_config))
    outputs = pretrainer(tiny_batch)
    assert outputs["mlm_logits"].shape == (3, 3, tiny_config.vocab_size)
    assert outputs["sentence_logits"].shape == (3, 2)
    sequence, pooled, _ = reference.encoder_forward(pretrainer.encoder, tiny_batch)
    want = reference.mlm_logits(pretrainer, sequence, tiny_batch["masked_lm_positions"])
    np.testing.assert_allclose(np.asarray(outputs["mlm_logits"]), want, atol=5e-5)
    nsp = pooled @ pretrainer.next_sentence.dense.kernel.numpy() + pretrainer.next_sentence.dense.bias.numpy()
    np.testing.assert_allclose(np.asarray(outputs["sentence_logits"]), nsp, atol=2e-5)
    # The output projection is the word-embedding matrix itself, not a copy.
    vocab_matrices = [w for w in pretrainer.weights if tuple(w.shape) == (tiny_config.vocab_size, 32)]
    assert len(vocab_matrices) == 1


def test_pretraining_losses_match_numpy():
    rng = np.random.default_rng(1)
    mlm_logits = rng.normal(size=(2, 3, 11)).astype("float32")
    sentence_logits = rng.normal(size=(2, 2)).astype("float32")
    features = {
        "masked_lm_ids": np.array([[1, 2, 3], [4, 0, 0]], "int32"),
        "masked_lm_weights": np.array([[1, 1, 1], [1, 0, 0]], "float32"),
        "next_sentence_labels": np.array([0, 1], "int32"),
    }
    losses = pretraining_losses(features, {"mlm_logits": mlm_logits, "sentence_logits": sentence_logits})

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    ids, weights = features["masked_lm_ids"], features["masked_lm_weights"]
    nll = -np.take_along_axis(log_softmax(mlm_logits), ids[..., None], -1)[..., 0]
    mlm = (nll * weights).sum() / (weights.sum() + 1e-5)
    nsp = -log_softmax(sentence_logits)[np.arange(2), features["next_sentence_labels"]].mean()
    np.testing.assert_allclose(float(losses["mlm_loss"]), mlm, rtol=1e-5)
    np.testing.assert_allclose(float(losses["nsp_loss"]), nsp, rtol=1e-5)
    np.testing.assert_allclose(float(losses["loss"]), mlm + nsp, rtol=1e-5)
    correct = (mlm_logits.argmax(-1) == ids) * weights
    np.testing.assert_allclose(float(losses["mlm_accuracy"]), correct.sum() / (weights.sum() + 1e-5), rtol=1e-5)


def _all_models(config):
    return {
        "encoder": BertEncoder(config),
        "pretrainer": BertPretrainer(BertEncoder(config)),
        "classifier": BertClassifier(BertEncoder(config), num_classes=3),
        "regressor": BertClassifier(BertEncoder(config), num_classes=1),
        "span_labeler": BertSpanLabeler(BertEncoder(config)),
        "token_classifier": BertTokenClassifier(BertEncoder(config), num_labels=5),
    }


def test_task_model_output_shapes(tiny_config, tiny_batch):
    models = _all_models(tiny_config)
    inputs = encoder_inputs(tiny_batch)
    assert models["classifier"](inputs).shape == (3, 3)
    assert models["regressor"](inputs).shape == (3, 1)
    spans = models["span_labeler"](inputs)
    assert spans["start_logits"].shape == (3, 12) and spans["end_logits"].shape == (3, 12)
    assert models["token_classifier"](inputs).shape == (3, 12, 5)


@pytest.mark.parametrize(
    "name", ["encoder", "pretrainer", "classifier", "regressor", "span_labeler", "token_classifier"]
)
def test_keras_format_save_and_reload(tmp_path, tiny_config, tiny_batch, name):
    model = _all_models(tiny_config)[name]
    inputs = tiny_batch if name == "pretrainer" else encoder_inputs(tiny_batch)
    before = keras.tree.map_structure(np.asarray, model(inputs))
    path = str(tmp_path / f"{name}.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    assert type(reloaded) is type(model)
    after = keras.tree.map_structure(np.asarray, reloaded(inputs))
    keras.tree.map_structure(np.testing.assert_array_equal, before, after)
    if name != "encoder":
        assert reloaded.encoder.config == tiny_config


def test_keras_weight_files_keep_the_head_layouts_of_earlier_versions(tmp_path, tiny_config):
    # Keras lays out `.keras` and `.weights.h5` files by layer class name; one head class serves the classifier and
    # the tagger, and the tagger's keeps the name (TokenClassificationHead) its files were written under.
    import h5py

    expected = {
        "classifier": "classification_head",
        "token_classifier": "token_classification_head",
        "span_labeler": "span_head",
        "pretrainer": "next_sentence_head",
    }
    models = _all_models(tiny_config)
    for name, head_folder in expected.items():
        path = str(tmp_path / f"{name}.weights.h5")
        models[name].save_weights(path)
        with h5py.File(path, "r") as f:
            assert f"layers/{head_folder}/dense/vars" in f, (name, list(f["layers"]))


def test_mixed_bfloat16_keeps_logits_float32(tiny_config, tiny_batch):
    # initializer_range=0.2 instead of 0.02 gives NSP logits of order 1 (about 0.4 on average, not 0.02), so
    # the tolerances below are small against the values: zeros, or a head run at a wrong precision, fail.
    config = dataclasses.replace(tiny_config, initializer_range=0.2)
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(config, dtype="mixed_bfloat16")
    pretrainer = BertPretrainer(encoder)
    outputs = pretrainer(tiny_batch)
    assert outputs["mlm_logits"].dtype == "float32" and outputs["sentence_logits"].dtype == "float32"
    assert all(w.dtype == "float32" for w in pretrainer.weights)
    assert keras.backend.standardize_dtype(encoder(encoder_inputs(tiny_batch))["sequence_output"].dtype) == "bfloat16"
    full = BertPretrainer(BertEncoder(config))
    full(tiny_batch)
    full.set_weights(pretrainer.get_weights())
    expected = np.asarray(full(tiny_batch)["sentence_logits"])
    assert np.abs(expected).mean() > 0.2
    # bfloat16 keeps 8 significant bits (0.4% per rounding); two layers accumulate a few percent.
    np.testing.assert_allclose(np.asarray(outputs["sentence_logits"]), expected, rtol=0.05, atol=0.02)


def test_parameter_counts_of_presets():
    # The paper reports 110M and 340M; these are the exact counts with the pooler.
    assert BertEncoder(BertConfig.from_preset("bert_base")).count_params() == 109_482_240
    assert BertEncoder(BertConfig.from_preset("bert_tiny")).count_params() == 4_385_920


def test_jax_backend_matches_tensorflow(tmp_path, tiny_config, tiny_batch):
    encoder = BertEncoder(tiny_config)
    inputs = encoder_inputs(tiny_batch)
    weights_path = str(tmp_path / "encoder.weights.h5")
    encoder.save_weights(weights_path)
    np.savez(tmp_path / "inputs.npz", **inputs)
    np.save(tmp_path / "tf_pooled.npy", np.asarray(encoder(inputs)["pooled_output"]))
    np.save(tmp_path / "tf_sequence.npy", np.asarray(encoder(inputs)["sequence_output"]))
    script = textwrap.dedent(f"""
        import json, numpy as np, keras
        assert keras.backend.backend() == "jax", keras.backend.backend()
        from bert_tf import BertConfig, BertEncoder
        config = BertConfig.from_dict(json.loads({tiny_config.to_json_string()!r}))
        encoder = BertEncoder(config)
        encoder.load_weights({weights_path!r})
        inputs = dict(np.load({str(tmp_path / "inputs.npz")!r}))
        outputs = encoder(inputs)
        pooled = np.abs(np.asarray(outputs["pooled_output"]) - np.load({str(tmp_path / "tf_pooled.npy")!r})).max()
        sequence = np.abs(np.asarray(outputs["sequence_output"]) - np.load({str(tmp_path / "tf_sequence.npy")!r})).max()
        print("MAXDIFF", max(pooled, sequence))
    """)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(os.path.dirname(__file__)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    max_diff = float(result.stdout.split("MAXDIFF")[1])
    assert max_diff <= 1e-5
