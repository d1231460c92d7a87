"""classify_with_hub's packed rows (its default): through the exported encoder's `input_example_ids` input,
each example scores as alone and a batch's loss is its examples' mean; the program runs with the default.

In subprocesses: hub.KerasLayer needs tf_keras (TF_USE_LEGACY_KERAS=1)."""

import json
import os
import subprocess
import sys

import keras
import pytest

from bert_tf import BertEncoder
from bert_tf.export import export_encoder, export_preprocessor
from tests.helpers import export_fixtures

TEXTS_VOCAB = export_fixtures.SENTENCES + ["loved it", "terrible slow", "snacks", "surprise", "price", "taste"]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub_packing")
    tokens = export_fixtures.vocab_from_texts(TEXTS_VOCAB)
    vocab_file = export_fixtures.write_vocab(tokens, root / "vocab.txt")
    keras.utils.set_random_seed(4)
    encoder = BertEncoder(export_fixtures.tiny_config(len(tokens), max_position_embeddings=64))
    export_encoder(encoder, str(root / "export" / "encoder"), vocab_file=vocab_file, verify=False)
    export_preprocessor(vocab_file, True, 40, str(root / "export" / "preprocess"))
    return root / "export"


def test_packed_classifier_scores_each_example_as_alone(export_dir):
    process = export_fixtures.run_legacy_keras_script("hub_packing_check.py", export_dir, timeout=400)
    assert process.returncode == 0, process.stderr[-5000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    print(result)
    assert result["seq_length"] == 40
    assert result["max_difference"] <= 1e-5  # packed rows (one text filling a row alone) against the notebook's
    assert result["labels_match"] and result["same_first_batch"]
    assert result["examples_in_batch"] > result["rows_in_batch"] and result["most_in_a_row"] >= 3
    assert abs(result["packed_loss"] - result["alone_loss"]) <= 1e-5
    assert result["steps"] == 1 and result["history"]["loss"][0] > 0 and 0 <= result["history"]["val_accuracy"][0] <= 1


def test_the_program_runs_packed_by_default(export_dir, tmp_path):
    rows = [("text", "label")] + [(text, str(i % 2)) for i, text in enumerate(export_fixtures.CLASSIFIER_TEXTS * 3)]
    train = tmp_path / "train.tsv"
    train.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    output = tmp_path / "out"
    command = [
        sys.executable, "-m", "experiments.classify_with_hub", f"--export_dir={export_dir}", f"--train_file={train}",
        f"--eval_file={train}", f"--output_dir={output}", "--num_train_epochs=1", "--train_batch_size=8",
        "--warmup_proportion=0.1", "--new_sentences=Loved it.,Terrible and slow.",
    ]  # fmt: skip
    env = export_fixtures.legacy_keras_env()
    process = subprocess.run(
        command, env=env, cwd=export_fixtures.REPO_ROOT, capture_output=True, text=True, timeout=500
    )
    assert process.returncode == 0, process.stderr[-5000:]
    results = json.loads((output / "results.json").read_text())
    assert results["packing"] is True and results["train_examples"] == len(rows) - 1
    assert 0 <= results["test_accuracy"] <= 1 and results["test_loss"] > 0
    assert [p["text"] for p in results["predictions"]] == ["Loved it.", "Terrible and slow."]
    assert os.path.isdir(output / "saved_model")
    # --nopacking and --group_by_length together are today's grouped order; --packing refuses the second.
    refused = subprocess.run(command[:-1] + ["--group_by_length"], env=env, cwd=export_fixtures.REPO_ROOT,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith("--packing and --group_by_length are two orders of the batches: give one.")
    )
