"""Fine-tune a sentiment classifier on exported SavedModels through `hub.KerasLayer`.

This is the TF Hub notebook program, run against our exports: the preprocessing
and encoder SavedModels are loaded with `hub.KerasLayer` into a tf_keras model
and fine-tuned end to end (the encoder's weights are trainable).

    python -m experiments.classify_with_hub --export_dir=runs/demo/export \
        --train_file=data/fine_foods_train.tsv --test_file=data/fine_foods_test.tsv \
        --output_dir=runs/demo/classifier

`hub.KerasLayer` builds on tf_keras (Keras 2), so this job sets
TF_USE_LEGACY_KERAS=1 before TensorFlow is imported.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import time

from absl import flags, logging

from bert_tf import cli, file_io

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string("export_dir", None, "Directory with the `encoder` and `preprocess` SavedModels.")
    flags.DEFINE_string("train_file", None, "TSV with a header and columns `text` and `label` (0/1).")
    flags.DEFINE_string("test_file", None, "Held-out TSV in the same format.")
    flags.DEFINE_string("output_dir", None, "Where the fine-tuned model, TensorBoard logs and results go.")
    flags.DEFINE_integer("epochs", 2, "Training epochs.")
    flags.DEFINE_integer("batch_size", 32, "Batch size.")
    flags.DEFINE_float(
        "learning_rate",
        1e-3,
        "Adam learning rate (1e-3: Keras' default, as `optimizer='adam'` in the "
        "notebook; pretrained encoders want BERT's 2e-5 to 1e-4).",
    )
    flags.DEFINE_float(
        "warmup_fraction",
        0.0,
        "0: a constant learning rate. Otherwise BERT's schedule, as in TF Hub's "
        "tutorial: linear warm-up over this fraction of the steps, then linear decay to 0.",
    )
    flags.DEFINE_integer("max_train_examples", 0, "Use at most this many training examples (0: all).")
    flags.DEFINE_integer("max_test_examples", 0, "Use at most this many test examples (0: all).")
    flags.DEFINE_list(
        "new_sentences",
        [
            "Absolutely delicious, I will order this again.",
            "The coffee was stale and tasted like cardboard.",
            "My dog loves these treats.",
            "Too sweet and the package arrived damaged.",
        ],
        "Sentences to classify after training.",
    )
    flags.DEFINE_integer("seed", 1, "Random seed.")
    flags.mark_flags_as_required(["export_dir", "train_file", "test_file", "output_dir"])


def read_labeled_tsv(path, limit=0):
    """Reads `text<TAB>label` rows after a header line; names the file and line on errors."""
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header != ["text", "label"]:
            raise ValueError(f"{path}:1: expected the header 'text<TAB>label', got {header}.")
        for line_number, line in enumerate(f, start=2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 2 or fields[1] not in ("0", "1"):
                raise ValueError(f"{path}:{line_number}: expected 'text<TAB>0|1'.")
            texts.append(fields[0])
            labels.append(int(fields[1]))
            if limit and len(texts) >= limit:
                break
    if not texts:
        raise ValueError(f"{path}: no examples.")
    return texts, labels


def build_classifier(preprocess_dir, encoder_dir):
    """The TF Hub BERT classifier: text -> preprocess -> encoder -> dropout -> sigmoid."""
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the preprocessing model's ops, as for TF Hub's BERT)

    bert_preprocess = hub.KerasLayer(preprocess_dir, name="preprocessing")
    bert_encoder = hub.KerasLayer(encoder_dir, trainable=True, name="encoder")
    text_input = tf.keras.layers.Input(shape=(), dtype=tf.string, name="text")
    outputs = bert_encoder(bert_preprocess(text_input))
    x = tf.keras.layers.Dropout(0.1)(outputs["pooled_output"])
    x = tf.keras.layers.Dense(1, activation="sigmoid", name="classifier")(x)
    return tf.keras.Model(inputs=[text_input], outputs=[x])


def warmup_linear_decay(peak, num_steps, warmup_steps):
    """BERT's learning-rate schedule as a tf_keras schedule: linear warm-up to `peak`, then linear decay to 0."""
    import tensorflow as tf

    class _Schedule(tf.keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = tf.cast(step, tf.float32)
            warmup = step / max(warmup_steps, 1)
            decay = (num_steps - step) / max(num_steps - warmup_steps, 1)
            return peak * tf.maximum(tf.minimum(warmup, decay), 0.0)

        def get_config(self):
            return {"peak": peak, "num_steps": num_steps, "warmup_steps": warmup_steps}

    return _Schedule()


@cli.main_function("classify_with_hub", bad_input=(ValueError, OSError))
def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    cli.check_utf8(FLAGS.train_file, "train_file")
    cli.check_utf8(FLAGS.test_file, "test_file")
    tf.keras.utils.set_random_seed(FLAGS.seed)
    for name in ("encoder", "preprocess"):
        if not os.path.isdir(os.path.join(FLAGS.export_dir, name)):
            raise cli.BadInputError(f"--export_dir={FLAGS.export_dir} has no '{name}' SavedModel.")
    train_texts, train_labels = read_labeled_tsv(FLAGS.train_file, FLAGS.max_train_examples)
    test_texts, test_labels = read_labeled_tsv(FLAGS.test_file, FLAGS.max_test_examples)
    x_train, y_train = tf.constant(train_texts), np.array(train_labels, "float32")
    x_test, y_test = tf.constant(test_texts), np.array(test_labels, "float32")

    model = build_classifier(os.path.join(FLAGS.export_dir, "preprocess"), os.path.join(FLAGS.export_dir, "encoder"))
    num_steps = FLAGS.epochs * -(-len(train_texts) // FLAGS.batch_size)
    learning_rate = FLAGS.learning_rate
    if FLAGS.warmup_fraction > 0:
        learning_rate = warmup_linear_decay(FLAGS.learning_rate, num_steps, int(FLAGS.warmup_fraction * num_steps))
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate), loss="binary_crossentropy", metrics=["accuracy"])
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    start = time.time()
    history = model.fit(
        x_train,
        y_train,
        epochs=FLAGS.epochs,
        batch_size=FLAGS.batch_size,
        validation_data=(x_test, y_test),
        verbose=2,
        callbacks=[tf.keras.callbacks.TensorBoard(os.path.join(FLAGS.output_dir, "summaries"))],
    )
    train_seconds = time.time() - start
    # fit() evaluated the final weights on the test set already (inference mode, same batches as evaluate()).
    test_loss, test_accuracy = history.history["val_loss"][-1], history.history["val_accuracy"][-1]
    majority = max(np.mean(y_train), 1 - np.mean(y_train))
    majority_label = float(np.mean(y_train) >= 0.5)
    baseline = float(np.mean(y_test == majority_label))

    new_scores = model.predict(tf.constant(FLAGS.new_sentences), verbose=0)[:, 0]
    predictions = [
        {"text": t, "score": float(s), "label": "great" if s >= 0.5 else "other"}
        for t, s in zip(FLAGS.new_sentences, new_scores)
    ]
    with file_io.atomic_path(os.path.join(FLAGS.output_dir, "saved_model"), directory=True) as tmp_dir:
        model.save(tmp_dir, include_optimizer=False)

    results = {
        "test_accuracy": float(test_accuracy),
        "test_loss": float(test_loss),
        "majority_baseline_accuracy": baseline,
        "train_majority_fraction": float(majority),
        "train_examples": len(train_texts),
        "test_examples": len(test_texts),
        "train_seconds": train_seconds,
        "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
        "predictions": predictions,
    }
    file_io.write_json(os.path.join(FLAGS.output_dir, "results.json"), results)
    logging.info("test accuracy %.4f (majority-class baseline %.4f)", test_accuracy, baseline)
    for p in predictions:
        print(f"{p['score']:.3f}  {p['label']:5s}  {p['text']}")


def run():
    cli.run(main, define_flags)


if __name__ == "__main__":
    run()
