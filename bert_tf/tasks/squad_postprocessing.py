"""From start/end logits of SQuAD features to answer texts, n-best lists and null odds.

For every question the candidates are the `n_best_size` best starts times
the `n_best_size` best ends of each of its windows, among the window's own
tokens (padding, which a packed row does not compute, never takes a place),
kept when both lie in the context, the end is not before the start, the span
has at most `max_answer_length` pieces and the window gives the start piece
its maximal context. The answer text is the context's characters from the start piece's
first to the end piece's last character. With SQuAD v2.0 the null answer
competes through `null_score_diff_threshold`, as in BERT's `run_squad.py`.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

import numpy as np

from bert_tf.data.examples import SquadExample
from bert_tf.tasks.squad_features import SquadFeatures


@dataclasses.dataclass
class SquadPredictions:
    """`answers`: qas_id -> text ("" = no answer); `nbest`: qas_id -> list of
    {text, probability, start_logit, end_logit}; `null_odds`: qas_id -> null
    score minus best span score (v2.0 only, else empty)."""

    answers: dict
    nbest: dict
    null_odds: dict


def _top_indices(logits: np.ndarray, n: int) -> np.ndarray:
    return np.argsort(-logits, kind="stable")[:n]


def _softmax(scores):
    scores = np.asarray(scores, np.float64)
    exp = np.exp(scores - scores.max())
    return exp / exp.sum()


def postprocess_squad(
    examples: Sequence[SquadExample],
    features: SquadFeatures,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> SquadPredictions:
    """Answers for `examples` from the logits of `features` (float [N, seq_length] each, feature order)."""
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(f"Got logits for {len(start_logits)}/{len(end_logits)} features, expected {len(features)}.")
    features_of = collections.defaultdict(list)
    for feature_index, example_index in enumerate(features.example_index.tolist()):
        features_of[example_index].append(feature_index)

    answers, nbest_lists, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        candidates = []
        null_score = None
        for f in features_of.get(example_index, []):
            tokens = np.asarray(features.inputs["input_mask"][f][: len(start_logits[f])]) > 0
            starts = np.where(tokens, start_logits[f], -np.inf)
            ends = np.where(tokens, end_logits[f], -np.inf)
            char_start, char_end, max_context = features.char_start[f], features.char_end[f], features.is_max_context[f]
            if version_2_with_negative:
                score = float(starts[0] + ends[0])
                null_score = score if null_score is None else min(null_score, score)
            for s in _top_indices(starts, n_best_size):
                if char_start[s] < 0 or not max_context[s]:
                    continue
                for e in _top_indices(ends, n_best_size):
                    if char_start[e] < 0 or e < s or e - s + 1 > max_answer_length:
                        continue
                    candidates.append(
                        (
                            float(starts[s] + ends[e]),
                            float(starts[s]),
                            float(ends[e]),
                            int(char_start[s]),
                            int(char_end[e]),
                        )
                    )
        candidates.sort(key=lambda c: -c[0])

        nbest, seen = [], set()
        for score, start_logit, end_logit, first_char, last_char in candidates:
            if len(nbest) >= n_best_size:
                break
            text = example.context[first_char:last_char]
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "score": score, "start_logit": start_logit, "end_logit": end_logit})
        best_span = nbest[0] if nbest else None
        if version_2_with_negative and null_score is not None:
            nbest.append({"text": "", "score": null_score, "start_logit": None, "end_logit": None})
            nbest.sort(key=lambda c: -c["score"])
            nbest = nbest[: max(n_best_size, 1)]
        if not nbest:
            nbest.append({"text": "", "score": 0.0, "start_logit": 0.0, "end_logit": 0.0})
        for entry, probability in zip(nbest, _softmax([c["score"] for c in nbest])):
            entry["probability"] = float(probability)
            del entry["score"]

        if not version_2_with_negative:
            answers[example.qas_id] = best_span["text"] if best_span else ""
        else:
            if best_span is None:
                null_odds[example.qas_id] = float("inf")
                answers[example.qas_id] = ""
            else:
                difference = null_score - (best_span["start_logit"] + best_span["end_logit"])
                null_odds[example.qas_id] = float(difference)
                answers[example.qas_id] = "" if difference > null_score_diff_threshold else best_span["text"]
        nbest_lists[example.qas_id] = nbest
    return SquadPredictions(answers=answers, nbest=nbest_lists, null_odds=null_odds)
