"""Fine-tuning metrics against values computed by hand."""

import math

import numpy as np
import pytest

from bert_tf.tasks import metrics


def test_accuracy_f1_and_binary_matthews():
    labels = [1, 1, 0, 0, 1]
    predictions = [1, 0, 0, 1, 1]
    # TP=2, TN=1, FP=1, FN=1.
    assert metrics.accuracy(labels, predictions) == pytest.approx(3 / 5)
    assert metrics.f1_score(labels, predictions) == pytest.approx(2 * 2 / (3 + 3))
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx((2 * 1 - 1 * 1) / math.sqrt(3 * 3 * 2 * 2))
    results = metrics.classification_metrics(labels, predictions, num_classes=2)
    assert set(results) == {"accuracy", "f1", "matthews_corrcoef"}


def test_matthews_multiclass_and_degenerate():
    labels = [0, 1, 2, 0, 1, 2]
    predictions = [0, 2, 1, 0, 0, 2]
    # correct 3 of 6; true counts (2, 2, 2), predicted counts (3, 1, 2).
    expected = (3 * 6 - (2 * 3 + 2 * 1 + 2 * 2)) / (math.sqrt(36 - (9 + 1 + 4)) * math.sqrt(36 - 12))
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(expected)
    assert metrics.matthews_corrcoef([0, 1, 1], [1, 1, 1]) == 0.0
    assert metrics.matthews_corrcoef([0, 1, 0, 1], [0, 1, 0, 1]) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    results = metrics.classification_metrics(labels, predictions, num_classes=3)
    # per-class F1: class 0: 2*2/(3+2), class 1: 0, class 2: 2*1/(2+2).
    assert results["macro_f1"] == pytest.approx((0.8 + 0.0 + 0.5) / 3)


def test_f1_without_positives_is_zero():
    assert metrics.f1_score([0, 0], [0, 0]) == 0.0


def test_pearson_and_spearman():
    assert metrics.pearson_correlation([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert metrics.pearson_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert metrics.pearson_correlation([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert metrics.pearson_correlation([1, 1, 1], [1, 2, 3]) == 0.0
    # Ties share ranks: x ranks (1, 2.5, 2.5, 4), y ranks (1, 3, 2, 4).
    np.testing.assert_allclose(metrics.rankdata([1, 2, 2, 3]), [1, 2.5, 2.5, 4])
    assert metrics.spearman_correlation([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    # Monotone but non-linear: Spearman 1, Pearson below 1.
    x = [1, 2, 3, 4, 5]
    y = [1, 4, 9, 16, 100]
    assert metrics.spearman_correlation(x, y) == pytest.approx(1.0)
    assert metrics.pearson_correlation(x, y) < 0.95
    results = metrics.regression_metrics([1, 2, 3], [1, 2, 5])
    assert results["mse"] == pytest.approx(4 / 3)


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        metrics.accuracy([1, 2], [1])


@pytest.mark.parametrize(
    "tags,expected",
    [
        (["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 3, 5)]),
        (["O", "I-PER", "I-PER"], [("PER", 1, 2)]),  # I- after O starts an entity (IOB1 / lenient)
        (["B-PER", "I-LOC"], [("PER", 0, 0), ("LOC", 1, 1)]),  # a type change splits
        (["B-PER", "B-PER"], [("PER", 0, 0), ("PER", 1, 1)]),
        (["S-PER", "B-LOC", "E-LOC", "O"], [("PER", 0, 0), ("LOC", 1, 2)]),  # IOBES
        (["U-PER", "B-LOC", "L-LOC"], [("PER", 0, 0), ("LOC", 1, 2)]),  # BILOU
        (["PER", "PER", "O", "LOC"], [("PER", 0, 1), ("LOC", 3, 3)]),  # IO tags
        (["O", "O"], []),
    ],
)
def test_get_entities(tags, expected):
    assert metrics.get_entities(tags) == expected


def test_entity_and_token_metrics():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-PER"]]
    # gold: PER(0-1), LOC(3), ORG(0); predicted: PER(0), LOC(3), ORG(0), PER(1) -> 2 correct.
    results = metrics.tagging_metrics(gold, predicted)
    assert results["entity_precision"] == pytest.approx(2 / 4)
    assert results["entity_recall"] == pytest.approx(2 / 3)
    assert results["entity_f1"] == pytest.approx(2 * (1 / 2) * (2 / 3) / (1 / 2 + 2 / 3))
    assert results["token_accuracy"] == pytest.approx(4 / 6)
    assert results["per_type_f1"] == {"LOC": 1.0, "ORG": 1.0, "PER": 0.0}
    with pytest.raises(ValueError, match="Sentence 0"):
        metrics.tagging_metrics([["O", "O"]], [["O"]])


def test_squad_normalisation_and_scores():
    assert metrics.normalize_answer("The  Cat's, hat!") == "cats hat"
    assert metrics.normalize_answer("An apple a day") == "apple day"
    assert metrics.squad_exact_match("the Eiffel Tower", "Eiffel tower.") == 1
    assert metrics.squad_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert metrics.squad_f1("cat", "dog") == 0.0
    assert metrics.squad_f1("", "") == 1.0
    assert metrics.squad_f1("the", "") == 1.0  # both normalise to nothing
    assert metrics.squad_f1("cat", "") == 0.0


def test_squad_v1_metrics():
    gold = {"q1": ["Paris", "the city of Paris"], "q2": ["blue"]}
    predictions = {"q1": "paris", "q2": "dark blue"}
    results = metrics.squad_metrics(gold, predictions)
    assert results["exact_match"] == pytest.approx(50.0)
    assert results["f1"] == pytest.approx(100 * (1 + 2 * 0.5 * 1 / 1.5) / 2)
    assert results["total"] == 2
    assert "HasAns_total" not in results
    # A missing prediction scores zero.
    assert metrics.squad_metrics(gold, {"q1": "Paris"})["exact_match"] == pytest.approx(50.0)


def test_squad_v2_metrics_and_best_threshold():
    gold = {"q1": ["Paris"], "q2": ["blue"], "q3": [], "q4": [""]}
    predictions = {"q1": "Paris", "q2": "dark blue", "q3": "", "q4": "x"}
    null_odds = {"q1": -5.0, "q2": -1.0, "q3": 2.0, "q4": 0.5}
    results = metrics.squad_metrics(gold, predictions, null_odds)
    assert results["exact_match"] == pytest.approx(50.0)
    assert results["HasAns_total"] == 2 and results["NoAns_total"] == 2
    assert results["HasAns_exact_match"] == pytest.approx(50.0)
    assert results["NoAns_exact_match"] == pytest.approx(50.0)
    assert results["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    # Sweep by null odds from "everything unanswered" (2 correct): q1 +1 (best, thresh -5), q2 +0,
    # q4 -1 (answered an unanswerable), q3 0. F1: q2 adds 2/3 -> best at thresh -1.
    assert results["best_exact"] == pytest.approx(75.0)
    assert results["best_exact_thresh"] == pytest.approx(-5.0)
    assert results["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert results["best_f1_thresh"] == pytest.approx(-1.0)
