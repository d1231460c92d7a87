"""Exported encoder + preprocessing SavedModels under tf_keras and TF Hub (hub.KerasLayer).

This process (Keras 3) exports a tiny model and computes reference outputs;
tests/helpers/export_hub_checks.py then runs every tf_keras check in one
subprocess with TF_USE_LEGACY_KERAS=1, and each test asserts on its results.
"""

import json

import keras
import numpy as np
import pytest

from bert_tf import BertEncoder, BertPretrainer
from bert_tf.export import export_encoder, export_preprocessor
from tests.helpers import export_fixtures

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
SEQ_LENGTH = 16
PAIR_SEQ_LENGTH = 20
PAIR_FIRST = ["The food was great.", "I would not buy this again.", "What a wonderful surprise."]
PAIR_SECOND = ["My kids love these snacks.", "The box arrived broken and the taste was awful.", "Great price!"]


def _reference_inputs(vocab_size):
    rng = np.random.default_rng(2)
    word_ids = rng.integers(5, vocab_size, size=(2, 10)).astype("int32")
    mask = np.ones((2, 10), "int32")
    mask[1, 6:] = 0
    type_ids = np.zeros((2, 10), "int32")
    type_ids[0, 5:] = 1
    return {
        "input_word_ids": word_ids * mask,
        "input_mask": mask,
        "input_type_ids": type_ids,
        "masked_lm_positions": np.array([[1, 3], [2, 0]], "int32"),
    }


def _flat(outputs, prefix=""):
    flat = {
        prefix + "sequence_output": np.asarray(outputs["sequence_output"]),
        prefix + "pooled_output": np.asarray(outputs["pooled_output"]),
    }
    for i, layer in enumerate(outputs["encoder_outputs"]):
        flat[f"{prefix}encoder_outputs_{i}"] = np.asarray(layer)
    return flat


@pytest.fixture(scope="module")
def hub_run(tmp_path_factory):
    from bert_tf.tokenization import BertPreprocessor

    root = tmp_path_factory.mktemp("hub")
    tokens = export_fixtures.vocab_from_texts(export_fixtures.SENTENCES + PAIR_FIRST + PAIR_SECOND)
    vocab_file = export_fixtures.write_vocab(tokens, root / "vocab.txt")
    keras.utils.set_random_seed(5)
    pretrainer = BertPretrainer(BertEncoder(export_fixtures.tiny_config(len(tokens))))
    # verify=False: the checks below compare every output with the Keras model anyway.
    encoder_dir = export_encoder(pretrainer, str(root / "export" / "encoder"), vocab_file=vocab_file, verify=False)
    preprocess_dir = export_preprocessor(vocab_file, True, SEQ_LENGTH, str(root / "export" / "preprocess"))

    inputs = _reference_inputs(len(tokens))
    reference = dict(inputs, **_flat(pretrainer.encoder({k: inputs[k] for k in ENCODER_KEYS})))
    reference["mlm_logits"] = np.asarray(pretrainer(inputs)["mlm_logits"])
    preprocessor = BertPreprocessor(vocab_file, lower_case=True, default_seq_length=SEQ_LENGTH)
    packed = preprocessor.bert_pack_inputs(
        [preprocessor.tokenize(PAIR_FIRST), preprocessor.tokenize(PAIR_SECOND)], seq_length=PAIR_SEQ_LENGTH
    )
    packed = {k: np.asarray(packed[k]) for k in ENCODER_KEYS}
    reference.update({"pair_" + k: v for k, v in packed.items()})
    reference.update(_flat(pretrainer.encoder(packed), prefix="pair_"))
    reference["texts_word_ids"] = np.asarray(preprocessor(export_fixtures.SENTENCES)["input_word_ids"])
    np.savez(root / "reference.npz", **reference)

    spec = {
        "encoder": encoder_dir,
        "preprocess": preprocess_dir,
        "reference": str(root / "reference.npz"),
        "work_dir": str(root),
        "texts": export_fixtures.SENTENCES,
        "labels": export_fixtures.LABELS,
        "pair_first": PAIR_FIRST,
        "pair_second": PAIR_SECOND,
        "pair_seq_length": PAIR_SEQ_LENGTH,
    }
    (root / "spec.json").write_text(json.dumps(spec))
    process = export_fixtures.run_legacy_keras_script("export_hub_checks.py", root / "spec.json", root / "results.json")
    assert process.returncode == 0, process.stderr[-5000:]
    results = json.loads((root / "results.json").read_text())
    return {"results": results, "reference": reference, "pretrainer": pretrainer}


def result(hub_run, name):
    check = hub_run["results"][name]
    assert check["ok"], check.get("error")
    return check


def test_subprocess_uses_tf_keras(hub_run):
    assert hub_run["results"]["keras_module"].startswith("tf_keras")


def test_keras_layer_outputs_equal_keras_model(hub_run):
    check = result(hub_run, "encoder_layer")
    encoder = hub_run["pretrainer"].encoder
    for diffs in (check["trainable_diffs"], check["frozen_diffs"]):
        assert len(diffs) == 3 + encoder.config.num_hidden_layers
        assert max(diffs.values()) <= 1e-6, diffs
    assert check["num_encoder_outputs"] == encoder.config.num_hidden_layers
    assert check["num_trainable_weights"] == len(encoder.trainable_weights)
    assert check["num_weights"] == len(encoder.variables)  # + dropout seed states
    assert check["num_frozen_trainable_weights"] == 0
    assert check["training_call_diff"] > 1e-3  # dropout is on when hub.KerasLayer trains


def test_preprocess_keras_layer_matches_in_process_preprocessor(hub_run):
    check = result(hub_run, "fine_tune")
    assert check["preprocess_shape"] == [len(export_fixtures.SENTENCES), SEQ_LENGTH]
    np.testing.assert_array_equal(np.array(check["preprocess_word_ids"]), hub_run["reference"]["texts_word_ids"])


def test_fine_tuning_updates_encoder_weights(hub_run):
    check = result(hub_run, "fine_tune")
    num_encoder_weights = len(hub_run["pretrainer"].encoder.trainable_weights)
    assert check["num_encoder_trainable_weights"] == num_encoder_weights
    assert check["num_model_trainable_weights"] == num_encoder_weights + 2  # + Dense kernel and bias
    assert check["word_embeddings_changed"]
    # Attention key biases get no gradient (softmax is shift invariant); everything else moves.
    assert check["num_changed"] >= num_encoder_weights - hub_run["pretrainer"].encoder.config.num_hidden_layers
    assert all(np.isfinite(check["loss"]))
    # Training changes the variables in memory, never the exported files.
    assert max(check["original_file_diffs"].values()) <= 1e-6


def test_fine_tuned_classifier_saves_and_serves_raw_strings(hub_run):
    check = result(hub_run, "fine_tune")
    assert len(check["predictions"]) == len(export_fixtures.SENTENCES)
    assert all(0.0 < p < 1.0 for p in check["predictions"])
    assert check["served_vs_model"] <= 1e-6


def test_frozen_encoder_keeps_its_weights(hub_run):
    check = result(hub_run, "frozen")
    assert check["num_model_trainable_weights"] == 2
    assert check["num_encoder_changed"] == 0
    assert check["num_head_changed"] == 2


def test_sentence_pairs_with_tokenize_and_bert_pack_inputs(hub_run):
    check = result(hub_run, "sentence_pairs")
    reference = hub_run["reference"]
    for key in ENCODER_KEYS:
        np.testing.assert_array_equal(np.array(check["packed"][key]), reference["pair_" + key])
    type_ids = np.array(check["packed"]["input_type_ids"])
    assert type_ids.shape == (len(PAIR_FIRST), PAIR_SEQ_LENGTH)
    assert (type_ids == 1).any(axis=1).all()  # every row has a second segment
    assert max(check["pair_diffs"].values()) <= 1e-6, check["pair_diffs"]
    assert check["logits_shape"] == [len(PAIR_FIRST), 3]


def test_mlm_sub_object_through_hub(hub_run):
    check = result(hub_run, "mlm")
    pretrainer = hub_run["pretrainer"]
    assert check["mlm_logits_shape"] == [2, 2, pretrainer.encoder.config.vocab_size]
    assert check["mlm_logits_diff"] <= 1e-5
    assert check["num_trainable_weights"] == (
        len(pretrainer.encoder.trainable_weights) + len(pretrainer.masked_lm.trainable_weights) - 1
    )
