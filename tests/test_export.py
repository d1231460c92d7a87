"""The encoder SavedModel under Keras 3 and plain TensorFlow: outputs, signatures, mlm, TFSMLayer, atomicity.

The tf_keras / hub.KerasLayer loaders are covered by tests/test_export_hub.py.
"""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertEncoder, BertPretrainer
from bert_tf.export import (
    atomic_directory,
    export_encoder,
    exporter,
    keras_variable_name,
    load_tfsm_layer,
    verify_encoder_export,
)

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
CONFIG = BertConfig(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=48,
    hidden_dropout_prob=0.2,
)


def batch():
    rng = np.random.default_rng(1)
    word_ids = rng.integers(5, 97, size=(3, 12)).astype("int32")
    mask = np.ones((3, 12), "int32")
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    type_ids = np.zeros((3, 12), "int32")
    type_ids[:, 6:] = 1
    return {"input_word_ids": word_ids * mask, "input_mask": mask, "input_type_ids": type_ids * mask}


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


@pytest.fixture(scope="module")
def pretrainer():
    keras.utils.set_random_seed(3)
    return BertPretrainer(BertEncoder(CONFIG))


@pytest.fixture(scope="module")
def exported(pretrainer, tmp_path_factory):
    """A pretrainer exported once (encoder + mlm), with a vocab copied for reference."""
    root = tmp_path_factory.mktemp("export")
    vocab = root / "vocab.txt"
    vocab.write_text("".join(f"tok{i}\n" for i in range(CONFIG.vocab_size)))
    path = export_encoder(pretrainer, str(root / "encoder"), vocab_file=str(vocab))
    return path


@pytest.fixture(scope="module")
def loaded(exported):
    return tf.saved_model.load(exported)


def test_outputs_equal_keras_model(pretrainer, loaded):
    inputs = batch()
    expected = pretrainer.encoder(inputs)
    got = loaded(inputs)
    assert set(got) == {"sequence_output", "pooled_output", "encoder_outputs", "default"}
    assert isinstance(got["encoder_outputs"], list) and len(got["encoder_outputs"]) == CONFIG.num_hidden_layers
    assert max_diff(got["sequence_output"], expected["sequence_output"]) <= 1e-6
    assert max_diff(got["pooled_output"], expected["pooled_output"]) <= 1e-6
    for got_layer, expected_layer in zip(got["encoder_outputs"], expected["encoder_outputs"]):
        assert max_diff(got_layer, expected_layer) <= 1e-6
    np.testing.assert_array_equal(got["default"].numpy(), got["pooled_output"].numpy())
    assert got["sequence_output"].dtype == tf.float32
    # Any batch size and sequence length, as TF Hub's encoders.
    assert loaded({k: v[:1, :5] for k, v in inputs.items()})["sequence_output"].shape == (1, 5, 32)


def _packed_row(examples, seq_length):
    """Encoder inputs of one row holding `examples` ([word ids] each, type ids 0 then 1 from the middle) and
    `input_example_ids`; plus each example's inputs alone."""
    row = {key: np.zeros((1, seq_length), "int32") for key in ENCODER_KEYS + ("input_example_ids",)}
    alone, start = [], 0
    for number, word_ids in enumerate(examples, start=1):
        n = len(word_ids)
        type_ids = (np.arange(n) >= n // 2).astype("int32")
        values = {"input_word_ids": word_ids, "input_mask": 1, "input_type_ids": type_ids, "input_example_ids": number}
        for key, value in values.items():
            row[key][0, start : start + n] = value
        alone.append({"input_word_ids": np.array([word_ids], "int32"), "input_mask": np.ones((1, n), "int32"),
                      "input_type_ids": type_ids[None]})  # fmt: skip
        start += n
    return row, alone


def test_packed_input_gives_each_example_its_outputs_alone(loaded):
    # The optional fourth input: three examples side by side, then padding; each gives what it gives alone.
    rng = np.random.default_rng(5)
    examples = [rng.integers(5, 97, size=n).astype("int32") for n in (4, 7, 3)]
    row, alone = _packed_row(examples, seq_length=17)
    packed = loaded(row)
    assert set(packed) == {"sequence_output", "pooled_output", "encoder_outputs", "default"}
    assert packed["pooled_output"].shape == (1, 17 // 2, 32)
    start = 0
    for slot, inputs in enumerate(alone):
        single, n = loaded(inputs), inputs["input_mask"].shape[1]
        assert max_diff(packed["sequence_output"][0, start : start + n], single["sequence_output"][0]) <= 1e-5
        assert max_diff(packed["encoder_outputs"][0][0, start : start + n], single["encoder_outputs"][0][0]) <= 1e-5
        assert max_diff(packed["pooled_output"][0, slot], single["pooled_output"][0]) <= 1e-5
        start += n
    # The same through the flat `packed` signature; dropout only when training, as unpacked.
    signature = loaded.signatures["packed"](**{k: tf.constant(v) for k, v in row.items()})
    assert max_diff(signature["sequence_output"], packed["sequence_output"]) <= 1e-6
    assert max_diff(loaded(row, training=True)["sequence_output"], packed["sequence_output"]) > 1e-3
    # An example filling the row alone gives its outputs alone too.
    whole, (only,) = _packed_row([rng.integers(5, 97, size=17).astype("int32")], seq_length=17)
    assert max_diff(loaded(whole)["sequence_output"], loaded(only)["sequence_output"]) <= 1e-5


def test_dropout_only_when_training(loaded):
    inputs = batch()
    inference = [loaded(inputs)["pooled_output"].numpy() for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    np.testing.assert_array_equal(loaded(inputs, training=False)["pooled_output"].numpy(), inference[0])
    training = loaded(inputs, training=True)["pooled_output"].numpy()
    assert max_diff(training, inference[0]) > 1e-3
    assert max_diff(loaded.call_training(inputs)["pooled_output"], inference[0]) > 1e-3


def test_reusable_savedmodel_attributes(pretrainer, loaded):
    encoder = pretrainer.encoder
    assert len(loaded.variables) == len(encoder.variables)
    assert len(loaded.trainable_variables) == len(encoder.trainable_variables)
    assert list(loaded.regularization_losses) == []
    assert all(v.trainable for v in loaded.trainable_variables)
    # Only the encoder's weights are the encoder's variables; the head's live in `mlm`.
    loaded_names = sorted(v.name for v in loaded.trainable_variables)
    assert loaded_names == sorted(v.value.name for v in encoder.trainable_variables)
    word_embeddings = next(v for v in loaded.variables if "word_embeddings" in v.name)
    np.testing.assert_array_equal(word_embeddings.numpy(), encoder.token_embedding.embeddings.numpy())


def test_serving_default_signature_is_flat(pretrainer, loaded):
    signature = loaded.signatures["serving_default"]
    _, input_specs = signature.structured_input_signature
    assert set(input_specs) == set(ENCODER_KEYS)
    assert all(spec.dtype == tf.int32 and spec.shape.as_list() == [None, None] for spec in input_specs.values())
    inputs = batch()
    outputs = signature(**{k: tf.constant(v) for k, v in inputs.items()})
    assert set(outputs) == {"sequence_output", "pooled_output", "default", "encoder_outputs_0", "encoder_outputs_1"}
    expected = pretrainer.encoder(inputs)
    assert max_diff(outputs["pooled_output"], expected["pooled_output"]) <= 1e-6
    assert max_diff(outputs["encoder_outputs_0"], expected["encoder_outputs"][0]) <= 1e-6


def test_mlm_sub_object_gives_pretrainer_logits(pretrainer, loaded):
    inputs = dict(batch(), masked_lm_positions=np.array([[1, 2, 3], [4, 7, 0], [1, 3, 0]], "int32"))
    expected = pretrainer(inputs)["mlm_logits"]
    outputs = loaded.mlm(inputs)
    assert outputs["mlm_logits"].shape == (3, 3, CONFIG.vocab_size)
    assert max_diff(outputs["mlm_logits"], expected) <= 1e-5
    assert max_diff(outputs["pooled_output"], pretrainer.encoder(batch())["pooled_output"]) <= 1e-6
    # The head's variables are the encoder's (tied word embeddings) plus its own.
    assert len(loaded.mlm.trainable_variables) == (
        len(pretrainer.encoder.trainable_variables) + len(pretrainer.masked_lm.trainable_variables) - 1
    )
    signature = loaded.signatures["mlm"]
    flat = signature(**{k: tf.constant(v) for k, v in inputs.items()})
    assert max_diff(flat["mlm_logits"], expected) <= 1e-5


def test_reference_assets(exported):
    extra = os.path.join(exported, "assets.extra")
    with open(os.path.join(extra, "bert_config.json")) as f:
        assert BertConfig.from_dict(json.load(f)) == CONFIG
    with open(os.path.join(extra, "vocab.txt")) as f:
        assert len(f.read().split()) == CONFIG.vocab_size


def test_tfsm_layer_inference_matches(pretrainer, exported):
    layer = load_tfsm_layer(exported)
    outputs = layer(batch())
    assert max_diff(outputs["pooled_output"], pretrainer.encoder(batch())["pooled_output"]) <= 1e-6
    assert len(outputs["encoder_outputs"]) == CONFIG.num_hidden_layers
    assert all(":" not in w.name and "/" not in w.name for w in layer.weights)
    assert keras_variable_name("transformer_layer_0/attention/query/kernel:0") == (
        "transformer_layer_0_attention_query_kernel"
    )
    # For inference the plain Keras layer works too; the helper is needed for training.
    plain = keras.layers.TFSMLayer(exported, call_endpoint="__call__")
    assert max_diff(plain(batch())["pooled_output"], outputs["pooled_output"]) <= 1e-6


def classifier(encoder_layer):
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in ENCODER_KEYS}
    pooled = encoder_layer(inputs)["pooled_output"]
    probability = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dropout(0.1)(pooled))
    model = keras.Model(inputs, probability)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy")
    return model


def test_tfsm_layer_fine_tuning_updates_encoder(exported, loaded):
    layer = load_tfsm_layer(exported)  # its own copy of the variables: `loaded` is unaffected
    assert len(layer.trainable_weights) == len(loaded.trainable_variables)
    model = classifier(layer)
    before = {w.name: w.numpy().copy() for w in layer.trainable_weights}
    outputs_before = layer(batch())["pooled_output"].numpy()
    labels = tf.constant([[1.0], [0.0], [1.0]])

    # What `fit` runs, as one compiled step (Keras' own fit traces twice: too slow for this CPU).
    @tf.function
    def train_step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.binary_crossentropy(labels, model(inputs, training=True)))
        model.optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    inputs = {k: tf.constant(v) for k, v in batch().items()}
    losses = [float(train_step(inputs)) for _ in range(3)]
    assert all(np.isfinite(losses))
    changed = [w.name for w in layer.trainable_weights if not np.allclose(before[w.name], w.numpy())]
    assert "embeddings_word_embeddings_embeddings" in changed
    assert len(changed) >= len(before) - CONFIG.num_hidden_layers  # key biases get no gradient
    # The SavedModel's functions read the trained variables.
    assert max_diff(layer(batch())["pooled_output"], outputs_before) > 1e-4
    word_embeddings = next(v for v in loaded.variables if "word_embeddings" in v.name)
    np.testing.assert_array_equal(word_embeddings.numpy(), before["embeddings_word_embeddings_embeddings"])


def test_tfsm_layer_frozen(exported, loaded):
    layer = load_tfsm_layer(exported, trainable=False)
    assert layer.trainable_weights == []
    model = classifier(layer)
    before = [w.numpy().copy() for w in layer.weights]
    with tf.GradientTape() as tape:
        probability = model(batch(), training=True)
        loss = keras.losses.binary_crossentropy(np.ones((3, 1), "float32"), probability)
    gradients = tape.gradient(loss, model.trainable_variables)
    model.optimizer.apply(gradients, model.trainable_variables)
    assert len(model.trainable_variables) == 2  # the Dense head only
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, layer.weights))
    # A frozen encoder runs in inference mode (no dropout) even under training=True.
    expected = loaded(batch())["pooled_output"]
    assert max_diff(layer(batch(), training=True)["pooled_output"], expected) <= 1e-6


def test_export_dir_can_be_moved_and_copied(pretrainer, exported, tmp_path):
    copied = shutil.copytree(exported, tmp_path / "copy")
    moved = shutil.move(str(copied), str(tmp_path / "elsewhere" / "encoder"))
    expected = pretrainer.encoder(batch())["pooled_output"]
    assert max_diff(tf.saved_model.load(moved)(batch())["pooled_output"], expected) <= 1e-6


def test_export_refuses_existing_directory_unless_overwrite(pretrainer, tmp_path):
    target = tmp_path / "encoder"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match="already exists"):
        export_encoder(pretrainer.encoder, str(target), verify=False)
    assert (target / "keep.txt").read_text() == "old"
    # A pretrainer exported without its head gives an encoder-only SavedModel.
    export_encoder(pretrainer, str(target), include_mlm=False, overwrite=True, verify=False)
    assert not (target / "keep.txt").exists()
    assert sorted(os.listdir(tmp_path)) == ["encoder"]
    loaded = tf.saved_model.load(str(target))
    assert not hasattr(loaded, "mlm")
    assert set(loaded.signatures) == {"serving_default", "packed"}  # no `mlm`
    assert max_diff(loaded(batch())["pooled_output"], pretrainer.encoder(batch())["pooled_output"]) <= 1e-6


def test_failed_export_leaves_nothing(pretrainer, tmp_path, monkeypatch):
    def failing_save(module, path, signatures=None):
        os.makedirs(os.path.join(path, "variables"))
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(exporter.tf.saved_model, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        export_encoder(pretrainer.encoder, str(tmp_path / "encoder"), verify=False)
    assert os.listdir(tmp_path) == []


def test_failed_overwrite_keeps_the_old_export(tmp_path):
    target = tmp_path / "export"
    target.mkdir()
    (target / "saved_model.pb").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_directory(str(target), overwrite=True) as tmp_dir:
            (tmp_path / tmp_dir / "saved_model.pb").write_text("new")
            raise RuntimeError("interrupted")
    assert sorted(os.listdir(tmp_path)) == ["export"]
    assert (target / "saved_model.pb").read_text() == "old"


def test_verify_detects_a_different_model(exported):
    other = BertEncoder(CONFIG)  # fresh random weights
    with pytest.raises(ValueError, match="does not reproduce"):
        verify_encoder_export(other, exported)
