"""Exercises exported SavedModels through tf_keras and TF Hub, as a TF Hub BERT user would.

Run by tests/test_export_hub.py in a subprocess with TF_USE_LEGACY_KERAS=1
(tf_keras and Keras 3 cannot share a process):

    python tests/helpers/export_hub_checks.py SPEC.json RESULTS.json

SPEC.json names the exported `encoder` and `preprocess` directories, a
`reference` .npz written by the Keras 3 side and a `work_dir`. Each check
records its measurements (or its traceback) under its name in RESULTS.json;
the test module asserts on them.
"""

import json
import os
import sys
import time
import traceback

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow picks its Keras
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  registers the ops of the preprocessing SavedModel, as with TF Hub's

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def output_diffs(outputs, reference, prefix=""):
    diffs = {
        "sequence_output": max_diff(outputs["sequence_output"], reference[prefix + "sequence_output"]),
        "pooled_output": max_diff(outputs["pooled_output"], reference[prefix + "pooled_output"]),
        "default": max_diff(outputs["default"], reference[prefix + "pooled_output"]),
    }
    for i, layer in enumerate(outputs["encoder_outputs"]):
        diffs[f"encoder_outputs_{i}"] = max_diff(layer, reference[f"{prefix}encoder_outputs_{i}"])
    return diffs


def weights_changed(layer, before):
    return [w.name for w, old in zip(layer.weights, before) if not np.array_equal(w.numpy(), old)]


def check_encoder_layer(spec, reference):
    inputs = {k: reference[k] for k in ENCODER_KEYS}
    trainable = hub.KerasLayer(spec["encoder"], trainable=True)
    frozen = hub.KerasLayer(spec["encoder"], trainable=False)
    return {
        "trainable_diffs": output_diffs(trainable(inputs), reference),
        "frozen_diffs": output_diffs(frozen(inputs), reference),
        "num_encoder_outputs": len(trainable(inputs)["encoder_outputs"]),
        "num_trainable_weights": len(trainable.trainable_weights),
        "num_frozen_trainable_weights": len(frozen.trainable_weights),
        "num_weights": len(trainable.weights),
        # hub.KerasLayer passes training=True to a trainable layer in fit: dropout on.
        "training_call_diff": max_diff(trainable(inputs, training=True)["pooled_output"], reference["pooled_output"]),
    }


def text_classifier(spec, trainable):
    """The program of the TF Hub BERT tutorial, unchanged."""
    bert_preprocess = hub.KerasLayer(spec["preprocess"])
    bert_encoder = hub.KerasLayer(spec["encoder"], trainable=trainable)
    text_input = tf.keras.layers.Input(shape=(), dtype=tf.string, name="text")
    outputs = bert_encoder(bert_preprocess(text_input))
    l = tf.keras.layers.Dropout(0.1)(outputs["pooled_output"])
    l = tf.keras.layers.Dense(1, activation="sigmoid")(l)
    model = tf.keras.Model(inputs=[text_input], outputs=[l])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return model, bert_preprocess, bert_encoder


def check_fine_tune(spec, reference):
    texts, labels = np.array(spec["texts"]), np.array(spec["labels"])
    model, bert_preprocess, bert_encoder = text_classifier(spec, trainable=True)
    preprocessed = bert_preprocess(tf.constant(texts))
    before = [w.numpy().copy() for w in bert_encoder.weights]
    history = model.fit(texts, labels, epochs=2, batch_size=4, verbose=0)
    changed = weights_changed(bert_encoder, before)
    trainable_names = {w.name for w in bert_encoder.trainable_weights}

    # model.save of the fine-tuned model: a SavedModel that serves raw strings.
    predictions = model(tf.constant(texts), training=False).numpy()
    saved_dir = os.path.join(spec["work_dir"], "fine_tuned_classifier")
    model.save(saved_dir, include_optimizer=False)
    served = tf.saved_model.load(saved_dir)(tf.constant(texts))
    # The encoder's files are untouched by fine-tuning.
    original = hub.KerasLayer(spec["encoder"])({k: reference[k] for k in ENCODER_KEYS})
    return {
        "preprocess_word_ids": preprocessed["input_word_ids"].numpy().tolist(),
        "preprocess_shape": list(preprocessed["input_word_ids"].shape),
        "num_model_trainable_weights": len(model.trainable_weights),
        "num_encoder_trainable_weights": len(bert_encoder.trainable_weights),
        "num_changed": len(changed),
        "changed_non_trainable": sorted(set(changed) - trainable_names),
        "word_embeddings_changed": any("word_embeddings" in name for name in changed),
        "loss": [float(x) for x in history.history["loss"]],
        "served_vs_model": max_diff(served, predictions),
        "predictions": predictions.ravel().tolist(),
        "original_file_diffs": output_diffs(original, reference),
    }


def check_frozen(spec, reference):
    texts, labels = np.array(spec["texts"]), np.array(spec["labels"])
    model, _, bert_encoder = text_classifier(spec, trainable=False)
    head = model.layers[-1]
    before = [w.numpy().copy() for w in bert_encoder.weights]
    head_before = [w.numpy().copy() for w in head.weights]
    model.fit(texts, labels, epochs=1, batch_size=4, verbose=0)
    return {
        "num_model_trainable_weights": len(model.trainable_weights),
        "num_encoder_changed": len(weights_changed(bert_encoder, before)),
        "num_head_changed": len(weights_changed(head, head_before)),
    }


def check_sentence_pairs(spec, reference):
    """TF Hub's pattern for sentence pairs: tokenize each segment, then bert_pack_inputs."""
    preprocessor = hub.load(spec["preprocess"])
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    bert_pack_inputs = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments=dict(seq_length=spec["pair_seq_length"]))
    text_inputs = [tf.keras.layers.Input(shape=(), dtype=tf.string, name=name) for name in ("premise", "hypothesis")]
    encoder_inputs = bert_pack_inputs([tokenize(segment) for segment in text_inputs])
    encoder = hub.KerasLayer(spec["encoder"], trainable=True)
    pooled = encoder(encoder_inputs)["pooled_output"]
    model = tf.keras.Model(text_inputs, tf.keras.layers.Dense(3)(pooled))
    packer = tf.keras.Model(text_inputs, encoder_inputs)

    first, second = tf.constant(spec["pair_first"]), tf.constant(spec["pair_second"])
    packed = packer([first, second])
    encoded = encoder(packed)
    logits = model([first, second])
    return {
        "packed": {k: packed[k].numpy().tolist() for k in ENCODER_KEYS},
        "pair_diffs": output_diffs(encoded, reference, prefix="pair_"),
        "logits_shape": list(logits.shape),
    }


def check_mlm(spec, reference):
    encoder = hub.load(spec["encoder"])
    mlm = hub.KerasLayer(encoder.mlm, trainable=True)
    inputs = {k: reference[k] for k in ENCODER_KEYS + ("masked_lm_positions",)}
    outputs = mlm(inputs)
    return {
        "mlm_logits_diff": max_diff(outputs["mlm_logits"], reference["mlm_logits"]),
        "mlm_logits_shape": list(outputs["mlm_logits"].shape),
        "num_trainable_weights": len(mlm.trainable_weights),
    }


CHECKS = {
    "encoder_layer": check_encoder_layer,
    "fine_tune": check_fine_tune,
    "frozen": check_frozen,
    "sentence_pairs": check_sentence_pairs,
    "mlm": check_mlm,
}


def main(spec_path, results_path):
    with open(spec_path) as f:
        spec = json.load(f)
    reference = dict(np.load(spec["reference"]))
    results = {
        "keras_version": tf.keras.__version__ if hasattr(tf.keras, "__version__") else "",
        "keras_module": tf.keras.Model.__module__,
    }
    for name in spec.get("checks", CHECKS):
        tf.keras.utils.set_random_seed(0)
        start = time.time()
        try:
            results[name] = {"ok": True, **CHECKS[name](spec, reference)}
        except Exception:  # recorded for the test to report; the other checks still run
            results[name] = {"ok": False, "error": traceback.format_exc()}
        results[name]["seconds"] = round(time.time() - start, 2)
    with open(results_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
