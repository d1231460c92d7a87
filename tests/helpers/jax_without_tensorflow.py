"""Run by tests in a process where TensorFlow cannot be imported (tests/helpers/no_tensorflow.py), KERAS_BACKEND=jax.

    python tests/helpers/jax_without_tensorflow.py encode MODEL_DIR INPUTS_JSON SEQ_LENGTH OUT_NPZ
    python tests/helpers/jax_without_tensorflow.py fit MODEL_DIR DATA_JSON OUT_DIR
    python tests/helpers/jax_without_tensorflow.py logits MODEL_DIR DATA_JSON OUT_NPZ

`encode`: `load_encoder(MODEL_DIR)`, the plain-Python tokenizer on INPUTS_JSON ([[text_a, text_b or null], ...])
and the encoder; writes the inputs and outputs. `fit`: `bert_tf.jobs.keras_fit.fit_classifier` on DATA_JSON
({"train": [texts, labels], "test": [...], "max_seq_length": n, ...}); writes OUT_DIR/model and OUT_DIR/results.npz
(the test logits). `logits`: a fine-tuned `BertClassifier` read with `load_task_model`, its logits on
DATA_JSON's test texts. All fail if any TensorFlow module got imported.
"""

import json
import os
import sys

import numpy as np


def _check_no_tensorflow():
    loaded = sorted(m for m in sys.modules if m.split(".")[0].startswith("tensorflow") or m.startswith("tf_keras"))
    assert not loaded, f"TensorFlow modules were imported: {loaded[:5]}"


def encode(model_dir, inputs_json, seq_length, out):
    import keras

    import bert_tf
    from bert_tf.tokenization import PythonBertTokenizer

    assert keras.backend.backend() == "jax"
    _check_no_tensorflow()
    encoder = bert_tf.load_encoder(model_dir)
    pairs = json.load(open(inputs_json, encoding="utf-8"))
    tokenizer = PythonBertTokenizer(os.path.join(model_dir, "vocab.txt"), lower_case=True)
    # Pairs and single texts are packed apart, then stacked (the reference mixes both).
    rows = [tokenizer.encode([a], int(seq_length), texts_b=None if b is None else [b]) for a, b in pairs]
    inputs = {key: np.concatenate([row[key] for row in rows]) for key in rows[0]}
    outputs = encoder(inputs)
    np.savez(
        out,
        sequence_output=np.asarray(outputs["sequence_output"]),
        pooled_output=np.asarray(outputs["pooled_output"]),
        **inputs,
    )
    _check_no_tensorflow()


def fit(model_dir, data_json, out_dir):
    import keras

    from bert_tf.jobs import keras_fit

    assert keras.backend.backend() == "jax"
    data = json.load(open(data_json, encoding="utf-8"))
    options = {k: v for k, v in data.items() if k not in ("train", "test")}
    results = keras_fit.fit_classifier(
        model_dir,
        tuple(data["train"]),
        tuple(data["test"]),
        output_dir=os.path.join(out_dir, "model"),
        verbose=0,
        **options,
    )
    from bert_tf.tokenization import PythonBertTokenizer

    tokenizer = PythonBertTokenizer(os.path.join(model_dir, "vocab.txt"), lower_case=True)
    inputs = tokenizer.encode(data["test"][0], options.get("max_seq_length", 128))
    logits = np.asarray(results["model"].predict(inputs, verbose=0))
    np.savez(os.path.join(out_dir, "results.npz"), logits=logits, accuracy=results["test_accuracy"], **inputs)
    _check_no_tensorflow()


def logits(model_dir, data_json, out):
    from bert_tf.checkpoints import load_task_model
    from bert_tf.models import BertClassifier
    from bert_tf.tokenization import PythonBertTokenizer

    data = json.load(open(data_json, encoding="utf-8"))
    classifier = load_task_model(model_dir, lambda encoder: BertClassifier(encoder, num_classes=2))
    tokenizer = PythonBertTokenizer(os.path.join(model_dir, "vocab.txt"), lower_case=True)
    inputs = tokenizer.encode(data["test"][0], data.get("max_seq_length", 128))
    np.savez(out, logits=np.asarray(classifier.predict(inputs, verbose=0)), **inputs)
    _check_no_tensorflow()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"encode": encode, "fit": fit, "logits": logits}[command](*args)
