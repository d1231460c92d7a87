"""The probes: one fixed recipe for every row of the report.

**Linear probe** (Liu et al., 2019): features standardised with the training part's mean and standard
deviation, then scikit-learn's multinomial `LogisticRegression` (L2, lbfgs). Its inverse strength `C` is
chosen from `STRENGTHS` by accuracy on a development split carved from the training file (a seeded 10% of
its sentences or lines); the model fitted on the rest with that `C` is scored on the test file. The fits go
from the strongest regularisation to the weakest, each starting from the last one's weights.

**Scalar mix** (Tenney et al., 2019): every layer standardised as above, mixed by `bert_tf.layers.ScalarMix`
(softmax weights and a scale), then one dense softmax layer, trained together with Adam on the training
part in batches of `MIX_BATCH_SIZE` (fewer rows where that would give fewer than `MIX_MIN_STEPS_PER_EPOCH`
steps an epoch); the epoch with the best development accuracy is kept (of `MIX_EPOCHS`). Its weights and their
centre of gravity (the expected layer) are reported.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

STRENGTHS = (0.01, 0.1, 1.0)
MAX_ITERATIONS = 200
TOLERANCE = 1e-3
MIX_EPOCHS = 12
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
    """Features and integer labels of the training part, the development part and the test file."""

    train_x: np.ndarray
    train_y: np.ndarray
    dev_x: np.ndarray
    dev_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def _standardise(train, *others):
    train = np.asarray(train, np.float32)
    mean = train.mean(axis=0)
    scale = train.std(axis=0)
    scale[scale == 0] = 1.0
    return [(np.asarray(x, np.float32) - mean) / scale for x in (train, *others)]


def linear_probe(split: Split, strengths=STRENGTHS, seed: int = 0) -> ProbeResult:
    """The linear probe of the module docstring on [items, features] inputs."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    train_x, dev_x, test_x = _standardise(split.train_x, split.dev_x, split.test_x)
    model = LogisticRegression(max_iter=MAX_ITERATIONS, tol=TOLERANCE, warm_start=True, random_state=seed)
    best = None
    for strength in sorted(strengths):
        model.set_params(C=strength)
        with warnings.catch_warnings():
            # A capped lbfgs run is part of the fixed recipe, not a failure.
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(train_x, split.train_y)
        dev_accuracy = _accuracy(model.predict(dev_x), split.dev_y)
        if best is None or dev_accuracy > best.dev_accuracy:
            best = ProbeResult(_accuracy(model.predict(test_x), split.test_y), dev_accuracy, strength)
    return best


def scalar_mix_probe(split: Split, num_classes: int, seed: int = 0) -> ProbeResult:
    """The scalar-mix probe of the module docstring on [items, layers, features] inputs."""
    import keras

    from bert_tf.layers import ScalarMix

    num_layers, width = split.train_x.shape[1:]
    standardised = [
        _standardise(split.train_x[:, layer], split.dev_x[:, layer], split.test_x[:, layer])
        for layer in range(num_layers)
    ]
    train_x, dev_x, test_x = (np.stack([parts[i] for parts in standardised], axis=1) for i in range(3))
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((num_layers, width))
    mix = ScalarMix(num_layers, name="scalar_mix")
    logits = keras.layers.Dense(num_classes, name="logits")(mix(inputs))
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(MIX_LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    batch_size = max(1, min(MIX_BATCH_SIZE, len(train_x) // MIX_MIN_STEPS_PER_EPOCH))
    best, best_weights = None, None
    for _ in range(MIX_EPOCHS):
        model.fit(train_x, split.train_y, batch_size=batch_size, epochs=1, shuffle=True, verbose=0)
        dev_accuracy = _accuracy(_predict(model, dev_x), split.dev_y)
        if best is None or dev_accuracy > best:
            best, best_weights = dev_accuracy, model.get_weights()
    model.set_weights(best_weights)
    return ProbeResult(
        test_accuracy=_accuracy(_predict(model, test_x), split.test_y),
        dev_accuracy=best,
        mix_weights=tuple(float(w) for w in np.asarray(mix.mixing_weights())),
        mix_scale=float(np.asarray(mix.gamma)),
    )


def _predict(model, x):
    return np.asarray(model.predict(x, batch_size=4096, verbose=0)).argmax(axis=-1)


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
