"""`run_classify_with_hub`: read -> build -> batches -> fit -> score the held-out set -> save."""

from __future__ import annotations

import os
import time

from absl import logging

from bert_tf import errors, file_io
from bert_tf.data.finetuning_readers import read_labeled_texts
from bert_tf.jobs.classify_with_hub import datasets
from bert_tf.jobs.classify_with_hub import model as model_lib
from bert_tf.jobs.classify_with_hub.config import HubClassifierConfig
from bert_tf.jobs.classify_with_hub.labels import binary_labels


def run_classify_with_hub(
    output_dir: str, config: HubClassifierConfig, new_sentences=(), task_model_dir: str | None = None
) -> dict:
    """Fine-tunes the hub classifier; writes `output_dir`/saved_model (raw strings in) and results.json.

    Returns the results: held-out accuracy and loss beside two baselines (the training set's majority class
    scored on the held-out set, and the held-out set's own majority class), the history, and the scores of
    `new_sentences`. `task_model_dir`: also write the classifier there as a fine-tuned model directory.
    """
    import tensorflow as tf

    for path, flag in ((config.train_file, "train_file"), (config.eval_file, "eval_file")):
        errors.check_utf8(path, flag)
    if task_model_dir and os.path.exists(task_model_dir) and os.listdir(task_model_dir):
        raise errors.BadInputError(f"--task_model_dir={task_model_dir} exists and is not empty.")
    tf.keras.utils.set_random_seed(config.seed)
    columns = (config.text_a_column, config.label_column)
    train_texts, train_labels = read_labeled_texts(config.train_file, *columns, limit=config.max_train_examples)
    test_texts, test_labels = read_labeled_texts(config.eval_file, *columns, limit=config.max_eval_examples)
    names, y_train, y_test = binary_labels(train_labels, test_labels, config.label_names, config.eval_file)

    classifier = model_lib.build_classifier(
        config.preprocess_dir, config.encoder_dir, bucket_width=config.bucket_width, seq_length=config.max_seq_length
    )
    batches = _batches(config, classifier, train_texts, y_train, test_texts, y_test)
    trained, fit_data, steps_per_epoch, score_test = batches
    _compile(trained, config, config.num_train_epochs * steps_per_epoch)
    history, train_seconds = _fit(trained, fit_data, config.num_train_epochs, output_dir)
    test_loss, test_accuracy = score_test(history)
    predictions = _predict(classifier, new_sentences, names)
    with file_io.atomic_path(os.path.join(output_dir, "saved_model"), directory=True) as tmp_dir:
        classifier.save(tmp_dir, include_optimizer=False)
    if task_model_dir:
        from bert_tf.jobs.classify_with_hub.task_model_dir import write_task_model_dir

        write_task_model_dir(
            classifier, config.export_dir, task_model_dir, sorted(set(train_labels)), test_texts, *columns
        )
    results = {
        "test_accuracy": float(test_accuracy),
        "test_loss": float(test_loss),
        "label_names": names,
        **_baselines(names, y_train, y_test),
        "train_examples": len(train_texts),
        "test_examples": len(test_texts),
        "train_seconds": train_seconds,
        "packing": config.packing,
        "bucket_width": config.bucket_width,
        "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
        "predictions": predictions,
    }
    file_io.write_json(os.path.join(output_dir, "results.json"), results)
    _log_results(results)
    return results


def _fit(trained, fit_data: dict, num_train_epochs: int, output_dir: str):
    """(Keras' history, the seconds `fit` took); TensorBoard's logs in `output_dir`/summaries."""
    import tensorflow as tf

    os.makedirs(output_dir, exist_ok=True)
    start = time.time()
    history = trained.fit(
        **fit_data,
        epochs=num_train_epochs,
        verbose=2,
        callbacks=[tf.keras.callbacks.TensorBoard(os.path.join(output_dir, "summaries"))],
    )
    return history, time.time() - start


def _predict(classifier, new_sentences, names) -> list:
    """[{"text", "score" (the positive class's probability), "label"}] of each of `new_sentences`."""
    import tensorflow as tf

    new_scores = classifier.predict(tf.constant(list(new_sentences)), verbose=0)[:, 0] if new_sentences else []
    return [
        {"text": t, "score": float(s), "label": names[1] if s >= 0.5 else names[0]}
        for t, s in zip(new_sentences, new_scores)
    ]


def _log_results(results: dict) -> None:
    logging.info(
        "test accuracy %.4f (the training majority class %r scored on test: %.4f; the test majority class: %.4f)",
        results["test_accuracy"],
        results["train_majority_class"],
        results["train_majority_class_test_accuracy"],
        results["test_majority_class_accuracy"],
    )


def _compile(trained, config, num_train_steps):
    """Adam at `config.learning_rate`, constant or BERT's warm-up and decay; the binary cross-entropy and
    accuracy, over the filled slots when packed."""
    import tensorflow as tf

    learning_rate = config.learning_rate
    if config.warmup_proportion > 0:
        from bert_tf.training.schedule import warmup_linear_decay

        learning_rate = warmup_linear_decay(
            tf.keras.optimizers.schedules.LearningRateSchedule,
            tf,
            learning_rate=config.learning_rate,
            num_train_steps=num_train_steps,
            warmup_proportion=config.warmup_proportion,
        )
    loss, accuracy = (
        (model_lib.masked_binary_crossentropy, model_lib.masked_binary_accuracy())
        if config.packing
        else ("binary_crossentropy", "accuracy")
    )
    trained.compile(optimizer=tf.keras.optimizers.Adam(learning_rate), loss=loss, metrics=[accuracy])


def _batches(config, classifier, train_texts, y_train, test_texts, y_test):
    """(the model `fit` trains, fit's data arguments, steps per epoch, history -> (test loss, test accuracy)).

    Packed: the packed form of `classifier` (same layers) on packed rows, the held-out set scored example by
    example after training (exact means; fit's `val_loss` averages batch means). Unpacked: `classifier` itself
    on length buckets or, with `bucket_width` 0, the notebook's batches; the scores are fit's last validation.
    """
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub

    def last_validation(history):
        return history.history["val_loss"][-1], history.history["val_accuracy"][-1]

    if config.packing:
        preprocessor = hub.load(config.preprocess_dir)
        seq_length = config.max_seq_length or model_lib.default_seq_length(preprocessor)
        train_inputs = datasets.encode_texts(preprocessor, train_texts, seq_length)
        test_inputs = datasets.encode_texts(preprocessor, test_texts, seq_length)
        try:
            packed = model_lib.packed_classifier(classifier)
        except (ValueError, TypeError) as e:  # no traced call with `input_example_ids` to match
            raise errors.BadInputError(
                f"--export_dir={config.export_dir}: the encoder takes no packed rows (exported before its "
                f"`input_example_ids` input; export it again, or pass --nopacking): {str(e).splitlines()[0]}"
            ) from None
        train, steps_per_epoch, test = datasets.packed_datasets(
            train_inputs, y_train, test_inputs, y_test, config.train_batch_size, seq_length, config.seed
        )

        def score_test(history):
            del history
            scores = datasets.packed_scores(packed, test_inputs, config.train_batch_size, seq_length)
            loss = tf.keras.losses.binary_crossentropy(y_test[:, None], scores[:, None])
            return float(np.mean(loss)), float(np.mean((scores > 0.5) == (y_test > 0.5)))

        fit_data = dict(x=train, steps_per_epoch=steps_per_epoch, validation_data=test)
        return packed, fit_data, steps_per_epoch, score_test
    if config.bucket_width:
        train, steps_per_epoch, test = datasets.bucketed_datasets(
            classifier.get_layer("preprocessing"),
            train_texts,
            y_train,
            test_texts,
            y_test,
            config.train_batch_size,
            config.seed,
            group_by_length=config.group_by_length,
        )
        fit_data = dict(x=train, steps_per_epoch=steps_per_epoch, validation_data=test)
        return classifier, fit_data, steps_per_epoch, last_validation
    fit_data = dict(
        x=tf.constant(train_texts),
        y=y_train,
        batch_size=config.train_batch_size,
        validation_data=(tf.constant(test_texts), y_test),
    )
    return classifier, fit_data, -(-len(train_texts) // config.train_batch_size), last_validation


def _baselines(names, y_train, y_test) -> dict:
    """Two constant predictors: the training set's majority class (what a model that learned nothing from the
    text predicts), scored on the held-out set; and the held-out set's own majority class (an upper bound)."""
    import numpy as np

    majority_label = float(np.mean(y_train) >= 0.5)
    return {
        "train_majority_class": names[int(majority_label)],
        "train_majority_class_test_accuracy": float(np.mean(y_test == majority_label)),
        "test_majority_class_accuracy": float(max(np.mean(y_test), 1 - np.mean(y_test))),
        "train_majority_fraction": float(max(np.mean(y_train), 1 - np.mean(y_train))),
    }
