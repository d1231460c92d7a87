"""`BertTokenClassifier`: a label for every token (tagging, e.g. NER)."""

import keras

from bert_tf.layers.token_classification_head import TokenClassificationHead
from bert_tf.models.bert_encoder import BertEncoder, encoder_inputs
from bert_tf.models.task import Task


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(Task):
    """A per-token classification layer on the sequence output of a `BertEncoder`.

    Inputs: the encoder's dict. Output: float32 logits [batch, seq_length, num_labels].
    """

    def __init__(self, encoder: BertEncoder, num_labels: int, dropout_rate=None, **kwargs):
        if dropout_rate is None:
            dropout_rate = encoder.config.hidden_dropout_prob
        head = TokenClassificationHead(
            num_labels,
            dropout_rate=dropout_rate,
            initializer_range=encoder.config.initializer_range,
            dtype=encoder.dtype_policy,
            name="token_classifier",
        )
        inputs = encoder_inputs()
        logits = head(encoder(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.token_classifier = head
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels, "dropout_rate": self.dropout_rate}
