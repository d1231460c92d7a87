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

    KERAS_BACKEND=jax python -m bert_tf.keras_fit --model_dir=models/minilm \\
        --train_file=data/fine_foods_train.tsv --test_file=data/fine_foods_test.tsv --output_dir=runs/jax_fit
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from bert_tf import file_io, tensorflow_startup


def read_labeled_tsv(path: str, limit: int = 0) -> tuple[list, np.ndarray]:
    """`text<TAB>label` rows after a `text<TAB>label` header (the bundled reviews' format)."""
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="\n") as f:
        header = f.readline().rstrip("\n")
        if header != "text\tlabel":
            raise ValueError(f"{path}:1: expected the header 'text<TAB>label', found {header!r}.")
        for line_number, line in enumerate(f, start=2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
                raise ValueError(f"{path}:{line_number}: expected 'text<TAB>integer label'.")
            texts.append(fields[0])
            labels.append(int(fields[1]))
            if limit and len(texts) >= limit:
                break
    if not texts:
        raise ValueError(f"{path}: no examples.")
    return texts, np.asarray(labels, np.int32)


def warmup_linear_decay(peak: float, num_steps: int, warmup_steps: int):
    """BERT's schedule as a Keras 3 schedule (keras.ops, any backend): linear warm-up to `peak`, linear decay to 0."""
    import keras
    from keras import ops

    class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = ops.cast(step, "float32")
            warmup = step / max(warmup_steps, 1)
            decay = (num_steps - step) / max(num_steps - warmup_steps, 1)
            return peak * ops.maximum(ops.minimum(warmup, decay), 0.0)

        def get_config(self):
            return {"peak": peak, "num_steps": num_steps, "warmup_steps": warmup_steps}

    return WarmupLinearDecay()


def fit_classifier(
    model_dir: str,
    train: tuple,
    test: tuple | None = None,
    *,
    output_dir: str | None = None,
    num_classes: int = 2,
    seq_length: int = 128,
    epochs: int = 1,
    batch_size: int = 32,
    learning_rate: float = 1e-4,
    warmup_fraction: float = 0.1,
    lower_case: bool = True,
    seed: int = 1,
    dtype=None,
    verbose: int = 2,
) -> dict:
    """Fine-tunes `BertClassifier(load_encoder(model_dir))` with `fit`; returns accuracy, loss, seconds.

    Args:
      model_dir: a model directory (`weights.safetensors` on backends other than TensorFlow).
      train, test: (texts, int labels); `test` is evaluated after training.
      output_dir: where to write the fine-tuned classifier's model directory (must not exist or be empty).
      dtype: the Keras dtype policy of the model (e.g. "mixed_bfloat16"), default float32.
    """
    import keras

    from bert_tf.checkpoints import model_dir as model_dir_lib
    from bert_tf.models import BertClassifier
    from bert_tf.tokenization.python_tokenizer import PythonBertTokenizer

    keras.utils.set_random_seed(seed)
    vocab_file = os.path.join(model_dir, model_dir_lib.VOCAB_NAME)
    tokenizer = PythonBertTokenizer(vocab_file, lower_case=lower_case)
    start = time.time()
    x_train = tokenizer.encode(train[0], seq_length)
    x_test = tokenizer.encode(test[0], seq_length) if test is not None else None
    tokenize_seconds = time.time() - start

    classifier = BertClassifier(model_dir_lib.load_encoder(model_dir, dtype=dtype), num_classes=num_classes)
    num_steps = epochs * -(-len(train[0]) // batch_size)
    schedule = warmup_linear_decay(learning_rate, num_steps, int(warmup_fraction * num_steps))
    classifier.compile(
        optimizer=keras.optimizers.Adam(schedule),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    start = time.time()
    history = classifier.fit(
        x_train, np.asarray(train[1]), batch_size=batch_size, epochs=epochs, shuffle=True, verbose=verbose
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
        logits = classifier.predict(x_test, batch_size=max(batch_size, 64), verbose=0)
        results["test_examples"] = len(test[0])
        results["test_accuracy"] = float(np.mean(np.argmax(logits, -1) == np.asarray(test[1])))
        results["test_logits_head"] = np.asarray(logits[:8], np.float64).tolist()
    if output_dir:
        model_dir_lib.write_model_dir(output_dir, classifier, vocab_file=vocab_file)
    results["model"] = classifier
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bert_tf.keras_fit", description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--test_file")
    parser.add_argument("--output_dir", required=True, help="results.json and model/ (the fine-tuned model directory)")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--warmup_fraction", type=float, default=0.1)
    parser.add_argument("--max_train_examples", type=int, default=0)
    parser.add_argument("--cased", action="store_true", help="the vocabulary is cased: no lower-casing")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dtype", default=None, help="Keras dtype policy, e.g. mixed_bfloat16")
    args = parser.parse_args(argv)
    try:
        train = read_labeled_tsv(args.train_file, args.max_train_examples)
        test = read_labeled_tsv(args.test_file) if args.test_file else None
    except (OSError, ValueError) as e:
        print(f"keras_fit: error: {e}", file=sys.stderr)
        return 2
    results = fit_classifier(
        args.model_dir,
        train,
        test,
        output_dir=os.path.join(args.output_dir, "model"),
        seq_length=args.seq_length,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_fraction=args.warmup_fraction,
        lower_case=not args.cased,
        seed=args.seed,
        dtype=args.dtype,
    )
    results.pop("model")
    file_io.write_json(os.path.join(args.output_dir, "results.json"), results)
    print(json.dumps({k: v for k, v in results.items() if k != "test_logits_head"}))
    return 0


if __name__ == "__main__":
    tensorflow_startup.quiet_first_import()  # run as a program, it owns the process (as bert_tf.cli.run)
    sys.exit(main())
