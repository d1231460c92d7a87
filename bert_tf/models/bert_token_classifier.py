"""`BertTokenClassifier`: a label for every token (tagging, e.g. NER)."""

import keras

from bert_tf.layers.heads import TokenClassificationHead
from bert_tf.models.bert_encoder import BertEncoder, encoder_inputs
from bert_tf.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(TaskModel):
    """A per-token classification layer on the sequence output of a `BertEncoder`.

    Args:
      encoder: a `BertEncoder`.
      num_labels: the number of tags.
      dropout_rate: dropout before the output layer; defaults to the encoder's hidden dropout.
      packed: rows that pack several examples, with the `input_example_ids` input (0 for padding, 1..k for
        the row's examples; `BertEncoder.packed_outputs`): each token is tagged as in its example alone. The
        weights are the same either way.

    Inputs: the encoder's dict. Output: float32 logits [batch, seq_length, num_labels].

    Example:

    >>> import numpy as np
    >>> from bert_tf import BertConfig, BertEncoder
    >>> from bert_tf.models import BertTokenClassifier
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> tagger = BertTokenClassifier(BertEncoder(config), num_labels=5)
    >>> word_ids = np.array([[2, 17, 42, 3], [2, 8, 3, 0]], "int32")
    >>> logits = tagger({"input_word_ids": word_ids, "input_mask": np.int32(word_ids > 0),
    ...                  "input_type_ids": np.zeros_like(word_ids)})
    >>> tuple(logits.shape)
    (2, 4, 5)
    """

    def __init__(self, encoder: BertEncoder, num_labels: int, dropout_rate=None, packed=False, **kwargs):
        if dropout_rate is None:
            dropout_rate = encoder.config.hidden_dropout_prob
        head = TokenClassificationHead(
            num_labels,
            dropout_rate=dropout_rate,
            initializer_range=encoder.config.initializer_range,
            dtype=encoder.dtype_policy,
            name="token_classifier",
        )
        inputs = encoder_inputs(packed=packed)
        outputs = encoder.packed_outputs(inputs) if packed else encoder(inputs)
        super().__init__(inputs=inputs, outputs=head(outputs["sequence_output"]), **kwargs)
        self.encoder = encoder
        self.token_classifier = head
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.packed = packed

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "dropout_rate": self.dropout_rate,
            "packed": self.packed,
        }
