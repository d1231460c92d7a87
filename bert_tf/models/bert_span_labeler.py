"""`BertSpanLabeler`: extractive question answering (SQuAD)."""

import keras

from bert_tf.layers.heads import SpanHead
from bert_tf.models.bert_encoder import BertEncoder, encoder_inputs
from bert_tf.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(TaskModel):
    """Start and end logits over the tokens of `[CLS] question [SEP] context [SEP]`.

    Args:
      encoder: a `BertEncoder`.
      packed: rows that pack several windows, with the `input_example_ids` input (0 for padding, 1..k for the
        row's examples; `BertEncoder.packed_outputs`): each token's logits are those of its window alone (the
        loss keeps each window's softmax to its own tokens: `SquadTask.compute_loss`). The weights are the
        same either way.

    Inputs: the encoder's dict. Outputs: a dict with `start_logits` and
    `end_logits`, each float32 [batch, seq_length].

    Example:

    >>> import numpy as np
    >>> from bert_tf import BertConfig, BertEncoder
    >>> from bert_tf.models import BertSpanLabeler
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> span_labeler = BertSpanLabeler(BertEncoder(config))
    >>> word_ids = np.array([[2, 17, 3, 42, 8, 3]], "int32")  # [CLS] question [SEP] context [SEP]
    >>> outputs = span_labeler({"input_word_ids": word_ids, "input_mask": np.ones_like(word_ids),
    ...                         "input_type_ids": np.array([[0, 0, 0, 1, 1, 1]], "int32")})
    >>> tuple(outputs["start_logits"].shape), tuple(outputs["end_logits"].shape)
    ((1, 6), (1, 6))
    """

    def __init__(self, encoder: BertEncoder, packed: bool = False, **kwargs):
        head = SpanHead(initializer_range=encoder.config.initializer_range, dtype=encoder.dtype_policy, name="span")
        inputs = encoder_inputs(packed=packed)
        outputs = encoder.packed_outputs(inputs) if packed else encoder(inputs)
        start_logits, end_logits = head(outputs["sequence_output"])
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits}, **kwargs)
        self.encoder = encoder
        self.span = head
        self.packed = packed

    def get_config(self):
        return {**super().get_config(), "packed": self.packed}
