"""The distillation losses: the teacher's soft targets at a temperature, the hard labels, hidden states.

Hinton et al. (2015): the student matches the teacher's class distribution softened by a temperature T,
`KL(softmax(t / T) || softmax(s / T))`, scaled by T^2 so that its gradients keep their size as T changes,
mixed with the ordinary loss on the labels:

    loss = alpha * T^2 * KL + (1 - alpha) * hard_loss + hidden_loss_weight * hidden_state_loss

For regression the soft loss is the squared difference to the teacher's score (no temperature). The
hidden-state loss is TinyBERT's intermediate-layer loss: the mean squared difference between the student's
hidden states and the teacher's layers they are mapped to (embeddings to embeddings, student layer i to
teacher layer `layer_map[i]`), over the real tokens. Backend-free (`keras.ops`).

    >>> import numpy as np
    >>> student = np.array([[2.0, 0.0]], "float32"); teacher = np.array([[2.0, 0.0]], "float32")
    >>> float(soft_target_loss(student, teacher, temperature=2.0))
    0.0
"""

from __future__ import annotations

import keras
from keras import ops


def soft_target_loss(student_logits, teacher_logits, temperature: float, weights=None):
    """T^2 * KL(softmax(teacher / T) || softmax(student / T)), averaged over rows (weighted by `weights`).

    Args:
      student_logits, teacher_logits: [..., num_classes].
      temperature: T > 0.
      weights: optional [...] row weights (padding tokens 0); None: every row counts.
    """
    student = ops.cast(student_logits, "float32") / temperature
    teacher = ops.cast(teacher_logits, "float32") / temperature
    teacher_log_probs = ops.log_softmax(teacher, axis=-1)
    student_log_probs = ops.log_softmax(student, axis=-1)
    per_row = ops.sum(ops.exp(teacher_log_probs) * (teacher_log_probs - student_log_probs), axis=-1)
    return temperature**2 * _weighted_mean(per_row, weights)


def hidden_state_loss(student_states, teacher_states, mask):
    """Mean squared difference of paired hidden states over the real tokens, averaged over the pairs.

    Args:
      student_states, teacher_states: equal-length lists of [batch, seq_length, hidden_size].
      mask: [batch, seq_length], 1 for real tokens.
    """
    weights = ops.cast(mask, "float32")
    losses = [
        _weighted_mean(ops.mean(ops.square(ops.cast(s, "float32") - ops.cast(t, "float32")), axis=-1), weights)
        for s, t in zip(student_states, teacher_states)
    ]
    return ops.mean(ops.stack(losses))


def _example_weights(batch):
    """[examples] 1 for each example of the batch; packed rows' empty slots (`feature_index` -1) are 0."""
    index = ops.reshape(batch["feature_index"], (-1,)) if "feature_index" in batch else None
    if index is None:
        return ops.ones_like(ops.reshape(ops.cast(batch["label"], "float32"), (-1,)))
    return ops.cast(ops.greater_equal(index, 0), "float32")


def _weighted_mean(values, weights):
    if weights is None:
        return ops.mean(values)
    weights = ops.cast(weights, "float32")
    return ops.sum(values * weights) / ops.maximum(ops.sum(weights), 1.0)


class DistillationLoss:
    """The training loss of a student: `__call__(batch, outputs) -> dict` of float32 scalars with `loss`.

    The batch holds the task's labels and the teacher's precomputed `teacher_logits`; for classification and
    regression also `label_weight` (0 for the teacher-only `--unlabeled_file` rows, whose hard loss is left
    out); tagging marks unlabelled tokens with label -1 as its task does. Packed rows (`bert_tf.data.packed_rows`)
    give classification and regression [rows, slots, ...] logits and targets: every loss is the mean over the
    filled slots (`feature_index` >= 0), so each example weighs what it weighs unpacked; a packed tagger's
    tokens are weighted by `input_mask` as unpacked ones are. `outputs` is the student's logits,
    or a dict with `logits` and, for the hidden-state loss, `student_states`, `teacher_states`.

    Args:
      kind: "classification", "regression" or "tagging".
      temperature, alpha, hidden_loss_weight: see the module docstring.
    """

    def __init__(self, kind: str, temperature: float = 2.0, alpha: float = 0.5, hidden_loss_weight: float = 0.0):
        if kind not in ("classification", "regression", "tagging"):
            raise ValueError(f"Unknown kind of task {kind!r}.")
        self.kind = kind
        self.temperature = temperature
        self.alpha = alpha
        self.hidden_loss_weight = hidden_loss_weight

    def __call__(self, batch, outputs) -> dict:
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs
        logits = ops.cast(logits, "float32")
        teacher = ops.cast(batch["teacher_logits"], "float32")
        if self.kind != "tagging":  # one row per example: packed rows' [rows, slots, classes] flattened
            logits = ops.reshape(logits, (-1, logits.shape[-1]))
            teacher = ops.reshape(teacher, (-1, teacher.shape[-1]))
        if self.kind == "regression":
            metrics = self._regression(batch, logits[:, 0], teacher[:, 0])
        else:
            metrics = self._classification(batch, logits, teacher)
        loss = self.alpha * metrics["soft_loss"] + (1.0 - self.alpha) * metrics["hard_loss"]
        if self.hidden_loss_weight:
            metrics["hidden_loss"] = hidden_state_loss(
                outputs["student_states"], outputs["teacher_states"], batch["input_mask"]
            )
            loss = loss + self.hidden_loss_weight * metrics["hidden_loss"]
        metrics["loss"] = loss
        return metrics

    def _classification(self, batch, logits, teacher):
        if self.kind == "tagging":
            labels = ops.cast(batch["label_ids"], "int32")
            label_weights = ops.cast(ops.greater_equal(labels, 0), "float32")
            token_weights = ops.cast(batch["input_mask"], "float32")
        else:
            labels = ops.cast(ops.reshape(batch["label"], (-1,)), "int32")
            token_weights = _example_weights(batch)
            label_weights = ops.cast(ops.reshape(batch["label_weight"], (-1,)), "float32") * token_weights
        safe_labels = ops.maximum(labels, 0)
        cross_entropy = keras.losses.sparse_categorical_crossentropy(safe_labels, logits, from_logits=True)
        predicted = ops.cast(ops.argmax(logits, axis=-1), "int32")
        correct = ops.cast(ops.equal(predicted, safe_labels), "float32")
        agrees = ops.cast(ops.equal(predicted, ops.cast(ops.argmax(teacher, axis=-1), "int32")), "float32")
        return {
            "soft_loss": soft_target_loss(logits, teacher, self.temperature, token_weights),
            "hard_loss": _weighted_mean(cross_entropy, label_weights),
            "accuracy": _weighted_mean(correct, label_weights),
            "teacher_agreement": _weighted_mean(agrees, token_weights),
        }

    def _regression(self, batch, scores, teacher_scores):
        targets = ops.cast(ops.reshape(batch["label"], (-1,)), "float32")
        example_weights = _example_weights(batch)
        label_weights = ops.cast(ops.reshape(batch["label_weight"], (-1,)), "float32") * example_weights
        return {
            "soft_loss": _weighted_mean(ops.square(scores - teacher_scores), example_weights),
            "hard_loss": _weighted_mean(ops.square(scores - targets), label_weights),
            "mean_absolute_error": _weighted_mean(ops.abs(scores - targets), label_weights),
        }
