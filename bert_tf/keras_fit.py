"""Fine-tuning a `BertClassifier` with Keras `fit`, on any Keras backend (JAX included), without TensorFlow.

The TensorFlow jobs (`experiments.finetune`, `experiments.classify_with_hub`)
need tf.data and tf.distribute; this path needs only keras, numpy, safetensors
and the plain-Python tokenizer, so it runs where TensorFlow is absent (a GPU
machine with JAX). It reads a model directory (`weights.safetensors`), tokenizes
with `PythonBertTokenizer`, trains with `model.fit` and writes the fine-tuned
classifier to a model directory (`write_model_dir`: config, vocab, weights
file, and a TF2 checkpoint when TensorFlow is the backend) that `load_encoder`,
`load_task_model` and `experiments.export` read on TensorFlow.

The recipe of the README's real-weights row by default: sequence length 128,
one epoch, batch 32, Adam (Keras' defaults, no weight decay) at a peak learning
rate of 1e-4 with 10% linear warm-up then linear decay to 0, dropout 0.1 (the
model's hidden dropout and before the classifier). The head differs from
`experiments.classify_with_hub`'s one sigmoid unit: two logits with softmax
cross-entropy (`BertClassifier`), the same model family.

    from bert_tf.keras_fit import fit_classifier, read_labeled_tsv

    *train, label_list = read_labeled_tsv("data/fine_foods_train.tsv")
    test = read_labeled_tsv("data/fine_foods_test.tsv", label_list=label_list)[:2]
    results = fit_classifier("models/minilm", train, test, output_dir="runs/jax_fit/model", num_labels=len(label_list))

`experiments.keras_fit` is its command line.
"""

from __future__ import annotations

import os
import time

import numpy as np

from bert_tf.data import finetuning_readers
from bert_tf.errors import DataError


def read_labeled_tsv(path: str, limit: int = 0, label_list=None) -> tuple[list, np.ndarray, list]:
    """(texts, label ids, label names) of a TSV with the columns `text` and `label` (the bundled reviews' format).

    Read and labelled as `experiments.finetune` reads such files (`bert_tf.data.finetuning_readers`): without
    `label_list`, the file's labels in sorted order; with it (the training file's), a label outside it counts
    as an error (id -1, never predicted), and a warning says how many there were.
    """
    examples = finetuning_readers.read_text_examples(path, "text", None, "label", file_format="tsv")
    examples = examples[:limit] if limit else examples
    if not examples:
        raise DataError(f"{path}: no examples.")
    if label_list is None:
        label_list = finetuning_readers.label_list_from_examples(examples)
    ids = {label: i for i, label in enumerate(label_list)}
    finetuning_readers.warn_unseen_labels(
        finetuning_readers.count_unseen_labels((e.label for e in examples), ids), "examples"
    )
    return (
        [e.text_a for e in examples],
        np.asarray([ids.get(e.label, -1) for e in examples], np.int32),
        list(label_list),
    )


def warmup_linear_decay(peak: float, num_steps: int, warmup_steps: int):
    """BERT's schedule (`bert_tf.training.schedule`) as a Keras 3 schedule: keras.ops, any backend."""
    import keras

    from bert_tf.training.schedule import linear_schedule

    return linear_schedule(
        keras.optimizers.schedules.LearningRateSchedule,
        keras.ops,
        learning_rate=peak,
        num_train_steps=num_steps,
        num_warmup_steps=warmup_steps,
    )


def fit_classifier(
    model_dir: str,
    train: tuple,
    test: tuple | None = None,
    *,
    output_dir: str | None = None,
    num_labels: int = 2,
    max_seq_length: int = 128,
    num_train_epochs: int = 1,
    train_batch_size: int = 32,
    learning_rate: float = 1e-4,
    warmup_proportion: float = 0.1,
    do_lower_case: bool = True,
    seed: int = 1,
    dtype=None,
    verbose: int = 2,
) -> dict:
    """Fine-tunes `BertClassifier(load_encoder(model_dir))` with `fit`; returns accuracy, loss, seconds.

    Args:
      model_dir: a model directory (`weights.safetensors` on backends other than TensorFlow).
      train, test: (texts, int labels); `test` is evaluated after training.
      output_dir: where to write the fine-tuned classifier's model directory (must not exist or be empty).
      num_labels: the classifier's outputs (the training labels' ids are 0..num_labels-1).
      dtype: the Keras dtype policy of the model (e.g. "mixed_bfloat16"), default float32.
    """
    import keras

    from bert_tf.checkpoints import model_dir as model_dir_lib
    from bert_tf.models import BertClassifier
    from bert_tf.tokenization.python_tokenizer import PythonBertTokenizer

    keras.utils.set_random_seed(seed)
    vocab_file = os.path.join(model_dir, model_dir_lib.VOCAB_NAME)
    tokenizer = PythonBertTokenizer(vocab_file, lower_case=do_lower_case)
    start = time.time()
    x_train = tokenizer.encode(train[0], max_seq_length)
    x_test = tokenizer.encode(test[0], max_seq_length) if test is not None else None
    tokenize_seconds = time.time() - start

    classifier = BertClassifier(model_dir_lib.load_encoder(model_dir, dtype=dtype), num_classes=num_labels)
    num_steps = num_train_epochs * -(-len(train[0]) // train_batch_size)
    schedule = warmup_linear_decay(learning_rate, num_steps, int(warmup_proportion * num_steps))
    classifier.compile(
        optimizer=keras.optimizers.Adam(schedule),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    start = time.time()
    history = classifier.fit(
        x_train,
        np.asarray(train[1]),
        batch_size=train_batch_size,
        epochs=num_train_epochs,
        shuffle=True,
        verbose=verbose,
    )
    train_seconds = time.time() - start
    results = {
        "backend": keras.backend.backend(),
        "train_examples": len(train[0]),
        "train_steps": num_steps,
        "train_seconds": train_seconds,
        "tokenize_seconds": tokenize_seconds,
        "train_loss": [float(v) for v in history.history["loss"]],
    }
    if test is not None:
        logits = classifier.predict(x_test, batch_size=max(train_batch_size, 64), verbose=0)
        results["test_examples"] = len(test[0])
        results["test_accuracy"] = float(np.mean(np.argmax(logits, -1) == np.asarray(test[1])))
        results["test_logits_head"] = np.asarray(logits[:8], np.float64).tolist()
    if output_dir:
        model_dir_lib.write_model_dir(output_dir, classifier, vocab_file=vocab_file)
    results["model"] = classifier
    return results
