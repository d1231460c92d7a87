"""Evaluation metrics of the fine-tuning tasks, in NumPy.

Classification: accuracy, binary F1, Matthews correlation. Regression:
Pearson and Spearman correlation. Tagging: token accuracy and entity-level
(span) precision/recall/F1 over BIO/IOBES tags with the conlleval chunk rules
that seqeval uses by default. SQuAD: exact match and F1 with the official
answer normalisation, no-answer handling of v2.0 and the best no-answer
threshold search. Every function takes plain Python/NumPy values.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

# --- classification ---------------------------------------------------------


def accuracy(labels, predictions) -> float:
    labels, predictions = _same_length(labels, predictions)
    if not len(labels):
        return 0.0
    return float(np.mean(labels == predictions))


def f1_score(labels, predictions, positive_label=1) -> float:
    """Binary F1 of `positive_label` (0 when it is never predicted nor present)."""
    labels, predictions = _same_length(labels, predictions)
    true_positive = np.sum((predictions == positive_label) & (labels == positive_label))
    predicted = np.sum(predictions == positive_label)
    actual = np.sum(labels == positive_label)
    if predicted + actual == 0:
        return 0.0
    return float(2 * true_positive / (predicted + actual))


def macro_f1_score(labels, predictions, num_classes: int) -> float:
    """Unweighted mean of the per-class F1 over classes that occur in labels or predictions."""
    labels, predictions = _same_length(labels, predictions)
    scores = [
        f1_score(labels, predictions, c) for c in range(num_classes) if np.any(labels == c) or np.any(predictions == c)
    ]
    return float(np.mean(scores)) if scores else 0.0


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation coefficient, multiclass form (Gorodkin, 2004).

    For two classes it is the usual (TP*TN - FP*FN) / sqrt(...). Returns 0 when
    it is undefined (all labels or all predictions of one class).
    """
    labels, predictions = _same_length(labels, predictions)
    classes = np.union1d(labels, predictions)
    index = {c: i for i, c in enumerate(classes.tolist())}
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for label, prediction in zip(labels.tolist(), predictions.tolist()):
        confusion[index[label], index[prediction]] += 1
    total = confusion.sum()
    correct = np.trace(confusion)
    true_counts = confusion.sum(axis=1)
    predicted_counts = confusion.sum(axis=0)
    numerator = correct * total - np.dot(true_counts, predicted_counts)
    denominator = np.sqrt(total**2 - np.dot(predicted_counts, predicted_counts)) * np.sqrt(
        total**2 - np.dot(true_counts, true_counts)
    )
    if denominator == 0:
        return 0.0
    return float(numerator / denominator)


def classification_metrics(labels, predictions, num_classes: int) -> dict:
    """accuracy, matthews_corrcoef, and f1 (binary, class 1) or macro_f1 (more classes)."""
    results = {"accuracy": accuracy(labels, predictions), "matthews_corrcoef": matthews_corrcoef(labels, predictions)}
    if num_classes == 2:
        results["f1"] = f1_score(labels, predictions, positive_label=1)
    else:
        results["macro_f1"] = macro_f1_score(labels, predictions, num_classes)
    return results


# --- regression -------------------------------------------------------------


def pearson_correlation(x, y) -> float:
    """Pearson's r; 0 when either input is constant."""
    x, y = _same_length(x, y, dtype=np.float64)
    x = x - x.mean() if len(x) else x
    y = y - y.mean() if len(y) else y
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    if denominator == 0:
        return 0.0
    return float(np.sum(x * y) / denominator)


def rankdata(values) -> np.ndarray:
    """1-based ranks, ties sharing the average of their ranks."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman_correlation(x, y) -> float:
    """Spearman's rho: Pearson's r of the (tie-averaged) ranks."""
    x, y = _same_length(x, y, dtype=np.float64)
    return pearson_correlation(rankdata(x), rankdata(y))


def regression_metrics(labels, predictions) -> dict:
    labels, predictions = _same_length(labels, predictions, dtype=np.float64)
    return {
        "pearson": pearson_correlation(labels, predictions),
        "spearman": spearman_correlation(labels, predictions),
        "mse": float(np.mean((labels - predictions) ** 2)) if len(labels) else 0.0,
    }


# --- tagging ----------------------------------------------------------------


def _split_tag(tag: str) -> tuple[str, str]:
    if tag in ("O", ""):
        return "O", ""
    if len(tag) > 1 and tag[1] in "-_" and tag[0] in "BIESLU":
        prefix, entity_type = tag[0], tag[2:]
        return {"L": "E", "U": "S"}.get(prefix, prefix), entity_type
    # A tag without a prefix is an entity type on its own (IO tagging).
    return "I", tag


def _chunk_ends(prev_prefix, prev_type, prefix, entity_type) -> bool:
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return prev_prefix != "O" and prev_type != entity_type


def _chunk_starts(prev_prefix, prev_type, prefix, entity_type) -> bool:
    if prefix in ("B", "S"):
        return True
    if prev_prefix in ("E", "S", "O") and prefix in ("E", "I"):
        return True
    return prefix != "O" and prev_type != entity_type


def get_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entity chunks (type, first, last) of one tag sequence, conlleval rules.

    Accepts IOB2 (`B-PER I-PER`), IOB1 and IOBES/BILOU tags; an `I-` tag that
    follows `O` or a different type starts a new entity, as in seqeval's
    default (non-strict) mode.
    """
    entities = []
    prev_prefix, prev_type, start = "O", "", None
    for position, tag in enumerate(list(tags) + ["O"]):
        prefix, entity_type = _split_tag(tag)
        if start is not None and _chunk_ends(prev_prefix, prev_type, prefix, entity_type):
            entities.append((prev_type, start, position - 1))
            start = None
        if _chunk_starts(prev_prefix, prev_type, prefix, entity_type):
            start = position
        prev_prefix, prev_type = prefix, entity_type
    return entities


def entity_metrics(label_sequences: Iterable[Sequence[str]], predicted_sequences: Iterable[Sequence[str]]) -> dict:
    """Micro-averaged entity precision/recall/F1 and per-type F1 over sentences."""
    label_sequences, predicted_sequences = list(label_sequences), list(predicted_sequences)
    if len(label_sequences) != len(predicted_sequences):
        raise ValueError(f"Got {len(label_sequences)} label sequences but {len(predicted_sequences)} predictions.")
    true_entities, predicted_entities = set(), set()
    for index, (labels, predictions) in enumerate(zip(label_sequences, predicted_sequences)):
        if len(labels) != len(predictions):
            raise ValueError(f"Sentence {index}: {len(labels)} labels but {len(predictions)} predicted tags.")
        true_entities.update((index,) + e for e in get_entities(labels))
        predicted_entities.update((index,) + e for e in get_entities(predictions))
    results = _precision_recall_f1(true_entities, predicted_entities)
    types = sorted({e[1] for e in true_entities | predicted_entities})
    results["per_type_f1"] = {
        t: _precision_recall_f1({e for e in true_entities if e[1] == t}, {e for e in predicted_entities if e[1] == t})[
            "f1"
        ]
        for t in types
    }
    return results


def _precision_recall_f1(true_set: set, predicted_set: set) -> dict:
    correct = len(true_set & predicted_set)
    precision = correct / len(predicted_set) if predicted_set else 0.0
    recall = correct / len(true_set) if true_set else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def tagging_metrics(label_sequences, predicted_sequences) -> dict:
    """Token accuracy plus entity precision/recall/F1 (see `entity_metrics`)."""
    label_sequences, predicted_sequences = list(label_sequences), list(predicted_sequences)
    results = entity_metrics(label_sequences, predicted_sequences)
    flat_labels = [t for s in label_sequences for t in s]
    flat_predictions = [t for s in predicted_sequences for t in s]
    results = {
        "token_accuracy": accuracy(np.array(flat_labels, dtype=object), np.array(flat_predictions, dtype=object)),
        "entity_precision": results["precision"],
        "entity_recall": results["recall"],
        "entity_f1": results["f1"],
        "per_type_f1": results["per_type_f1"],
    }
    return results


# --- SQuAD ------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lower case, drop punctuation, articles and extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_exact_match(gold: str, prediction: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(prediction))


def squad_f1(gold: str, prediction: str) -> float:
    """Bag-of-tokens F1 of normalised answers; an empty answer only matches an empty one."""
    gold_tokens = normalize_answer(gold).split()
    predicted_tokens = normalize_answer(prediction).split()
    if not gold_tokens or not predicted_tokens:
        return float(gold_tokens == predicted_tokens)
    common = collections.Counter(gold_tokens) & collections.Counter(predicted_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_metrics(
    gold_answers: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    no_answer_probabilities: Mapping[str, float] | None = None,
) -> dict:
    """SQuAD v1.1/v2.0 scores (percentages, as the official scripts print them).

    Args:
      gold_answers: question id -> gold answer texts; an empty list (or only
        empty strings) marks an unanswerable v2.0 question.
      predictions: question id -> predicted text ("" = no answer). Questions
        without a prediction score 0.
      no_answer_probabilities: optional question id -> score that the question
        has no answer (e.g. the null score difference); adds `best_exact`,
        `best_f1` and their thresholds as the v2.0 script does.

    Returns:
      `exact_match`, `f1`, `total`, and for data with unanswerable questions the
      `HasAns_*`/`NoAns_*` splits.
    """
    exact_scores, f1_scores = {}, {}
    has_answer = {}
    for qid, answers in gold_answers.items():
        answers = [a for a in answers if normalize_answer(a)]
        has_answer[qid] = bool(answers)
        answers = answers or [""]
        prediction = predictions.get(qid, None)
        if prediction is None:
            exact_scores[qid], f1_scores[qid] = 0, 0.0
            continue
        exact_scores[qid] = max(squad_exact_match(a, prediction) for a in answers)
        f1_scores[qid] = max(squad_f1(a, prediction) for a in answers)

    def summary(qids):
        qids = list(qids)
        if not qids:
            return {"exact_match": 0.0, "f1": 0.0, "total": 0}
        return {
            "exact_match": 100.0 * sum(exact_scores[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1_scores[q] for q in qids) / len(qids),
            "total": len(qids),
        }

    results = summary(gold_answers)
    answerable = [q for q in gold_answers if has_answer[q]]
    unanswerable = [q for q in gold_answers if not has_answer[q]]
    if unanswerable:
        for prefix, qids in (("HasAns", answerable), ("NoAns", unanswerable)):
            for key, value in summary(qids).items():
                results[f"{prefix}_{key}"] = value
    if no_answer_probabilities is not None:
        for name, scores in (("exact", exact_scores), ("f1", f1_scores)):
            best, threshold = best_no_answer_threshold(scores, has_answer, predictions, no_answer_probabilities)
            results[f"best_{name}"] = best
            results[f"best_{name}_thresh"] = threshold
    return results


def best_no_answer_threshold(
    scores: Mapping[str, float],
    has_answer: Mapping[str, bool],
    predictions: Mapping[str, str],
    no_answer_probabilities: Mapping[str, float],
) -> tuple[float, float]:
    """The score (in %) and threshold when answers with a no-answer score above it become "".

    Sweeps the questions by increasing no-answer score, as the official v2.0
    script does: each step switches one more question to "no answer".
    """
    num_no_answer = sum(1 for has in has_answer.values() if not has)
    current = best = float(num_no_answer)
    best_threshold = 0.0
    qids = sorted(scores, key=lambda q: no_answer_probabilities.get(q, 0.0))
    for qid in qids:
        if qid not in no_answer_probabilities:
            continue
        if has_answer[qid]:
            delta = scores[qid]
        elif predictions.get(qid):
            delta = -1
        else:
            delta = 0
        current += delta
        if current > best:
            best = current
            best_threshold = no_answer_probabilities[qid]
    total = len(scores)
    return (100.0 * best / total if total else 0.0), float(best_threshold)


def _same_length(a, b, dtype=None):
    a, b = np.asarray(a, dtype=dtype), np.asarray(b, dtype=dtype)
    if a.shape != b.shape:
        raise ValueError(f"Labels and predictions differ in shape: {a.shape} vs {b.shape}.")
    return a.reshape(-1), b.reshape(-1)
