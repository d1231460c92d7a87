"""`DocumentClassifier`: classification or regression of a document read in windows."""

import keras

from bert_tf.layers.document_windows import PackedWindowPooling, WindowPooling, WindowRows
from bert_tf.layers.heads import ClassificationHead
from bert_tf.layers.window_attention import PackedWindowAttentionPooling, WindowAttentionPooling
from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES, BertEncoder, encoder_inputs
from bert_tf.models.task_model import TaskModel

#: Packed windows' extra inputs: the document of each window slot [rows, slots], the batch's documents [docs].
WINDOW_DOCUMENT_IDS_KEY = "window_document_ids"
DOCUMENT_IDS_KEY = "document_ids"


def window_pooling_layer(pooling: str, packed: bool) -> keras.layers.Layer:
    """The layer named "window_pooling" of a `DocumentClassifier`: of the windows' logits (mean, max) or of their
    [CLS] vectors (attention), over [documents, windows] or packed slots."""
    if pooling == "attention":
        layer = PackedWindowAttentionPooling if packed else WindowAttentionPooling
        return layer(name="window_pooling")
    return (PackedWindowPooling if packed else WindowPooling)(pooling, name="window_pooling")


def document_logits(pooling_layer, head, window_vectors, *owners, training=None):
    """A document's logits from its windows' [CLS] vectors: pooled, then classified (attention), or each window
    classified, then its logits pooled (mean, max). `owners`: the pooling layer's arguments after the first."""
    if isinstance(pooling_layer, WindowAttentionPooling):
        return head(pooling_layer(window_vectors, *owners), training=training)
    return pooling_layer(head(window_vectors, training=training), *owners)


@keras.saving.register_keras_serializable(package="bert_tf")
class DocumentClassifier(TaskModel):
    """`BertClassifier`'s head on a document's windows, pooled into the document's logits.

    Every window is encoded as its own sequence (`[CLS] pieces [SEP]`). Mean or max: each window gets logits from
    the same classification layer as `BertClassifier`'s (the same weights: the attributes `encoder` and
    `classifier`), and `WindowPooling` takes their mean or maximum over the document's real windows. Attention:
    `WindowAttentionPooling` weights the windows' [CLS] vectors by a learned softmax into one, which the
    classification layer reads. Either way the loss is the document's (`bert_tf.tasks.long_text`).

    Args:
      encoder: a `BertEncoder`.
      num_classes: number of classes; 1 for regression.
      dropout_rate: dropout before the output layer; defaults to the encoder's hidden dropout.
      pooling: "mean" or "max" of the windows' logits, or "attention" over their [CLS] vectors.
      examples_per_row: None: a document's windows are rows of their own. A number k: windows packed k slots a
        row (`bert_tf.data.packed_rows.document_row_batches`), pooled per document by `PackedWindowPooling`.

    Inputs: the encoder's names, int32 [documents, windows, seq_length]; padding window slots have an all-zero
    `input_mask`. Packed: the encoder's names and `input_example_ids` [rows, seq_length],
    `window_document_ids` [rows, k] (-1: empty slot) and `document_ids` [documents] (-1: none).
    Output: float32 logits [documents, num_classes].

    >>> import numpy as np
    >>> from bert_tf import BertConfig, BertEncoder
    >>> from bert_tf.models import DocumentClassifier
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> model = DocumentClassifier(BertEncoder(config), num_classes=3, pooling="max")
    >>> word_ids = np.array([[[2, 17, 42, 3], [2, 8, 3, 0]]], "int32")  # one document, two windows
    >>> logits = model({"input_word_ids": word_ids, "input_mask": np.int32(word_ids > 0),
    ...                 "input_type_ids": np.zeros_like(word_ids)})
    >>> tuple(logits.shape)
    (1, 3)
    """

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        dropout_rate=None,
        pooling: str = "mean",
        examples_per_row=None,
        **kwargs,
    ):
        if dropout_rate is None:
            dropout_rate = encoder.config.hidden_dropout_prob
        head = ClassificationHead(
            num_classes,
            dropout_rate=dropout_rate,
            initializer_range=encoder.config.initializer_range,
            dtype=encoder.dtype_policy,
            name="classifier",
        )
        pooling_layer = window_pooling_layer(pooling, packed=examples_per_row is not None)
        if examples_per_row is None:
            inputs = {name: keras.Input(shape=(None, None), dtype="int32", name=name) for name in ENCODER_INPUT_NAMES}
            to_rows = WindowRows(name="window_rows")
            pooled = encoder({name: to_rows(value) for name, value in inputs.items()})["pooled_output"]
            logits = document_logits(pooling_layer, head, pooled, inputs["input_mask"])
        else:
            inputs = encoder_inputs(packed=True)
            inputs[WINDOW_DOCUMENT_IDS_KEY] = keras.Input(
                (examples_per_row,), dtype="int32", name=WINDOW_DOCUMENT_IDS_KEY
            )
            inputs[DOCUMENT_IDS_KEY] = keras.Input((), dtype="int32", name=DOCUMENT_IDS_KEY)
            pooled = encoder.packed_outputs(inputs, examples_per_row)["pooled_output"]
            owners = (inputs[WINDOW_DOCUMENT_IDS_KEY], inputs[DOCUMENT_IDS_KEY])
            logits = document_logits(pooling_layer, head, pooled, *owners)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.classifier = head
        # Tracked by name, as `classifier`: attention's learned weights are checkpointed under it.
        self.window_pooling = pooling_layer
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.pooling = pooling
        self.examples_per_row = examples_per_row

    def get_config(self):
        return {
            **super().get_config(),
            "num_classes": self.num_classes,
            "dropout_rate": self.dropout_rate,
            "pooling": self.pooling,
            "examples_per_row": self.examples_per_row,
        }
