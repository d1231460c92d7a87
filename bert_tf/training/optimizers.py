"""BERT's optimizer by name: AdamW (`optimization.py`) or LAMB (`lamb.py`), with the warm-up schedule and clipping.

Above both optimizer modules, so that LAMB (an `AdamWeightDecay` subclass) and the choice between them do not
import each other.
"""

from __future__ import annotations

from collections.abc import Sequence

from bert_tf.training.config import OPTIMIZERS
from bert_tf.training.lamb import Lamb
from bert_tf.training.optimization import AdamWeightDecay, WarmupPolynomialDecay


def create_optimizer(
    variables: Sequence,
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: int = 0,
    weight_decay_rate: float = 0.01,
    clip_norm: float | None = 1.0,
    epsilon: float = 1e-6,
    end_learning_rate: float = 0.0,
    bias_correction: bool = False,
    optimizer: str = "adamw",
) -> AdamWeightDecay:
    """BERT's optimizer for `variables`: AdamW (or LAMB, `bert_tf.training.lamb`) + warm-up and linear decay to 0.

    `optimizer="lamb"` gives LAMB with its own bias correction (always on) and the same schedule and clipping.
    """
    schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps, end_learning_rate)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
    if optimizer == "lamb":
        return Lamb(
            variables, learning_rate=schedule, weight_decay_rate=weight_decay_rate, epsilon=epsilon, clip_norm=clip_norm
        )
    return AdamWeightDecay(
        variables,
        learning_rate=schedule,
        weight_decay_rate=weight_decay_rate,
        epsilon=epsilon,
        clip_norm=clip_norm,
        bias_correction=bias_correction,
    )
