"""Gathering hidden states at given sequence positions."""

from keras import ops


def gather_positions(sequence, positions):
    """Picks `sequence[b, positions[b, p]]` for every batch row b.

    Args:
      sequence: float [batch, seq_length, width].
      positions: int [batch, num_positions].

    Returns:
      float [batch, num_positions, width].
    """
    batch_size, seq_length, width = ops.shape(sequence)[0], ops.shape(sequence)[1], ops.shape(sequence)[2]
    # A flat gather works identically on every backend and on TPU.
    offsets = ops.arange(batch_size, dtype="int32")[:, None] * ops.cast(seq_length, "int32")
    flat_positions = ops.reshape(ops.cast(positions, "int32") + offsets, (-1,))
    flat_sequence = ops.reshape(sequence, (-1, width))
    gathered = ops.take(flat_sequence, flat_positions, axis=0)
    return ops.reshape(gathered, (batch_size, ops.shape(positions)[1], width))
