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

Batches: packed rows by default (`packing`; `bert_tf.data.packed_rows`' numpy
form, no TensorFlow): rows of `max_seq_length` tokens filled with whole examples
drawn in random order (from `seed` and the epoch), each computed as if alone
(`BertClassifier(examples_per_row=)`), `train_batch_size` examples a batch on
average and the loss the mean over the batch's examples: the same results as one
example a row, without the padding. `packing=False`: Keras' shuffled batches of
one example a row, padded to `max_seq_length`.

    from bert_tf.data.finetuning_readers import read_labeled_texts
    from bert_tf.jobs.keras_fit import fit_classifier, label_ids

    texts, labels = read_labeled_texts("data/fine_foods_train.tsv")
    ids, label_list = label_ids(labels)
    test_texts, test_labels = read_labeled_texts("data/fine_foods_test.tsv")
    test = (test_texts, label_ids(test_labels, label_list)[0])
    results = fit_classifier("models/minilm", (texts, ids), test, output_dir="runs/jax_fit/model",
                             num_labels=len(label_list))

`experiments.keras_fit` is its command line.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from bert_tf.data import finetuning_readers, packed_rows
from bert_tf.errors import JobArgumentError, check_int
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.training.config import PRECISION_POLICIES


def label_ids(labels, label_list=None) -> tuple[np.ndarray, list]:
    """(int32 ids of `labels`, the label list), labelled as `experiments.finetune` labels such files.

    Without `label_list`, the labels' sorted list (`finetuning_readers.label_list_from_examples`' order); with
    it (the training file's), a label outside it counts as an error (id -1, never predicted), and a warning
    says how many there were.
    """
    if label_list is None:
        label_list = finetuning_readers.sorted_labels(labels)
    ids = {label: i for i, label in enumerate(label_list)}
    finetuning_readers.warn_unseen_labels(finetuning_readers.count_unseen_labels(labels, ids), "examples")
    return np.asarray([ids.get(label, -1) for label in labels], np.int32), list(label_list)


def _packed_batches_class():
    import keras

    class PackedBatches(keras.utils.PyDataset):
        """Training batches of packed rows, ((inputs, `input_example_ids`), labels [rows, slots], weights).

        Each epoch packs a permutation drawn from (`seed`, epoch) by `packed_rows`' first-fit rule; an epoch
        has as many batches as one example a row would, each of the rows that hold `batch_size` examples on
        average (rows beyond sit the epoch out; a short epoch ends in empty rows, of weight 0).
        """

        def __init__(self, inputs, labels, batch_size, max_seq_length, seed):
            super().__init__()
            self.inputs, self.labels, self.seed, self.epoch = inputs, np.asarray(labels), int(seed), 0
            self.max_seq_length = max_seq_length
            self.lengths = inputs["input_mask"].sum(axis=1)
            self.slots = packed_rows.max_examples_per_row(max_seq_length)
            in_order = packed_rows.slot_table_numpy(np.arange(len(labels)), self.lengths, max_seq_length, self.slots)
            self.rows = max(1, int(round(batch_size * len(in_order) / len(labels))))
            self.batches_per_epoch = -(-len(labels) // batch_size)
            self._pack()

        def _pack(self):
            order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.labels))
            table = packed_rows.slot_table_numpy(order, self.lengths, self.max_seq_length, self.slots)
            needed = self.batches_per_epoch * self.rows
            self.table = np.concatenate([table, np.full((max(0, needed - len(table)), self.slots), -1)])[:needed]

        def __len__(self):
            return self.batches_per_epoch

        def __getitem__(self, index):
            rows = self.table[index * self.rows : (index + 1) * self.rows]
            batch = packed_rows.pack_numpy(rows, self.inputs, {"label": self.labels})
            weights = (batch.pop(packed_rows.FEATURE_INDEX_KEY) >= 0).astype(np.float32)
            return batch, batch.pop("label"), weights

        def on_epoch_end(self):
            self.epoch += 1
            self._pack()

    return PackedBatches


def packed_logits(packed_classifier, inputs: dict, batch_size: int, max_seq_length: int) -> np.ndarray:
    """float32 [examples, classes]: a packed `BertClassifier`'s logits of each example of `inputs`, packed in order."""
    slots = packed_rows.max_examples_per_row(max_seq_length)
    table = packed_rows.slot_table_numpy(np.arange(len(inputs["input_mask"])), inputs["input_mask"].sum(axis=1),
                                         max_seq_length, slots)  # fmt: skip
    batch = packed_rows.pack_numpy(table, inputs)
    index = batch.pop(packed_rows.FEATURE_INDEX_KEY)
    rows = max(1, round(batch_size * len(table) / len(index[index >= 0])))  # `batch_size` examples a batch
    logits = np.asarray(packed_classifier.predict(batch, batch_size=rows, verbose=0), np.float32)
    result = np.zeros((len(inputs["input_mask"]), logits.shape[-1]), np.float32)
    result[index[index >= 0]] = logits[index >= 0]
    return result


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
    packing: bool = True,
    seed: int = DEFAULT_SEED,
    dtype=None,
    verbose: int = 2,
) -> dict:
    """Fine-tunes `BertClassifier(load_encoder(model_dir))` with `fit`; returns accuracy, loss, seconds, and as
    `"model"` the fine-tuned classifier of one example a row (the packed one's weights).

    Args:
      model_dir: a model directory (`weights.safetensors` on backends other than TensorFlow).
      train, test: (texts, int labels); `test` is evaluated after training.
      output_dir: where to write the fine-tuned classifier's model directory (must not exist or be empty).
      num_labels: the classifier's outputs (the training labels' ids are 0..num_labels-1).
      packing: packed rows (see the module docstring); False: one example a row.
      dtype: the Keras dtype policy of the model (e.g. "mixed_bfloat16"), default float32.
    """
    import keras

    from bert_tf.checkpoints import model_dir as model_dir_lib

    keras.utils.set_random_seed(seed)
    vocab_file = os.path.join(model_dir, model_dir_lib.VOCAB_NAME)
    x_train, x_test, tokenize_seconds = _tokenize(vocab_file, do_lower_case, max_seq_length, train, test)
    encoder = model_dir_lib.load_encoder(model_dir, dtype=dtype)
    trained = _classifier(encoder, num_labels, packed_rows.max_examples_per_row(max_seq_length) if packing else None)
    num_steps = num_train_epochs * -(-len(train[0]) // train_batch_size)
    _compile(trained, learning_rate, num_steps, warmup_proportion, packing)
    fit_data = _fit_data(x_train, train[1], train_batch_size, max_seq_length, packing, seed)
    start = time.time()
    history = trained.fit(**fit_data, epochs=num_train_epochs, verbose=verbose)
    results = {
        "backend": keras.backend.backend(),
        "packing": packing,
        "train_examples": len(train[0]),
        "train_steps": num_steps,
        "train_seconds": time.time() - start,
        "tokenize_seconds": tokenize_seconds,
        "train_loss": [float(v) for v in history.history["loss"]],
    }
    classifier = _one_example_a_row(trained, encoder, num_labels) if packing else trained
    if test is not None:
        results.update(_test_results(trained, x_test, test[1], max(train_batch_size, 64), max_seq_length, packing))
    if output_dir:
        model_dir_lib.write_model_dir(output_dir, classifier, vocab_file=vocab_file)
    results["model"] = classifier
    return results


def _tokenize(vocab_file: str, do_lower_case: bool, max_seq_length: int, train: tuple, test: tuple | None):
    """(the training texts' inputs, the held-out texts' or None, the seconds the encoding took)."""
    from bert_tf.tokenization.python_tokenizer import PythonBertTokenizer

    tokenizer = PythonBertTokenizer(vocab_file, lower_case=do_lower_case)
    start = time.time()
    x_train = tokenizer.encode(train[0], max_seq_length)
    x_test = tokenizer.encode(test[0], max_seq_length) if test is not None else None
    return x_train, x_test, time.time() - start


def _fit_data(x_train, labels, batch_size: int, max_seq_length: int, packing: bool, seed: int) -> dict:
    """`fit`'s data arguments: `PackedBatches` of packed rows, or Keras' shuffled batches of one example a row."""
    if packing:
        return dict(x=_packed_batches_class()(x_train, labels, batch_size, max_seq_length, seed))
    return dict(x=x_train, y=np.asarray(labels), batch_size=batch_size, shuffle=True)


def _compile(trained, learning_rate: float, num_steps: int, warmup_proportion: float, packing: bool) -> None:
    """Adam with BERT's warm-up and linear decay; packed: the loss and accuracy over the filled slots."""
    import keras

    from bert_tf.training.schedule import warmup_linear_decay

    schedule = warmup_linear_decay(
        keras.optimizers.schedules.LearningRateSchedule,
        keras.ops,
        learning_rate=learning_rate,
        num_train_steps=num_steps,
        warmup_proportion=warmup_proportion,
    )
    if packing:
        # The mean over the filled slots (weight 1; empty slots 0): the batch's examples, as unpacked.
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")
        trained.compile(optimizer=keras.optimizers.Adam(schedule), loss=loss, weighted_metrics=["accuracy"])
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        trained.compile(optimizer=keras.optimizers.Adam(schedule), loss=loss, metrics=["accuracy"])


def _classifier(encoder, num_labels: int, examples_per_row: int | None):
    """The `BertClassifier` that `fit` trains: of packed rows of `examples_per_row` examples, or None: one a row."""
    from bert_tf.models import BertClassifier

    return BertClassifier(encoder, num_classes=num_labels, examples_per_row=examples_per_row)


def _one_example_a_row(packed_classifier, encoder, num_labels: int):
    """The classifier of one example a row with the packed one's weights (the encoder is shared)."""
    from bert_tf.models import BertClassifier

    classifier = BertClassifier(encoder, num_classes=num_labels, dropout_rate=packed_classifier.dropout_rate)
    classifier.classifier.set_weights(packed_classifier.classifier.get_weights())
    return classifier


def _test_results(classifier, x_test, labels, batch_size: int, max_seq_length: int, packing: bool) -> dict:
    """The held-out figures: examples, accuracy, and the first 8 examples' logits."""
    if packing:
        logits = packed_logits(classifier, x_test, batch_size, max_seq_length)
    else:
        logits = classifier.predict(x_test, batch_size=batch_size, verbose=0)
    return {
        "test_examples": len(labels),
        "test_accuracy": float(np.mean(np.argmax(logits, -1) == np.asarray(labels))),
        "test_logits_head": np.asarray(logits[:8], np.float64).tolist(),
    }


@dataclasses.dataclass(frozen=True)
class KerasFitConfig:
    """`run_keras_fit`'s settings, named after `experiments.keras_fit`'s flags; `fit_classifier` documents them.

    `train_file` and `eval_file` (optional) are TSVs with the columns `text` and `label`; `max_train_examples`
    keeps the first that many (0: all); `mixed_precision` is one of `PRECISION_POLICIES`.
    """

    model_dir: str
    train_file: str
    eval_file: str | None = None
    max_seq_length: int = 128
    num_train_epochs: int = 1
    train_batch_size: int = 32
    learning_rate: float = 1e-4
    warmup_proportion: float = 0.1
    max_train_examples: int = 0
    do_lower_case: bool = True
    packing: bool = True
    seed: int = DEFAULT_SEED
    mixed_precision: str = "float32"

    def __post_init__(self):
        check_int("max_seq_length", self.max_seq_length, minimum=3)  # [CLS], one piece, [SEP]
        check_int("num_train_epochs", self.num_train_epochs)
        check_int("train_batch_size", self.train_batch_size)
        check_int("max_train_examples", self.max_train_examples, minimum=0)
        if not 0.0 <= self.warmup_proportion <= 1.0:
            raise JobArgumentError(f"--warmup_proportion must be in [0, 1], got {self.warmup_proportion}.")
        if self.mixed_precision not in PRECISION_POLICIES:
            raise JobArgumentError(
                f"--mixed_precision must be one of {PRECISION_POLICIES}, got {self.mixed_precision!r}."
            )


def run_keras_fit(output_dir: str, config: KerasFitConfig) -> dict:
    """`fit_classifier` on `config`'s files (`experiments.keras_fit`'s job).

    Writes `output_dir`/model (refused before training if it exists and is not empty) and
    `output_dir`/results.json; returns the results. Bad input raises `bert_tf.errors` types naming the file or flag.
    """
    from bert_tf import errors, file_io

    errors.check_utf8(config.train_file, "train_file")
    errors.check_utf8(config.eval_file, "eval_file")
    model_output = os.path.join(output_dir, "model")
    if os.path.isdir(model_output) and os.listdir(model_output):
        raise errors.BadInputError(f"--output_dir: {model_output} exists and is not empty.")
    texts, labels = finetuning_readers.read_labeled_texts(config.train_file, limit=config.max_train_examples)
    ids, label_list = label_ids(labels)
    test = None
    if config.eval_file:
        test_texts, test_labels = finetuning_readers.read_labeled_texts(config.eval_file)
        test = (test_texts, label_ids(test_labels, label_list)[0])
    results = fit_classifier(
        config.model_dir,
        (texts, ids),
        test,
        output_dir=model_output,
        num_labels=len(label_list),
        max_seq_length=config.max_seq_length,
        num_train_epochs=config.num_train_epochs,
        train_batch_size=config.train_batch_size,
        learning_rate=config.learning_rate,
        warmup_proportion=config.warmup_proportion,
        do_lower_case=config.do_lower_case,
        packing=config.packing,
        seed=config.seed,
        dtype=None if config.mixed_precision == "float32" else config.mixed_precision,
    )
    results.pop("model")
    file_io.write_json(os.path.join(output_dir, "results.json"), results)
    return results
