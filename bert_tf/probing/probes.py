"""The probes: one fixed recipe for every row of the report.

**Linear probe** (Liu et al., 2019): features standardised with the training part's mean and standard
deviation, then scikit-learn's multinomial `LogisticRegression` (L2, lbfgs). Its inverse strength `C` is
chosen from `STRENGTHS` by accuracy on a development split carved from the training file (a seeded 10% of
its sentences or lines); the model fitted on the rest with that `C` is scored on the test file. The fits go
from the strongest regularisation to the weakest, each starting from the last one's weights.

**Scalar mix** (Tenney et al., 2019): every layer standardised as above (inside the model), mixed by
`bert_tf.layers.ScalarMix` (softmax weights and a scale), then one dense softmax layer, trained together
with Adam on the training part in batches of `MIX_BATCH_SIZE` (fewer rows where that would give fewer than
`MIX_MIN_STEPS_PER_EPOCH` steps an epoch); the epoch with the best development accuracy is kept (of
`MIX_EPOCHS`). Its weights and their centre of gravity (the expected layer) are reported.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import warnings

import numpy as np

STRENGTHS = (0.01, 0.1, 1.0)
MAX_ITERATIONS = 100
TOLERANCE = 1e-3
MIX_EPOCHS = 8
MIX_BATCH_SIZE = 256
MIX_MIN_STEPS_PER_EPOCH = 50  # small data gets smaller batches, so the mixing weights still get to move
MIX_LEARNING_RATE = 1e-2


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    test_accuracy: float
    dev_accuracy: float
    strength: float | None = None  # the chosen C of a linear probe
    mix_weights: tuple | None = None  # the scalar mix's softmax weights, layer 0 first
    mix_scale: float | None = None

    @property
    def expected_layer(self) -> float | None:
        if self.mix_weights is None:
            return None
        return float(np.dot(np.arange(len(self.mix_weights)), self.mix_weights))


@dataclasses.dataclass(frozen=True)
class Split:
    """Features and integer labels of a training file (`fit` rows to train on, `dev` rows to choose by) and a
    test file. Rows are taken by index when a probe needs them, so no split copies the features."""

    train_x: np.ndarray
    train_y: np.ndarray
    fit: np.ndarray
    dev: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray

    @property
    def fit_y(self) -> np.ndarray:
        return self.train_y[self.fit]

    @property
    def dev_y(self) -> np.ndarray:
        return self.train_y[self.dev]


_CHUNK = 4096  # rows at a time, so that no step makes a full-size temporary copy


def _gather(x, rows) -> np.ndarray:
    """float32 `x[rows]` (all rows where `rows` is None), filled a chunk at a time."""
    rows = np.arange(len(x)) if rows is None else rows
    out = np.empty((len(rows),) + x.shape[1:], np.float32)
    for start in range(0, len(rows), _CHUNK):
        out[start : start + _CHUNK] = x[rows[start : start + _CHUNK]]
    return out


def _moments(x) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and standard deviation of [rows, ...] `x` (a zero deviation becomes 1), in float64."""
    total = np.zeros(x.shape[1:], np.float64)
    squares = np.zeros(x.shape[1:], np.float64)
    for start in range(0, len(x), _CHUNK):
        chunk = x[start : start + _CHUNK].astype(np.float64)
        total += chunk.sum(axis=0)
        squares += np.square(chunk).sum(axis=0)
    mean = total / len(x)
    scale = np.sqrt(np.maximum(squares / len(x) - np.square(mean), 0.0))
    scale[scale == 0] = 1.0
    return mean, scale


def _standardised(sources) -> list[np.ndarray]:
    """float32 copies of `x[rows]` for each (x, rows) of `sources`, centred and scaled by the first one's
    per-feature mean and standard deviation."""
    arrays = [_gather(x, rows) for x, rows in sources]
    mean, scale = (m.astype(np.float32) for m in _moments(arrays[0]))
    for x in arrays:
        for start in range(0, len(x), _CHUNK):
            x[start : start + _CHUNK] -= mean
            x[start : start + _CHUNK] /= scale
    return arrays


def linear_probe(split: Split, strengths=STRENGTHS, seed: int = 0) -> ProbeResult:
    """The linear probe of the module docstring on [items, features] inputs."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    train_x, dev_x, test_x = _standardised(
        [(split.train_x, split.fit), (split.train_x, split.dev), (split.test_x, None)]
    )
    model = LogisticRegression(max_iter=MAX_ITERATIONS, tol=TOLERANCE, warm_start=True, random_state=seed)
    best = None
    for strength in sorted(strengths):
        model.set_params(C=strength)
        with warnings.catch_warnings():
            # A capped lbfgs run is part of the fixed recipe, not a failure.
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(train_x, split.fit_y)
        dev_accuracy = _accuracy(model.predict(dev_x), split.dev_y)
        if best is None or dev_accuracy > best.dev_accuracy:
            best = ProbeResult(_accuracy(model.predict(test_x), split.test_y), dev_accuracy, strength)
    return best


def scalar_mix_probe(split: Split, num_labels: int, seed: int = 0) -> ProbeResult:
    """The scalar-mix probe of the module docstring on [items, layers, features] inputs."""
    import keras

    from bert_tf.layers import ScalarMix

    num_layers, width = split.train_x.shape[1:]
    # Standardised inside the model (a fixed Normalization layer with the training rows' statistics), so the
    # features are read in batches as they are, never copied whole.
    mean = np.empty((num_layers, width), np.float32)
    variance = np.empty((num_layers, width), np.float32)
    for layer in range(num_layers):
        layer_mean, layer_scale = _moments(_gather(split.train_x[:, layer], split.fit))
        mean[layer], variance[layer] = layer_mean, np.square(layer_scale)
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((num_layers, width), dtype="float16")
    standardised = keras.layers.Normalization(axis=(1, 2), mean=mean, variance=variance)(inputs)
    mix = ScalarMix(num_layers, name="scalar_mix")
    logits = keras.layers.Dense(num_labels, name="logits")(mix(standardised))
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(MIX_LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    batch_size = max(1, min(MIX_BATCH_SIZE, len(split.fit) // MIX_MIN_STEPS_PER_EPOCH))
    rng = np.random.default_rng(seed)
    fit_y = split.fit_y
    best, best_weights = None, None
    for _ in range(MIX_EPOCHS):
        # Batch by batch from the arrays: `fit` on them would copy them into an input pipeline that outlives it.
        order = rng.permutation(len(split.fit))
        for start in range(0, len(order), batch_size):
            rows = np.sort(order[start : start + batch_size])
            model.train_on_batch(split.train_x[split.fit[rows]], fit_y[rows])
        dev_accuracy = _accuracy(_predict(model, split.train_x, split.dev), split.dev_y)
        if best is None or dev_accuracy > best:
            best, best_weights = dev_accuracy, model.get_weights()
    model.set_weights(best_weights)
    result = ProbeResult(
        test_accuracy=_accuracy(_predict(model, split.test_x, np.arange(len(split.test_x))), split.test_y),
        dev_accuracy=best,
        mix_weights=tuple(float(w) for w in np.asarray(mix.mixing_weights())),
        mix_scale=float(np.asarray(mix.gamma)),
    )
    del model
    release_memory()
    return result


def release_memory() -> None:
    """Frees what the last probe left: objects in reference cycles (a Keras model and the arrays it holds), and
    the C heap's free pages (glibc keeps freed memory below its mmap threshold mapped; TensorFlow's tensors land
    there), so that the next probe's arrays do not come on top of them."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _predict(model, x, rows, batch_size=4096):
    """Predicted classes of `x[rows]`, gathered and run a batch at a time."""
    return np.concatenate(
        [
            np.asarray(model.predict_on_batch(x[rows[start : start + batch_size]])).argmax(axis=-1)
            for start in range(0, len(rows), batch_size)
        ]
    )


def _accuracy(predictions, labels) -> float:
    return float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def majority_baseline(train_labels, test_labels) -> float:
    """Accuracy of always answering the training data's most frequent label."""
    values, counts = np.unique(np.asarray(train_labels), return_counts=True)
    return _accuracy(np.full(len(test_labels), values[counts.argmax()]), test_labels)


def word_baseline(train_words, train_tags, test_words, test_tags) -> float:
    """Each word's most frequent training tag; a word unseen in training gets the most frequent tag overall.

    Words are matched as written (case included). Ties go to the tag seen first.
    """
    from collections import Counter, defaultdict

    by_word = defaultdict(Counter)
    for word, tag in zip(train_words, train_tags):
        by_word[word][tag] += 1
    overall = Counter(train_tags).most_common(1)[0][0]
    predictions = [by_word[word].most_common(1)[0][0] if word in by_word else overall for word in test_words]
    return _accuracy(np.array(predictions, dtype=object), np.array(list(test_tags), dtype=object))
