"""Run under tf_keras (TF_USE_LEGACY_KERAS=1) by tests/test_classify_with_hub_buckets.py.

argv: export_dir, work_dir. Builds bert_tf.jobs.classify_with_hub's classifier with and without length buckets (same
weights), compares their outputs, the packed lengths, the saved bucketed classifier, and trains two steps on
the bucketed datasets; prints one JSON line.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

from bert_tf.jobs.classify_with_hub.datasets import bucketed_datasets
from bert_tf.jobs.classify_with_hub.model import build_classifier

TEXTS = [
    "Great.",
    "The food was terrible and the service slow.",
    "What a wonderful surprise, " * 6 + "I loved it.",
    "I would not buy this again.",
    "My kids love these snacks, " * 20,
    "Awful. Stale and bland.",
    "Great taste, great price.",
]


def main(export_dir, work_dir):
    tf.keras.utils.set_random_seed(0)
    preprocess, encoder = os.path.join(export_dir, "preprocess"), os.path.join(export_dir, "encoder")
    padded = build_classifier(preprocess, encoder)
    bucketed = build_classifier(preprocess, encoder, bucket_width=8)
    bucketed.set_weights(padded.get_weights())
    layer = bucketed.get_layer("preprocessing")
    texts = tf.constant(TEXTS)
    order = np.argsort(layer.packed_lengths(texts).numpy(), kind="stable")
    short = tf.constant([TEXTS[i] for i in order[:3]])
    result = {
        "seq_length": layer.seq_length,
        "packed_lengths": layer.packed_lengths(texts).numpy().tolist(),
        "short_batch_length": int(layer(short)["input_word_ids"].shape[1]),
        "full_batch_length": int(layer(texts)["input_word_ids"].shape[1]),
        "padded_length": int(padded.get_layer("preprocessing")(texts)["input_word_ids"].shape[1]),
    }
    reference = padded.predict(texts, batch_size=len(TEXTS), verbose=0)
    # One text per batch: each is packed to its own bucket.
    result["max_difference"] = float(np.abs(bucketed.predict(texts, batch_size=1, verbose=0) - reference).max())
    path = os.path.join(work_dir, "bucketed_classifier")
    bucketed.save(path, include_optimizer=False)
    loaded = tf.saved_model.load(path)
    result["saved_max_difference"] = float(np.abs(np.asarray(loaded(short)) - reference[order[:3]]).max())

    labels = np.array([1, 0, 1, 0, 1, 0, 1], np.float32)
    train, steps, test = bucketed_datasets(
        layer, TEXTS * 4, np.tile(labels, 4), TEXTS, labels, 4, seed=3, group_by_length=True
    )
    result["train_batch_lengths"] = sorted({int(layer(x)["input_word_ids"].shape[1]) for x, _ in train.take(steps)})
    result["test_covers_all"] = sorted(t.decode() for x, _ in test for t in x.numpy().tolist()) == sorted(TEXTS)
    bucketed.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="binary_crossentropy", metrics=["accuracy"])
    history = bucketed.fit(train, steps_per_epoch=steps, epochs=1, validation_data=test, verbose=0)
    result["steps"] = steps
    result["val_loss"] = float(history.history["val_loss"][-1])
    result["autotuning"] = [train.options().autotune.enabled, test.options().autotune.enabled]
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
