"""Fine-tune a sentiment classifier on exported SavedModels through `hub.KerasLayer`.

This is the TF Hub notebook program, run against our exports: the preprocessing
and encoder SavedModels are loaded with `hub.KerasLayer` into a tf_keras model
and fine-tuned end to end (the encoder's weights are trainable).

    python -m experiments.classify_with_hub --export_dir=runs/demo/export \
        --train_file=data/fine_foods_train.tsv --eval_file=data/fine_foods_test.tsv \
        --label_names=other,great --output_dir=runs/demo/classifier

The data: TSV files with a header; `--text_a_column` and `--label_column` name
the columns (a header name or a 0-based index, as in `experiments.finetune`).
The classifier is binary (a sigmoid, as in TF Hub's tutorial): the training
data has exactly two labels, named as written in the data and sorted (the
second is the positive class, whose probability is the score), or, for labels
written as 0/1, named by `--label_names` in id order. Results name each
baseline for what it is: the training set's majority class scored on the test
set, and the test set's own majority class.

`hub.KerasLayer` builds on tf_keras (Keras 2), so this job sets
TF_USE_LEGACY_KERAS=1 before TensorFlow is imported.

Length buckets (`--bucket_width`, default 16; 0 = the notebook's program
unchanged). The notebook's preprocessing layer packs every batch to the
exported default length (128), so a batch of short reviews pays for 128
positions. Bucketing before that packer would save nothing: the packer would
pad the short batch back to 128. So the classifier packs with the exported
preprocessor's own TF Hub API, `tokenize` then `bert_pack_inputs(...,
seq_length=)`, with a `seq_length` computed in the graph from the batch: the
smallest multiple of `--bucket_width` that holds its longest text (at most
`--max_seq_length`). Any TF Hub BERT preprocessor has that API, so no new export
is needed, and the saved classifier keeps taking raw strings of any batch.
The training batches are random, drawn from `--seed` epoch by epoch
(`bert_tf.data.length_buckets`; `--group_by_length` makes batches of
near-equal lengths instead: less padding, slower learning on small data), the
held-out batches sorted by length. Truncation at `--max_seq_length` is the same
as the notebook's, so the model sees the same tokens.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import time

from absl import flags, logging

from bert_tf import cli, errors, file_io

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string("export_dir", None, "Directory with the `encoder` and `preprocess` SavedModels.")
    flags.DEFINE_string("train_file", None, "TSV with a header row; two labels (see --label_column).")
    flags.DEFINE_string("eval_file", None, "Held-out TSV in the same format (the tutorial's test set).")
    flags.DEFINE_string("text_a_column", "text", "The text column: a header name or 0-based index.")
    flags.DEFINE_string("label_column", "label", "The label column: a header name or 0-based index.")
    flags.DEFINE_list(
        "label_names",
        None,
        "Names of labels written as 0 and 1, in that order (e.g. other,great for the bundled reviews); "
        "default: the labels as written, sorted.",
    )
    flags.DEFINE_string("output_dir", None, "Where the fine-tuned model, TensorBoard logs and results go.")
    flags.DEFINE_integer("num_train_epochs", 2, "Training epochs.")
    flags.DEFINE_integer("train_batch_size", 32, "Training batch size (also the held-out batches').")
    flags.DEFINE_float(
        "learning_rate",
        1e-3,
        "Adam learning rate (1e-3: Keras' default, as `optimizer='adam'` in the "
        "notebook; pretrained encoders want BERT's 2e-5 to 1e-4).",
    )
    flags.DEFINE_float(
        "warmup_proportion",
        0.0,
        "0: a constant learning rate. Otherwise BERT's schedule, as in TF Hub's "
        "tutorial: linear warm-up over this fraction of the steps, then linear decay to 0.",
    )
    flags.DEFINE_integer(
        "bucket_width",
        16,
        "Pack each batch to the smallest multiple of this that holds its longest text (at most --max_seq_length); "
        "0: the notebook's program (every batch at the exported length).",
    )
    flags.DEFINE_boolean(
        "group_by_length",
        False,
        "With --bucket_width: training batches of near-equal lengths instead of random ones (less padding, "
        "slower learning on small data).",
    )
    flags.DEFINE_integer(
        "max_seq_length",
        0,
        "With --bucket_width: the longest packed length (0: the preprocessing model's default).",
    )
    flags.DEFINE_integer("max_train_examples", 0, "Use at most this many training examples (0: all).")
    flags.DEFINE_integer("max_eval_examples", 0, "Use at most this many held-out examples (0: all).")
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
    flags.DEFINE_string(
        "task_model_dir",
        None,
        "Also write the fine-tuned classifier here as a fine-tuned model directory (experiments.finetune's "
        "layout, two classes: the labels as written), which experiments.distill --teacher_dir, experiments.export "
        "and load_task_model take.",
    )
    flags.DEFINE_integer("seed", 1, "Random seed.")
    flags.mark_flags_as_required(["export_dir", "train_file", "eval_file", "output_dir"])


def _column_index(path, header, column, flag):
    """The index of `column` (a header name or a 0-based index) in `header`."""
    if column in header:
        return header.index(column)
    if column.isdigit() and int(column) < len(header):
        return int(column)
    raise ValueError(f"{path}:1: no --{flag} column {column!r}; the header has {header}.")


def read_labeled_tsv(path, limit=0, text_column="text", label_column="label"):
    """(texts, labels as written) of a TSV with a header row; errors name the file and line."""
    import csv

    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        header = next(rows, None)
        if not header:
            raise ValueError(f"{path}: empty file.")
        text_index = _column_index(path, header, text_column, "text_a_column")
        label_index = _column_index(path, header, label_column, "label_column")
        for line_number, fields in enumerate(rows, start=2):
            if len(fields) <= max(text_index, label_index) or not fields[label_index]:
                raise ValueError(f"{path}:{line_number}: expected {len(header)} tab-separated fields with a label.")
            texts.append(fields[text_index])
            labels.append(fields[label_index])
            if limit and len(texts) >= limit:
                break
    if not texts:
        raise ValueError(f"{path}: no examples.")
    return texts, labels


def binary_labels(train_labels, test_labels, label_names, test_file):
    """(names of the two classes in id order, train targets 0/1, test targets 0/1): see the module docstring."""
    import numpy as np

    written = sorted(set(train_labels))
    if len(written) != 2:
        raise ValueError(
            f"--train_file: this binary classifier needs exactly two labels, got {len(written)}: {written[:5]}; "
            "use experiments.finetune for more classes."
        )
    if label_names:
        if len(label_names) != 2 or written != ["0", "1"]:
            raise ValueError(
                f"--label_names={','.join(label_names)}: needs two names and labels written as 0 and 1 (got {written})."
            )
        names = list(label_names)
    else:
        names = written
    for number, label in enumerate(test_labels):
        if label not in written:
            raise ValueError(f"{test_file}: example {number + 1} has the label {label!r}, not one of {written}.")
    positive = written[1]
    return (
        names,
        np.array([label == positive for label in train_labels], "float32"),
        np.array([label == positive for label in test_labels], "float32"),
    )


def build_classifier(preprocess_dir, encoder_dir, bucket_width=0, seq_length=0):
    """The TF Hub BERT classifier: text -> preprocess -> encoder -> dropout -> sigmoid.

    `bucket_width` > 0: the preprocessing packs each batch to the smallest multiple of it that holds the
    batch's longest text, at most `seq_length` (0: the preprocessing model's default length); see the
    module docstring.
    """
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the preprocessing model's ops, as for TF Hub's BERT)

    if bucket_width:
        bert_preprocess = BucketedPreprocessing(preprocess_dir, bucket_width, seq_length, name="preprocessing")
    else:
        bert_preprocess = hub.KerasLayer(preprocess_dir, name="preprocessing")
    bert_encoder = hub.KerasLayer(encoder_dir, trainable=True, name="encoder")
    text_input = tf.keras.layers.Input(shape=(), dtype=tf.string, name="text")
    outputs = bert_encoder(bert_preprocess(text_input))
    x = tf.keras.layers.Dropout(0.1)(outputs["pooled_output"])
    x = tf.keras.layers.Dense(1, activation="sigmoid", name="classifier")(x)
    return tf.keras.Model(inputs=[text_input], outputs=[x])


def _bucketed_preprocessing_class():
    import tensorflow as tf
    import tensorflow_hub as hub

    class BucketedPreprocessing(tf.keras.layers.Layer):
        """text [batch] -> encoder inputs packed to the batch's bucket length, by a TF Hub preprocessor's API.

        The length is the smallest multiple of `bucket_width` that holds the batch's longest text with [CLS]
        and [SEP], capped at `seq_length` (0: the preprocessor's default length, read from its output).
        """

        def __init__(self, preprocess_dir, bucket_width, seq_length=0, **kwargs):
            super().__init__(trainable=False, **kwargs)
            self.preprocess_dir = preprocess_dir
            self.bucket_width = int(bucket_width)
            self.preprocessor = hub.load(preprocess_dir)
            if not seq_length:
                seq_length = int(self.preprocessor(tf.constant([""]))["input_word_ids"].shape[1])
            self.seq_length = int(seq_length)

        def packed_lengths(self, text):
            """[batch] int32: each text's packed length (pieces + [CLS] + [SEP], at most `seq_length`)."""
            return tf.minimum(tf.cast(self._pieces(text).row_lengths(), tf.int32) + 2, self.seq_length)

        def _pieces(self, text):
            pieces = self.preprocessor.tokenize(text)
            # TF Hub's preprocessors give [batch, words, pieces]; bert_tf's [batch, pieces].
            return pieces.merge_dims(1, -1) if pieces.ragged_rank > 1 else pieces

        def call(self, text):
            pieces = self._pieces(text)
            longest = tf.maximum(tf.reduce_max(tf.cast(pieces.row_lengths(), tf.int32)) + 2, 2)
            bucket = tf.minimum(-(-longest // self.bucket_width) * self.bucket_width, self.seq_length)
            return self.preprocessor.bert_pack_inputs([pieces], seq_length=bucket)

        def get_config(self):
            return dict(
                super().get_config(),
                preprocess_dir=self.preprocess_dir,
                bucket_width=self.bucket_width,
                seq_length=self.seq_length,
            )

    return BucketedPreprocessing


def BucketedPreprocessing(preprocess_dir, bucket_width, seq_length=0, **kwargs):
    """A tf_keras layer: see `_bucketed_preprocessing_class` (defined there so that importing loads no TF)."""
    return _bucketed_preprocessing_class()(preprocess_dir, bucket_width, seq_length, **kwargs)


def bucketed_datasets(preprocessing, texts, labels, test_texts, test_labels, batch_size, seed, group_by_length=False):
    """(training dataset (endless), steps per epoch, held-out dataset) with batches grouped by packed length."""
    import numpy as np
    import tensorflow as tf

    from bert_tf import prefetching
    from bert_tf.data import length_buckets

    def lengths(values):
        batches = prefetching.without_autotuning(tf.data.Dataset.from_tensor_slices(values).batch(1024))
        return np.concatenate([preprocessing.packed_lengths(batch).numpy() for batch in batches]).astype(np.int64)

    columns = {"text": np.asarray(texts, dtype=str), "label": np.asarray(labels, np.float32)}
    indices = length_buckets.training_batch_indices(
        lengths(columns["text"]),
        batch_size,
        preprocessing.seq_length,
        preprocessing.bucket_width,
        seed,
        group_by_length=group_by_length,
    )
    train = length_buckets.gather_batches(indices, columns, (), training=True)
    train = prefetching.prefetched(train.map(lambda batch: (batch["text"], batch["label"])))
    order = np.argsort(lengths(np.asarray(test_texts, dtype=str)), kind="stable")
    test = tf.data.Dataset.from_tensor_slices(
        (np.asarray(test_texts, dtype=str)[order], np.asarray(test_labels, np.float32)[order])
    )
    return train, len(texts) // batch_size, prefetching.prefetched(test.batch(batch_size))


def write_task_model_dir(model, export_dir, output_dir, written_labels, texts):
    """Writes the fine-tuned tf_keras `model` as a fine-tuned model directory (`bert_tf.checkpoints.hub_classifier`).

    The converted classifier must give the same scores as `model` on `texts` (a check that the variables were
    matched in order); `written_labels` are the two labels as the data writes them, in id order.
    """
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub

    from bert_tf.checkpoints.hub_classifier import classifier_from_hub_weights
    from bert_tf.config import BertConfig
    from bert_tf.jobs.finetuning_files import write_classifier_model_dir

    extra = os.path.join(export_dir, "encoder", "assets.extra")
    config = BertConfig.from_json_file(os.path.join(extra, "bert_config.json"))
    head = model.get_layer("classifier")
    converted = classifier_from_hub_weights(
        config,
        [v.numpy() for v in model.get_layer("encoder").trainable_weights],
        head.kernel.numpy(),
        head.bias.numpy(),
        dropout_rate=0.1,  # build_classifier's
    )
    preprocessing = model.get_layer("preprocessing")
    sample = tf.constant(texts[:32])
    expected = model.predict(sample, verbose=0)[:, 0]
    logits = converted({k: v for k, v in preprocessing(sample).items()}, training=False)
    difference = float(np.max(np.abs(tf.nn.softmax(logits)[:, 1].numpy() - expected)))
    if difference > 1e-4:
        raise RuntimeError(f"The converted classifier's scores differ from the fine-tuned one's by {difference}.")
    preprocessor = hub.load(os.path.join(export_dir, "preprocess"))
    cased, uncased = (preprocessor.tokenize(tf.constant([t])).flat_values.numpy().tolist() for t in ("The", "the"))
    seq_length = getattr(preprocessing, "seq_length", 0) or int(
        preprocessor(tf.constant([""]))["input_word_ids"].shape[1]
    )
    path = write_classifier_model_dir(
        output_dir,
        converted,
        os.path.join(extra, "vocab.txt"),
        written_labels,
        seq_length,
        do_lower_case=cased == uncased,
        text_a_column=FLAGS.text_a_column,
        label_column=FLAGS.label_column,
    )
    logging.info("Wrote the classifier as a model directory: %s (scores agree to %.1e)", path, difference)


def warmup_linear_decay(peak, num_steps, warmup_steps):
    """BERT's schedule (`bert_tf.training.schedule`) as a tf_keras schedule."""
    import tensorflow as tf

    from bert_tf.training.schedule import linear_schedule

    return linear_schedule(
        tf.keras.optimizers.schedules.LearningRateSchedule,
        tf,
        learning_rate=peak,
        num_train_steps=num_steps,
        num_warmup_steps=warmup_steps,
    )


@cli.main_function("classify_with_hub", bad_input=(ValueError, OSError))
def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    errors.check_utf8(FLAGS.train_file, "train_file")
    errors.check_utf8(FLAGS.eval_file, "eval_file")
    tf.keras.utils.set_random_seed(FLAGS.seed)
    for name in ("encoder", "preprocess"):
        if not os.path.isdir(os.path.join(FLAGS.export_dir, name)):
            raise errors.BadInputError(f"--export_dir={FLAGS.export_dir} has no '{name}' SavedModel.")
    for flag in ("bucket_width", "max_seq_length"):
        if FLAGS[flag].value < 0:
            raise errors.BadInputError(f"--{flag} must be >= 0, got {FLAGS[flag].value}.")
    if FLAGS.task_model_dir and os.path.exists(FLAGS.task_model_dir) and os.listdir(FLAGS.task_model_dir):
        raise errors.BadInputError(f"--task_model_dir={FLAGS.task_model_dir} exists and is not empty.")
    columns = (FLAGS.text_a_column, FLAGS.label_column)
    train_texts, train_labels = read_labeled_tsv(FLAGS.train_file, FLAGS.max_train_examples, *columns)
    test_texts, test_labels = read_labeled_tsv(FLAGS.eval_file, FLAGS.max_eval_examples, *columns)
    names, y_train, y_test = binary_labels(train_labels, test_labels, FLAGS.label_names, FLAGS.eval_file)
    x_train, x_test = tf.constant(train_texts), tf.constant(test_texts)

    model = build_classifier(
        os.path.join(FLAGS.export_dir, "preprocess"),
        os.path.join(FLAGS.export_dir, "encoder"),
        bucket_width=FLAGS.bucket_width,
        seq_length=FLAGS.max_seq_length,
    )
    if FLAGS.bucket_width:
        train_data, steps_per_epoch, test_data = bucketed_datasets(
            model.get_layer("preprocessing"),
            train_texts,
            y_train,
            test_texts,
            y_test,
            FLAGS.train_batch_size,
            FLAGS.seed,
            group_by_length=FLAGS.group_by_length,
        )
        fit_data = dict(x=train_data, steps_per_epoch=steps_per_epoch, validation_data=test_data)
    else:
        steps_per_epoch = -(-len(train_texts) // FLAGS.train_batch_size)
        fit_data = dict(x=x_train, y=y_train, batch_size=FLAGS.train_batch_size, validation_data=(x_test, y_test))
    num_steps = FLAGS.num_train_epochs * steps_per_epoch
    learning_rate = FLAGS.learning_rate
    if FLAGS.warmup_proportion > 0:
        learning_rate = warmup_linear_decay(FLAGS.learning_rate, num_steps, int(FLAGS.warmup_proportion * num_steps))
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate), loss="binary_crossentropy", metrics=["accuracy"])
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    start = time.time()
    history = model.fit(
        **fit_data,
        epochs=FLAGS.num_train_epochs,
        verbose=2,
        callbacks=[tf.keras.callbacks.TensorBoard(os.path.join(FLAGS.output_dir, "summaries"))],
    )
    train_seconds = time.time() - start
    # fit() evaluated the final weights on the test set already (inference mode, same batches as evaluate()).
    test_loss, test_accuracy = history.history["val_loss"][-1], history.history["val_accuracy"][-1]
    majority = max(np.mean(y_train), 1 - np.mean(y_train))
    majority_label = float(np.mean(y_train) >= 0.5)
    # Two constant predictors: the training set's majority class (what a model that learned nothing from
    # the text predicts), scored on the test set; and the test set's own majority class (an upper bound).
    train_majority_on_test = float(np.mean(y_test == majority_label))
    test_majority = float(max(np.mean(y_test), 1 - np.mean(y_test)))

    new_scores = model.predict(tf.constant(FLAGS.new_sentences), verbose=0)[:, 0]
    predictions = [
        {"text": t, "score": float(s), "label": names[1] if s >= 0.5 else names[0]}
        for t, s in zip(FLAGS.new_sentences, new_scores)
    ]
    with file_io.atomic_path(os.path.join(FLAGS.output_dir, "saved_model"), directory=True) as tmp_dir:
        model.save(tmp_dir, include_optimizer=False)
    if FLAGS.task_model_dir:
        write_task_model_dir(model, FLAGS.export_dir, FLAGS.task_model_dir, sorted(set(train_labels)), test_texts)

    results = {
        "test_accuracy": float(test_accuracy),
        "test_loss": float(test_loss),
        "label_names": names,
        "train_majority_class": names[int(majority_label)],
        "train_majority_class_test_accuracy": train_majority_on_test,
        "test_majority_class_accuracy": test_majority,
        "train_majority_fraction": float(majority),
        "train_examples": len(train_texts),
        "test_examples": len(test_texts),
        "train_seconds": train_seconds,
        "bucket_width": FLAGS.bucket_width,
        "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
        "predictions": predictions,
    }
    file_io.write_json(os.path.join(FLAGS.output_dir, "results.json"), results)
    logging.info(
        "test accuracy %.4f (the training majority class %r scored on test: %.4f; the test majority class: %.4f)",
        test_accuracy,
        names[int(majority_label)],
        train_majority_on_test,
        test_majority,
    )
    for p in predictions:
        print(f"{p['score']:.3f}  {p['label']:5s}  {p['text']}")


def run():
    cli.run(main, define_flags)


if __name__ == "__main__":
    run()
