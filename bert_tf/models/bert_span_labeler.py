"""`BertSpanLabeler`: extractive question answering (SQuAD)."""

import keras

from bert_tf.layers.span_head import SpanHead
from bert_tf.models.bert_encoder import BertEncoder, encoder_inputs
from bert_tf.models.task import Task


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(Task):
    """Start and end logits over the tokens of `[CLS] question [SEP] context [SEP]`.

    Inputs: the encoder's dict. Outputs: a dict with `start_logits` and
    `end_logits`, each float32 [batch, seq_length].
    """

    def __init__(self, encoder: BertEncoder, **kwargs):
        head = SpanHead(initializer_range=encoder.config.initializer_range, dtype=encoder.dtype_policy, name="span")
        inputs = encoder_inputs()
        start_logits, end_logits = head(encoder(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits}, **kwargs)
        self.encoder = encoder
        self.span = head
