"""LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes").

Adam's moments with bias correction, decoupled weight decay, then a layer-wise
trust ratio: each variable's update is rescaled by ||w|| / ||update|| (1 when
either norm is 0), so every layer moves by a step proportional to its own
size whatever the batch size. As in the paper, Model Garden's and NVIDIA's
BERT recipes, LayerNorm and bias variables get neither weight decay nor the
trust ratio (plain Adam steps).

`Lamb` is `AdamWeightDecay` with `_adapt_update`: the same all-reduce-then-clip
order (the loop all-reduces, `apply_gradients` clips to the global norm), the
same update path in replica context, and the same checkpoint layout
(`optimizer/m/<i>`, `optimizer/v/<i>`, `optimizer/iterations`), so runs resume
exactly. Choose it with `TrainingConfig(optimizer="lamb")` /
`experiments.pretrain --optimizer=lamb`; docs/pretraining_objectives.md gives
the large-batch recipe.

    update = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * w      (decay not on LayerNorm, bias)
    w     -= learning_rate * (||w|| / ||update||) * update                 (ratio 1 for LayerNorm, bias)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import tensorflow as tf

from bert_tf.training.optimization import DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, AdamWeightDecay


class Lamb(AdamWeightDecay):
    """LAMB: `AdamWeightDecay` with bias correction and the layer-wise trust ratio.

    Args (the others as `AdamWeightDecay`'s):
      exclude_from_layer_adaptation: regular expressions; a variable whose path
        matches one gets no trust ratio. None: the weight-decay exclusions
        (LayerNorm and bias).
    """

    def __init__(
        self,
        variables: Sequence,
        learning_rate: float | Callable = 1e-3,
        weight_decay_rate: float = 0.01,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay: Sequence[str] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        exclude_from_layer_adaptation: Sequence[str] | None = None,
        clip_norm: float | None = 1.0,
        name: str = "lamb",
    ):
        super().__init__(
            variables,
            learning_rate=learning_rate,
            weight_decay_rate=weight_decay_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            exclude_from_weight_decay=exclude_from_weight_decay,
            clip_norm=clip_norm,
            bias_correction=True,
            name=name,
        )
        patterns = exclude_from_weight_decay if exclude_from_layer_adaptation is None else exclude_from_layer_adaptation
        self.exclude_from_layer_adaptation = tuple(patterns)
        self.adapt_mask = [
            not any(re.search(pattern, name) for pattern in self.exclude_from_layer_adaptation)
            for name in self.variable_names
        ]

    def _adapt_update(self, var, update):
        weight_norm = tf.norm(tf.cast(var, tf.float32))
        update_norm = tf.norm(tf.cast(update, tf.float32))
        ratio = tf.where((weight_norm > 0.0) & (update_norm > 0.0), weight_norm / tf.maximum(update_norm, 1e-30), 1.0)
        return update * tf.cast(ratio, update.dtype)
