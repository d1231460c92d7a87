"""A document read in windows: its windows as rows of one batch, and the windows' logits pooled per document."""

import keras
from keras import ops

#: Poolings of the windows' logits (`WindowPooling`); `bert_tf.layers.window_attention` pools their vectors.
LOGIT_POOLINGS = ("mean", "max")


def real_windows(input_mask):
    """float32 [documents, windows]: 1 for a window whose first position ([CLS]) is unmasked, 0 for a padding slot."""
    return ops.cast(input_mask[:, :, 0] > 0, "float32")


def window_members(window_document_ids, document_ids):
    """float32 [documents, rows * slots]: 1 where a packed slot's window belongs to the document (-1: none)."""
    owners = ops.reshape(ops.cast(window_document_ids, "int32"), (-1,))
    documents = ops.cast(document_ids, "int32")
    member = ops.logical_and(ops.equal(documents[:, None], owners[None, :]), documents[:, None] >= 0)
    return ops.cast(member, "float32")


def _check_pooling(pooling: str) -> str:
    if pooling not in LOGIT_POOLINGS:
        raise ValueError(f"pooling must be one of {LOGIT_POOLINGS}, got {pooling!r}.")
    return pooling


@keras.saving.register_keras_serializable(package="bert_tf")
class WindowRows(keras.layers.Layer):
    """[documents, windows, seq_length] -> [documents * windows, seq_length]: each window a row of the encoder.

    >>> import numpy as np
    >>> rows = WindowRows()(np.arange(24, dtype="int32").reshape(2, 3, 4))
    >>> tuple(rows.shape)
    (6, 4)
    """

    def call(self, windows):
        return ops.reshape(windows, (-1, ops.shape(windows)[-1]))

    def compute_output_shape(self, input_shape):
        rows = None if None in input_shape[:2] else input_shape[0] * input_shape[1]
        return (rows, input_shape[-1])


@keras.saving.register_keras_serializable(package="bert_tf")
class WindowPooling(keras.layers.Layer):
    """The logits of a document from those of its windows: their mean or their (per-class) maximum.

    Args:
      pooling: "mean" or "max".

    Call args:
      window_logits: [documents * windows, classes], the windows in `WindowRows`' order.
      input_mask: [documents, windows, seq_length]; a window whose first position ([CLS]) is masked is a padding
        slot and does not count.

    Returns:
      float32 [documents, classes]; a document without windows (a padding row) gets zeros.

    >>> import numpy as np
    >>> mask = np.array([[[1, 1], [1, 0]], [[1, 1], [0, 0]]], "int32")  # the second document: one window
    >>> logits = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0], [9.0, 9.0]], "float32")
    >>> np.asarray(WindowPooling("mean")(logits, mask)).tolist()
    [[2.0, 1.0], [5.0, 4.0]]
    >>> np.asarray(WindowPooling("max")(logits, mask)).tolist()
    [[3.0, 2.0], [5.0, 4.0]]
    """

    def __init__(self, pooling: str = "mean", **kwargs):
        super().__init__(**kwargs)
        self.pooling = _check_pooling(pooling)

    def call(self, window_logits, input_mask):
        shape = ops.shape(input_mask)
        classes = window_logits.shape[-1] or -1  # static where known: [documents, classes] keeps it
        logits = ops.reshape(ops.cast(window_logits, "float32"), (shape[0], shape[1], classes))
        real = real_windows(input_mask)[:, :, None]  # [documents, windows, 1]
        count = ops.sum(real, axis=1)
        if self.pooling == "mean":
            return ops.sum(logits * real, axis=1) / ops.maximum(count, 1.0)
        largest = ops.max(ops.where(real > 0, logits, ops.full_like(logits, -1e9)), axis=1)
        return ops.where(count > 0, largest, ops.zeros_like(largest))

    def compute_output_shape(self, window_logits_shape, input_mask_shape):
        return (input_mask_shape[0], window_logits_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling}


@keras.saving.register_keras_serializable(package="bert_tf")
class PackedWindowPooling(keras.layers.Layer):
    """`WindowPooling` for windows packed into rows: the logits of each document of a batch from its windows' slots.

    A one-hot [documents, slots] match of ids (no gather, no static length), so it runs on any backend.

    Args:
      pooling: "mean" or "max".

    Call args:
      slot_logits: [rows, slots, classes], a packed `BertClassifier`'s logits (one window a slot).
      window_document_ids: int [rows, slots]: the document of each slot's window; -1 for an empty slot.
      document_ids: int [documents]: the batch's documents, in order; -1 for a missing one (zeros).

    Returns:
      float32 [documents, classes].

    >>> import numpy as np
    >>> logits = np.array([[[1.0], [3.0]], [[5.0], [0.0]]], "float32")  # 2 rows of 2 slots
    >>> owners = np.array([[7, 4], [7, -1]], "int32")  # document 7: slots (0, 0) and (1, 0)
    >>> np.asarray(PackedWindowPooling("mean")(logits, owners, np.array([7, 4, -1], "int32"))).tolist()
    [[3.0], [3.0], [0.0]]
    """

    def __init__(self, pooling: str = "mean", **kwargs):
        super().__init__(**kwargs)
        self.pooling = _check_pooling(pooling)

    def call(self, slot_logits, window_document_ids, document_ids):
        logits = ops.cast(slot_logits, "float32")
        logits = ops.reshape(logits, (-1, ops.shape(logits)[-1]))  # [rows * slots, classes]
        member = window_members(window_document_ids, document_ids)  # [documents, rows * slots]
        count = ops.sum(member, axis=1, keepdims=True)
        if self.pooling == "mean":
            return ops.matmul(member, logits) / ops.maximum(count, 1.0)
        largest = ops.max(ops.where(member[:, :, None] > 0, logits[None, :, :], -1e9), axis=1)
        return ops.where(count > 0, largest, ops.zeros_like(largest))

    def compute_output_shape(self, slot_logits_shape, window_document_ids_shape, document_ids_shape):
        return (document_ids_shape[0], slot_logits_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling}
