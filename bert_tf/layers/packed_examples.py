"""Several examples in one row: the mask, position ids and [CLS] positions that per-token example ids imply.

A packed row holds whole examples one after another, each `[CLS] ... [SEP]`, then padding:

    input_example_ids  1 1 1 1 2 2 2 3 3 0 0     (0: padding; 1..k: the row's examples in order)

Each example must then be computed as if it were alone: its tokens attend only to its own tokens (a
block-diagonal mask), its position ids restart at 0, and its label reads its own `[CLS]`. These functions
derive all three from the ids with `keras.ops` alone, so one XLA program serves every row of a static shape on
any backend. Padding tokens attend to the padding of their row (never to an example), which keeps their states
finite and no example's states depend on them.
"""

from keras import ops

# As in `bert_tf.layers.attention`: float32 scores plus this give a softmax weight of exactly zero.
_MASK_PENALTY = -1e9


def example_attention_bias(example_ids):
    """The additive float32 [batch, 1, seq, seq] bias letting each token attend only within its example.

    Args:
      example_ids: int [batch, seq_length]; 0 for padding, 1..k for the examples of the row.
    """
    same = ops.equal(example_ids[:, :, None], example_ids[:, None, :])
    return ops.cast(ops.logical_not(same), "float32")[:, None, :, :] * _MASK_PENALTY


def example_position_ids(example_ids):
    """int32 [batch, seq_length]: each token's offset from the start of its example (examples are contiguous).

    The count of earlier tokens with the same id: the same [seq, seq] comparison as the mask, no sort or scan.
    """
    same = ops.equal(example_ids[:, :, None], example_ids[:, None, :])
    # 0, 1, 2, ... from a cumulative sum rather than `arange`, which needs the length when a model is built.
    positions = ops.cumsum(ops.ones_like(example_ids, dtype="int32"), axis=1)
    earlier = ops.less(positions[:, None, :], positions[:, :, None])  # [batch, query, key]: key before query
    return ops.sum(ops.cast(ops.logical_and(same, earlier), "int32"), axis=-1)


def example_first_token_states(sequence, example_ids, num_slots: int):
    """float [batch, num_slots, width]: the state at the first token ([CLS]) of examples 1..num_slots of each row.

    `num_slots` is static, so rows holding different numbers of examples keep one shape; an empty slot reads
    zeros (the caller masks it). A one-hot product rather than a gather: exact, and it needs no static length.

    Args:
      sequence: float [batch, seq_length, width].
      example_ids: int [batch, seq_length], each example contiguous.
    """
    example_ids = ops.cast(example_ids, "int32")
    previous = ops.concatenate([ops.zeros_like(example_ids[:, :1]), example_ids[:, :-1]], axis=1)
    is_first = ops.not_equal(example_ids, previous)  # 0 -> k or k -> k + 1; padding (0 after 0) never
    slots = ops.arange(1, num_slots + 1, dtype="int32")
    pick = ops.logical_and(ops.equal(example_ids[:, None, :], slots[None, :, None]), is_first[:, None, :])
    return ops.einsum("bks,bsw->bkw", ops.cast(pick, sequence.dtype), sequence)
