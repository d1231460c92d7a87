"""Run under tf_keras (TF_USE_LEGACY_KERAS=1) by tests/test_classify_with_hub_packing.py.

argv: export_dir. Builds bert_tf.jobs.classify_with_hub's classifier (the notebook's, every text at the exported
length) and its packed form on the same layers, scores texts both ways, compares a packed training batch's loss
with the examples' mean loss alone, and fits one epoch on packed rows; prints one JSON line.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

from bert_tf.data import packed_rows
from bert_tf.jobs.classify_with_hub import datasets, model

TEXTS = [
    "Great.",
    "The food was terrible and the service slow.",
    "What a wonderful surprise, " * 6 + "I loved it.",  # a row of its own at length 40
    "I would not buy this again.",
    "My kids love these snacks, " * 20,  # truncated to 40: fills a row alone
    "Awful. Stale and bland.",
    "Great taste, great price.",
    "Loved it.",
]


def main(export_dir):
    tf.keras.utils.set_random_seed(0)
    preprocess_dir = os.path.join(export_dir, "preprocess")
    classifier = model.build_classifier(preprocess_dir, os.path.join(export_dir, "encoder"))
    packed = model.packed_classifier(classifier)
    preprocessor = hub.load(preprocess_dir)
    seq_length = model.default_seq_length(preprocessor)
    inputs = datasets.encode_texts(preprocessor, TEXTS, seq_length)
    alone = classifier.predict(tf.constant(TEXTS), batch_size=len(TEXTS), verbose=0)[:, 0]
    scores = datasets.packed_scores(packed, inputs, batch_size=4, seq_length=seq_length)

    labels = np.array([1, 0, 1, 0, 1, 0, 1, 1], np.float32)
    train, steps, test = datasets.packed_datasets(inputs, labels, inputs, labels, 8, seq_length, seed=3)
    # A training batch as packed_datasets draws it (same seed), with the examples' indices.
    tables = packed_rows.training_row_batches(inputs["input_mask"].sum(axis=1), 8, seq_length, seed=3)
    columns = dict(inputs, label=labels)
    batch = next(iter(packed_rows.gather_packed_batches(tables, columns, seq_length, slot_keys=("label",))))
    x, y = datasets.inputs_and_labels(batch)
    index = batch["feature_index"].numpy()
    members = index[index >= 0]
    packed_loss = float(model.masked_binary_crossentropy(y, packed(x, training=False)))
    alone_loss = float(np.mean(tf.keras.losses.binary_crossentropy(labels[members][:, None], alone[members][:, None])))
    first_batch = next(iter(train))

    packed.compile(
        optimizer=tf.keras.optimizers.Adam(1e-3),
        loss=model.masked_binary_crossentropy,
        metrics=[model.masked_binary_accuracy()],
    )
    history = packed.fit(train, steps_per_epoch=steps, epochs=1, validation_data=test, verbose=0)
    print(
        json.dumps(
            {
                "seq_length": seq_length,
                "max_difference": float(np.max(np.abs(scores - alone))),
                "examples_in_batch": len(members),
                "rows_in_batch": int(index.shape[0]),
                "most_in_a_row": int((index >= 0).sum(axis=1).max()),
                "labels_match": bool(np.array_equal(y.numpy()[..., 0][index >= 0], labels[members])),
                "same_first_batch": bool(np.array_equal(first_batch[1].numpy(), y.numpy())),
                "packed_loss": packed_loss,
                "alone_loss": alone_loss,
                "steps": steps,
                "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
