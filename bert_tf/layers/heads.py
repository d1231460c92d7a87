"""The output layers on the encoder's states: classification (any rank) and the two-logit heads.

Every head ends in the same dense layer, `_logits_dense`: BERT's truncated-normal
kernel, named `logits`, held as `self.dense` (the attribute is part of the
checkpoints' and the weight converter's paths, e.g. `next_sentence.dense.kernel`),
and returns float32 logits whatever the compute dtype.
(`MaskedLMHead`, whose output matrix is the word embedding, is in masked_lm_head.py.)
"""

import keras
from keras import ops

from bert_tf.layers.dropout import Dropout


def _logits_dense(units, initializer_range, dtype):
    return keras.layers.Dense(
        units,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
        dtype=dtype,
        name="logits",
    )


@keras.saving.register_keras_serializable(package="bert_tf")
class ClassificationHead(keras.layers.Layer):
    """Dropout, then a dense layer to `num_classes` logits on the last axis, at any rank.

    On the pooled [CLS] state it classifies the sequence (`BertClassifier`;
    `num_classes=1` gives a regression score); on the sequence output it
    classifies every token (`BertTokenClassifier`, tagging such as NER).

    Call arguments:
      inputs: float [..., hidden_size], e.g. [batch, hidden_size] or [batch, seq_length, hidden_size].

    Returns:
      float32 [..., num_classes].

    Example:

    >>> import numpy as np
    >>> from bert_tf.layers import ClassificationHead
    >>> head = ClassificationHead(num_classes=3)
    >>> tuple(head(np.zeros((2, 8), "float32")).shape)  # pooled: one label per sequence
    (2, 3)
    >>> tuple(head(np.zeros((2, 5, 8), "float32")).shape)  # sequence: one label per token
    (2, 5, 3)
    """

    def __init__(self, num_classes, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if num_classes < 1:
            raise ValueError(f"num_classes must be at least 1, got {num_classes}.")
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")
        self.dense = _logits_dense(num_classes, initializer_range, self.dtype_policy)

    def build(self, inputs_shape):
        self.dense.build(inputs_shape)
        self.built = True

    def call(self, inputs, training=None):
        return ops.cast(self.dense(self.dropout(inputs, training=training)), "float32")

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.num_classes,)

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            num_classes=self.num_classes, dropout_rate=self.dropout_rate, initializer_range=self.initializer_range
        )
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class TokenClassificationHead(ClassificationHead):
    """`ClassificationHead` under the name `BertTokenClassifier` has always used; it adds nothing.

    Keras' `.keras` and `.weights.h5` files lay a model's layers out by class
    name (`layers/token_classification_head/dense/vars/0`), so the tagger keeps
    this name and files saved by earlier versions still load. New code builds a
    `ClassificationHead`. (TF2 checkpoints and `weights.safetensors` name the
    weights by attribute and variable path, e.g. `token_classifier/logits/kernel`,
    which both classes share.)
    """


class _TwoLogitHead(keras.layers.Layer):
    """A dense layer to two float32 logits on the last axis, without dropout (as in the original BERT)."""

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = _logits_dense(2, initializer_range, self.dtype_policy)

    def build(self, inputs_shape):
        self.dense.build(inputs_shape)
        self.built = True

    def call(self, inputs):
        return ops.cast(self.dense(inputs), "float32")

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (2,)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class NextSentenceHead(_TwoLogitHead):
    """The next-sentence-prediction head of BERT pretraining: did segment B follow segment A?

    Call arguments:
      pooled_output: float [batch, hidden_size] (the pooled [CLS] state).

    Returns:
      float32 logits [batch, 2]; as in the original BERT, class 0 means "B is
      the real next segment" and class 1 "B is a random segment".

    Example:

    >>> import numpy as np
    >>> from bert_tf.layers import NextSentenceHead
    >>> head = NextSentenceHead()
    >>> tuple(head(np.zeros((4, 8), "float32")).shape)
    (4, 2)
    """


@keras.saving.register_keras_serializable(package="bert_tf")
class SpanHead(_TwoLogitHead):
    """Start/end logits for extractive question answering (SQuAD): two logits per token.

    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].

    Returns:
      (start_logits, end_logits), each float32 [batch, seq_length].

    Example:

    >>> import numpy as np
    >>> from bert_tf.layers import SpanHead
    >>> start_logits, end_logits = SpanHead()(np.zeros((2, 5, 8), "float32"))
    >>> tuple(start_logits.shape), tuple(end_logits.shape)
    ((2, 5), (2, 5))
    """

    def call(self, inputs):
        logits = super().call(inputs)
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, inputs_shape):
        shape = tuple(inputs_shape[:-1])
        return shape, shape

    def compute_output_spec(self, inputs):
        shape = tuple(inputs.shape[:-1])
        return keras.KerasTensor(shape, dtype="float32"), keras.KerasTensor(shape, dtype="float32")
