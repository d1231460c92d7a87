"""`BertClassifier`: sentence (or sentence-pair) classification and regression."""

import keras

from bert_tf.layers.classification_head import ClassificationHead
from bert_tf.models.bert_encoder import BertEncoder, encoder_inputs


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(keras.Model):
    """A classification layer on the pooled [CLS] output of a `BertEncoder`.

    Args:
      encoder: a `BertEncoder`.
      num_classes: number of classes; 1 for regression (e.g. STS-B).
      dropout_rate: dropout before the output layer; defaults to the encoder's
        hidden dropout.

    Inputs: the encoder's dict. Output: float32 logits [batch, num_classes].
    """

    def __init__(self, encoder: BertEncoder, num_classes: int, dropout_rate=None, **kwargs):
        if dropout_rate is None:
            dropout_rate = encoder.config.hidden_dropout_prob
        head = ClassificationHead(num_classes, dropout_rate=dropout_rate,
                                  initializer_range=encoder.config.initializer_range,
                                  dtype=encoder.dtype_policy, name="classifier")
        inputs = encoder_inputs()
        logits = head(encoder(inputs)["pooled_output"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.classifier = head
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate

    def get_config(self):
        return {"encoder": keras.saving.serialize_keras_object(self.encoder), "num_classes": self.num_classes,
                "dropout_rate": self.dropout_rate, "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
