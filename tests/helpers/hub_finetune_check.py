"""One fine-tuning epoch of the notebook's classifier through `hub.KerasLayer`, measured.

Run by tests/test_real_weights.py in a subprocess (tf_keras and Keras 3 cannot
share a process):

    python tests/helpers/hub_finetune_check.py EXPORT_DIR TRAIN_TSV NUM_EXAMPLES LEARNING_RATE

Prints one JSON line: the loss on the training reviews before and after the
epoch (inference mode, so dropout does not blur the comparison) and how many
encoder weight tensors the epoch changed.
"""

import json
import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow picks its Keras

import numpy as np
import tensorflow as tf

from bert_tf.data.finetuning_readers import read_labeled_texts
from bert_tf.jobs.classify_with_hub.model import build_classifier


def main(export_dir, train_tsv, num_examples, learning_rate):
    tf.keras.utils.set_random_seed(0)
    texts, labels = read_labeled_texts(train_tsv, limit=int(num_examples))
    x, y = tf.constant(texts), np.array(labels, "float32")
    model = build_classifier(os.path.join(export_dir, "preprocess"), os.path.join(export_dir, "encoder"))
    model.compile(optimizer=tf.keras.optimizers.Adam(float(learning_rate)), loss="binary_crossentropy")
    encoder = model.get_layer("encoder")
    before_weights = [w.numpy().copy() for w in encoder.trainable_weights]
    loss_before = model.evaluate(x, y, batch_size=16, verbose=0)
    history = model.fit(x, y, epochs=1, batch_size=8, shuffle=True, verbose=0)
    loss_after = model.evaluate(x, y, batch_size=16, verbose=0)
    changed = sum(not np.array_equal(b, w.numpy()) for b, w in zip(before_weights, encoder.trainable_weights))
    print(
        json.dumps(
            {
                "loss_before": float(loss_before),
                "loss_after": float(loss_after),
                "train_loss": [float(v) for v in history.history["loss"]],
                "encoder_weights_changed": changed,
                "encoder_weights": len(before_weights),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
