"""A learned attention pooling of a document's windows' [CLS] vectors into one vector (before the head)."""

import keras
from keras import ops

from bert_tf.layers.document_windows import real_windows, window_members


def masked_softmax(scores, member):
    """Softmax of `scores` along the last axis over the entries where `member` is 1 (float32, same shape); a row
    without members gets zeros."""
    scores = ops.where(member > 0, scores, ops.full_like(scores, -1e9))
    weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True)) * member
    return weights / ops.maximum(ops.sum(weights, axis=-1, keepdims=True), 1e-30)


@keras.saving.register_keras_serializable(package="bert_tf")
class WindowAttentionPooling(keras.layers.Layer):
    """A document's vector: its windows' [CLS] vectors weighted by a softmax of learned scores over its real windows.

    Each window's score is a learned linear projection of its vector (a `Dense(1)` named `score`), zero at
    initialization, so an untrained pooling is the plain mean of the vectors (and, under an affine head, the mean
    of the windows' logits). Padding window slots get no weight; a document without windows gets zeros.

    Call args:
      window_vectors: [documents * windows, hidden], the windows in `WindowRows`' order.
      input_mask: [documents, windows, seq_length]; a window whose [CLS] is masked is a padding slot.

    Returns:
      float32 [documents, hidden].

    >>> import numpy as np
    >>> mask = np.array([[[1, 1], [1, 0]], [[1, 1], [0, 0]]], "int32")  # the second document: one window
    >>> vectors = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0], [9.0, 9.0]], "float32")
    >>> np.asarray(WindowAttentionPooling()(vectors, mask)).tolist()  # untrained: the mean
    [[2.0, 1.0], [5.0, 4.0]]
    """

    def build(self, vectors_shape, *owners_shapes):
        self.score = keras.layers.Dense(1, kernel_initializer="zeros", dtype="float32", name="score")
        self.score.build((None, vectors_shape[-1]))

    def call(self, window_vectors, input_mask):
        shape = ops.shape(input_mask)
        hidden = window_vectors.shape[-1] or ops.shape(window_vectors)[-1]
        vectors = ops.reshape(ops.cast(window_vectors, "float32"), (shape[0], shape[1], hidden))
        weights = masked_softmax(self.score(vectors)[:, :, 0], real_windows(input_mask))  # [documents, windows]
        return ops.einsum("dw,dwh->dh", weights, vectors)

    def compute_output_shape(self, window_vectors_shape, input_mask_shape):
        return (input_mask_shape[0], window_vectors_shape[-1])


@keras.saving.register_keras_serializable(package="bert_tf")
class PackedWindowAttentionPooling(WindowAttentionPooling):
    """`WindowAttentionPooling` for windows packed into rows, each document's softmax over its own windows' slots.

    Call args: `PackedWindowPooling`'s, with `slot_vectors` [rows, slots, hidden] (a packed encoder's [CLS]
    vector of each slot's window) for its logits; returns float32 [documents, hidden], zeros for document -1.

    >>> import numpy as np
    >>> vectors = np.array([[[2.0, 0.0], [4.0, 1.0]], [[6.0, 2.0], [8.0, 3.0]]], "float32")
    >>> owners = np.array([[0, 1], [0, -1]], "int32")  # document 0: slots (0, 0) and (1, 0)
    >>> np.asarray(PackedWindowAttentionPooling()(vectors, owners, np.array([1, 0], "int32"))).tolist()
    [[4.0, 1.0], [4.0, 1.0]]
    """

    def call(self, slot_vectors, window_document_ids, document_ids):
        hidden = slot_vectors.shape[-1] or ops.shape(slot_vectors)[-1]
        vectors = ops.reshape(ops.cast(slot_vectors, "float32"), (-1, hidden))  # [rows * slots, hidden]
        member = window_members(window_document_ids, document_ids)  # [documents, rows * slots]
        scores = ops.broadcast_to(self.score(vectors)[None, :, 0], ops.shape(member))
        return ops.matmul(masked_softmax(scores, member), vectors)

    def compute_output_shape(self, slot_vectors_shape, window_document_ids_shape, document_ids_shape):
        return (document_ids_shape[0], slot_vectors_shape[-1])
