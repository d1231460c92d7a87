"""classify_with_hub's length buckets: the classifier packs each batch to its bucket with the exported
preprocessor's `bert_pack_inputs(seq_length=)`, and gives the outputs of packing to the exported length."""

import json
import os
import subprocess
import sys

import keras

from bert_tf import BertEncoder
from bert_tf.export import export_encoder, export_preprocessor
from tests.helpers import export_fixtures

TEXTS_VOCAB = export_fixtures.SENTENCES + ["loved it", "terrible slow", "snacks", "surprise"]


def test_bucketed_hub_classifier_matches_padded_one(tmp_path):
    tokens = export_fixtures.vocab_from_texts(TEXTS_VOCAB)
    vocab_file = export_fixtures.write_vocab(tokens, tmp_path / "vocab.txt")
    keras.utils.set_random_seed(4)
    encoder = BertEncoder(export_fixtures.tiny_config(len(tokens), max_position_embeddings=64))
    export_encoder(encoder, str(tmp_path / "export" / "encoder"), vocab_file=vocab_file, verify=False)
    export_preprocessor(vocab_file, True, 40, str(tmp_path / "export" / "preprocess"))
    process = export_fixtures.run_legacy_keras_script("hub_bucket_check.py", tmp_path / "export", tmp_path, timeout=400)
    assert process.returncode == 0, process.stderr[-5000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    print(result)
    assert result["seq_length"] == 40 and result["padded_length"] == 40
    lengths = result["packed_lengths"]
    assert max(lengths) == 40 and min(lengths) < 8  # the longest is truncated like the padded packer does
    # A batch is packed to the smallest multiple of 8 holding its longest text, at most 40.
    assert result["short_batch_length"] == -(-sorted(lengths)[2] // 8) * 8 < 40
    assert result["full_batch_length"] == 40
    # Same outputs as packing every text to 40, in the model and in its saved form.
    assert result["max_difference"] < 1e-5 and result["saved_max_difference"] < 1e-5
    assert len(result["train_batch_lengths"]) >= 2 and all(n % 8 == 0 for n in result["train_batch_lengths"])
    assert result["steps"] == 7 and result["val_loss"] > 0
    assert result["test_covers_all"]
    assert result["autotuning"] == [False, False]  # bert_tf.prefetching: no stall when fit ends


def test_the_program_selects_tf_keras_itself():
    # `python -m experiments.classify_with_hub` without TF_USE_LEGACY_KERAS in the environment: the package
    # `experiments` (and `bert_tf`) load no TensorFlow, so the program's own setting comes first.
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    code = (
        f"import sys; sys.path.insert(0, {str(export_fixtures.REPO_ROOT)!r}); "
        "import experiments.classify_with_hub; "
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'loaded before the program ran'; "
        "import tensorflow as tf; print(tf.keras.__name__)"
    )
    result = subprocess.run([sys.executable, "-I", "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1].startswith("tf_keras"), result.stdout
