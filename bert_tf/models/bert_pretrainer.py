"""`BertPretrainer`: the encoder with its masked-LM and next-sentence heads."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.layers.heads import NextSentenceHead
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES, EXAMPLE_IDS_KEY, BertEncoder, encoder_inputs
from bert_tf.models.task_model import ENCODER_KEY, TaskModel

MASKED_LM_KEY = "masked_lm"
NEXT_SENTENCE_KEY = "next_sentence"
# The sentence labels a batch may hold -> the prefix of their loss and accuracy; the 2-way head serves both.
SENTENCE_LABELS = {"next_sentence_labels": "nsp", "sentence_order_labels": "sop"}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(TaskModel):
    """BERT's pretraining model: masked language model + next sentence prediction.

    Args:
      encoder: a `BertEncoder`.
      examples_per_row: None: one instance a row. A number k: packed rows, with the `input_example_ids` input
        (0 for padding, 1..k for the row's instances, each contiguous from its own [CLS];
        `BertEncoder.packed_outputs`): each instance attends to itself alone, its positions restart at 0, and
        the sentence head reads its own [CLS]. `masked_lm_positions` stay row-level. Same weights either way.

    Inputs: the encoder's dict plus `masked_lm_positions` int32 [batch, num_predictions].

    Outputs: a dict with
      `mlm_logits`: float32 [batch, num_predictions, vocab_size];
      `sentence_logits`: float32 [batch, 2] from the 2-way sentence head: next-sentence prediction
        (class 1 = "B is a random segment") or sentence order (class 1 = "A and B swapped"), by the records;
        packed: [batch, k, 2], one per slot (an empty slot's are to be masked: `pretraining_losses`).

    Example:

    >>> import numpy as np
    >>> from bert_tf import BertConfig, BertEncoder, BertPretrainer
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> pretrainer = BertPretrainer(BertEncoder(config))
    >>> word_ids = np.array([[2, 17, 4, 42, 3]], "int32")  # 4 = [MASK]
    >>> outputs = pretrainer({"input_word_ids": word_ids, "input_mask": np.ones_like(word_ids),
    ...                       "input_type_ids": np.zeros_like(word_ids),
    ...                       "masked_lm_positions": np.array([[2]], "int32")})
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["sentence_logits"].shape)
    ((1, 1, 100), (1, 2))
    """

    def __init__(self, encoder: BertEncoder, examples_per_row: int | None = None, **kwargs):
        config = encoder.config
        masked_lm = MaskedLMHead(
            encoder.token_embedding,
            activation=config.hidden_act,
            initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps,
            dtype=encoder.dtype_policy,
            name="masked_lm",
        )
        next_sentence = NextSentenceHead(
            initializer_range=config.initializer_range, dtype=encoder.dtype_policy, name="next_sentence"
        )

        inputs = encoder_inputs(packed=examples_per_row is not None)
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        if examples_per_row is None:
            encoder_outputs = encoder({name: inputs[name] for name in ENCODER_INPUT_NAMES})
        else:
            encoder_inputs_packed = {name: inputs[name] for name in ENCODER_INPUT_NAMES + (EXAMPLE_IDS_KEY,)}
            encoder_outputs = encoder.packed_outputs(encoder_inputs_packed, examples_per_row)
        outputs = {
            "mlm_logits": masked_lm(encoder_outputs["sequence_output"], inputs["masked_lm_positions"]),
            "sentence_logits": next_sentence(encoder_outputs["pooled_output"]),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.masked_lm = masked_lm
        self.next_sentence = next_sentence
        self.examples_per_row = examples_per_row

    def get_config(self):
        return {**super().get_config(), "examples_per_row": self.examples_per_row}

    @property
    def checkpoint_items(self):
        """`encoder`, `masked_lm` and `next_sentence`: the model directory's layout, which
        `load_encoder` and `load_pretrainer` read."""
        return self._checkpoint_mapping(
            {ENCODER_KEY: self.encoder, MASKED_LM_KEY: self.masked_lm, NEXT_SENTENCE_KEY: self.next_sentence}
        )


def sparse_cross_entropy_with_hits(labels, logits):
    """Softmax cross-entropy and top-1 hits of integer `labels` under float32 `logits` [..., classes].

    The same numbers as `keras.losses.sparse_categorical_crossentropy(from_logits=True)`
    and `argmax(logits) == labels` (except that a label tied for the largest
    logit counts as a hit), in fewer passes over the logits: the row maximum
    serves both the log-sum-exp and the accuracy, so no separate argmax runs.
    BERT's [batch * predictions, 30522] masked-LM logits are the largest tensor
    of the step, so each pass over them counts.

    Returns:
      (loss, hit): float32 tensors shaped like `labels`.
    """
    row_max = ops.stop_gradient(ops.max(logits, axis=-1))
    log_sum_exp = ops.log(ops.sum(ops.exp(logits - row_max[..., None]), axis=-1)) + row_max
    label_logit = ops.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return log_sum_exp - label_logit, ops.cast(label_logit >= row_max, "float32")


def pretraining_losses(features: dict, outputs: dict) -> dict:
    """The pretraining losses and accuracies for one batch, for the sentence task its features hold.

    Args:
      features: `masked_lm_ids` int [batch, P], `masked_lm_weights` float
        [batch, P] (0 for padding predictions), and the sentence label, if any:
        `next_sentence_labels` int [batch] (BERT's next-sentence prediction) or
        `sentence_order_labels` int [batch] (ALBERT's sentence order, 1 = swapped;
        the same 2-way head predicts it); for packed rows [batch, k], -1 in a row's empty slots. Without
        either (RoBERTa's full sentences), the loss is the masked LM's alone and the head's output is unused.
      outputs: `BertPretrainer` outputs.

    Returns:
      A dict of float32 scalars: `loss` (= mlm_loss + the sentence loss), `mlm_loss`
      (weighted mean over real predictions), `mlm_accuracy`, and `nsp_loss`,
      `nsp_accuracy` or `sop_loss`, `sop_accuracy` (sentence-order accuracy) by the label.
      Packed rows give the unpacked instances' figures: the sentence loss is the mean over filled slots,
      the masked LM's the mean over the batch's real predictions either way.
    """
    weights = ops.cast(features["masked_lm_weights"], "float32")
    masked_lm_ids = ops.cast(features["masked_lm_ids"], "int32")
    mlm_logits = ops.cast(outputs["mlm_logits"], "float32")
    per_prediction, mlm_correct = sparse_cross_entropy_with_hits(masked_lm_ids, mlm_logits)
    total_weight = ops.sum(weights) + 1e-5
    mlm_loss = ops.sum(per_prediction * weights) / total_weight
    mlm_accuracy = ops.sum(mlm_correct * weights) / total_weight
    losses = {"loss": mlm_loss, "mlm_loss": mlm_loss, "mlm_accuracy": mlm_accuracy}

    for label, prefix in SENTENCE_LABELS.items():
        if label not in features:
            continue
        logits = ops.cast(outputs["sentence_logits"], "float32")
        labels = ops.reshape(ops.cast(features[label], "int32"), (-1,))
        logits = ops.reshape(logits, (-1, 2))  # packed [batch, k, 2]: one instance a slot
        filled = ops.cast(ops.greater_equal(labels, 0), "float32")  # -1: a packed row's empty slot
        labels = ops.maximum(labels, 0)
        per_instance = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        instances = ops.sum(filled)
        loss = ops.sum(per_instance * filled) / instances
        hits = ops.cast(ops.equal(ops.argmax(logits, axis=-1), labels), "float32")
        losses["loss"] = mlm_loss + loss
        losses[f"{prefix}_loss"] = loss
        losses[f"{prefix}_accuracy"] = ops.sum(hits * filled) / instances
    return losses
