"""`BertClassifier`: sentence (or sentence-pair) classification and regression."""

import keras

from bert_tf.layers.heads import ClassificationHead
from bert_tf.models.bert_encoder import BertEncoder, encoder_inputs
from bert_tf.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(TaskModel):
    """A classification layer on the pooled [CLS] output of a `BertEncoder`.

    Args:
      encoder: a `BertEncoder`.
      num_classes: number of classes; 1 for regression (e.g. STS-B).
      dropout_rate: dropout before the output layer; defaults to the encoder's
        hidden dropout.
      examples_per_row: None: one example a row. A number k: packed rows, with the `input_example_ids` input
        (0 for padding, 1..k for the row's examples; `BertEncoder.packed_outputs`) and logits for each of
        the k example slots. The weights are the same either way, so a checkpoint of one loads into the other.

    Inputs: the encoder's dict. Output: float32 logits [batch, num_classes]; packed: [batch, k, num_classes].

    Example:

    >>> import numpy as np
    >>> from bert_tf import BertClassifier, BertConfig, BertEncoder
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> classifier = BertClassifier(BertEncoder(config), num_classes=3)
    >>> word_ids = np.array([[2, 17, 42, 3], [2, 8, 3, 0]], "int32")
    >>> logits = classifier({"input_word_ids": word_ids, "input_mask": np.int32(word_ids > 0),
    ...                      "input_type_ids": np.zeros_like(word_ids)})
    >>> tuple(logits.shape)
    (2, 3)
    """

    def __init__(self, encoder: BertEncoder, num_classes: int, dropout_rate=None, examples_per_row=None, **kwargs):
        if dropout_rate is None:
            dropout_rate = encoder.config.hidden_dropout_prob
        head = ClassificationHead(
            num_classes,
            dropout_rate=dropout_rate,
            initializer_range=encoder.config.initializer_range,
            dtype=encoder.dtype_policy,
            name="classifier",
        )
        inputs = encoder_inputs(packed=examples_per_row is not None)
        if examples_per_row is None:
            pooled = encoder(inputs)["pooled_output"]
        else:
            pooled = encoder.packed_outputs(inputs, examples_per_row)["pooled_output"]
        super().__init__(inputs=inputs, outputs=head(pooled), **kwargs)
        self.encoder = encoder
        self.classifier = head
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.examples_per_row = examples_per_row

    def get_config(self):
        return {
            **super().get_config(),
            "num_classes": self.num_classes,
            "dropout_rate": self.dropout_rate,
            "examples_per_row": self.examples_per_row,
        }
