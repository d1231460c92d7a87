"""Packing tokenized segments into BERT's fixed-length inputs."""

import tensorflow as tf

MAX_SEGMENTS = 3


def _as_2d_ragged(segment, index):
    if not isinstance(segment, tf.RaggedTensor):
        segment = tf.convert_to_tensor(segment)
        if segment.shape.rank != 2:
            raise ValueError(f"Segment {index} must be [batch, (tokens)], got shape {segment.shape}")
        segment = tf.RaggedTensor.from_tensor(segment)
    if segment.shape.rank == 3:
        # [batch, (words), (pieces)], as TF Hub tokenizers return.
        segment = segment.merge_dims(1, 2)
    if segment.shape.rank != 2:
        raise ValueError(f"Segment {index} must be [batch, (tokens)], got shape {segment.shape}")
    if not segment.dtype.is_integer:
        raise ValueError(f"Segment {index} must hold integer token ids, got {segment.dtype.name}")
    return tf.cast(segment, tf.int32)


def _batch_size_checks(segments):
    """Static error, or run-time assertions, for segments of unequal batch size.

    The trimming and combining ops read out of bounds on mismatched batches
    instead of failing, so this must run first.
    """
    sizes = [s.shape[0] for s in segments]
    if None not in sizes:
        if len(set(sizes)) > 1:
            raise ValueError(f"Segments have different batch sizes: {sizes}")
        return []
    return [
        tf.debugging.assert_equal(
            segment.nrows(), segments[0].nrows(), message=f"Segment {i} has a different batch size than segment 0"
        )
        for i, segment in enumerate(segments[1:], start=1)
    ]


def _after(checks, segment):
    checks = [c for c in checks if c is not None]  # eager assertions have already run
    if not checks:
        return segment
    with tf.control_dependencies(checks):
        return tf.RaggedTensor.from_row_splits(
            tf.identity(segment.values), tf.identity(segment.row_splits), validate=False
        )


def bert_pack_inputs(segments, seq_length, start_of_sequence_id, end_of_segment_id, padding_id):
    """Packs 1-3 token segments into `[CLS] A [SEP] B [SEP] C [SEP]`, padded.

    When the segments do not fit, the room is handed out one token per
    segment in turn (so a short segment stays whole and the long ones are
    cut), like TF Hub's BERT preprocessors (tensorflow_text's
    `RoundRobinTrimmer`). Built from dense core ops only (no TF Text op), so
    it traces fast and converts to LiteRT's built-in ops.

    Args:
      segments: list of 1 to 3 int RaggedTensors [batch, (tokens)] (or
        [batch, (words), (pieces)]), without special tokens.
      seq_length: output length; a Python int or an int32 scalar tensor. At
        least `len(segments) + 1` (room for [CLS] and the [SEP]s).
      start_of_sequence_id, end_of_segment_id, padding_id: ids of [CLS],
        [SEP], [PAD].

    Returns:
      dict of int32 [batch, seq_length] tensors: `input_word_ids`,
      `input_mask` (1 for real tokens), `input_type_ids` (0 for [CLS] A
      [SEP], 1 for B [SEP], 2 for C [SEP], 0 for padding).
    """
    if isinstance(segments, (tf.Tensor, tf.RaggedTensor)):
        segments = [segments]
    segments = list(segments)
    if not 1 <= len(segments) <= MAX_SEGMENTS:
        raise ValueError(f"Expected 1 to {MAX_SEGMENTS} segments, got {len(segments)}")
    segments = [_as_2d_ragged(s, i) for i, s in enumerate(segments)]
    checks = _batch_size_checks(segments)
    num_special = len(segments) + 1
    if isinstance(seq_length, int):
        if seq_length < num_special:
            raise ValueError(
                f"seq_length={seq_length} leaves no room for [CLS] and "
                f"{len(segments)} [SEP] token(s); need at least {num_special}"
            )
        seq_length = tf.constant(seq_length, tf.int32)
    else:
        seq_length = tf.cast(seq_length, tf.int32)
        checks.append(
            tf.debugging.assert_greater_equal(
                seq_length,
                num_special,
                message=f"seq_length leaves no room for [CLS] and {len(segments)} [SEP] token(s)",
            )
        )
    segments = [_after(checks, s) for s in segments]
    kept = _round_robin_lengths([tf.cast(s.row_lengths(), tf.int32) for s in segments], seq_length - num_special)
    return _combine_and_pad(segments, kept, seq_length, start_of_sequence_id, end_of_segment_id, padding_id)


def _round_robin_lengths(lengths, budget):
    """How many tokens of each segment fit in `budget`, handed out one per segment in turn.

    Args:
      lengths: list of k int32 [batch] segment lengths.
      budget: int32 scalar, the tokens there is room for.

    Returns:
      int32 [batch, k]. After `level` full rounds each segment holds min(length, level), where `level` is the
      most rounds that fit: sum(min(length, level)) <= budget, which is max over j of (budget - the j
      shortest lengths) // (k - j); the tokens left over go one each to the first segments longer than `level`.
    """
    lengths = tf.stack(lengths, axis=1)  # [batch, k]
    k = lengths.shape[1]
    shortest_first = tf.cumsum(tf.sort(lengths, axis=1), axis=1, exclusive=True)
    level = tf.reduce_max((budget - shortest_first) // tf.range(k, 0, -1), axis=1, keepdims=True)
    kept = tf.minimum(lengths, level)
    left_over = budget - tf.reduce_sum(kept, axis=1, keepdims=True)
    longer = tf.cast(lengths > level, tf.int32)
    return kept + longer * tf.cast(tf.cumsum(longer, axis=1, exclusive=True) < left_over, tf.int32)


def _combine_and_pad(segments, kept, seq_length, start_of_sequence_id, end_of_segment_id, padding_id):
    """`[CLS] A [SEP] B [SEP] ...` padded to `seq_length`, from each segment's first `kept[:, i]` tokens.

    Each output position looks up its token in a dense copy of its segment: a few ops per segment, where
    tensorflow_text's trimmer and its ragged `combine_segments` and `pad_model_inputs` build hundreds, which
    made every SavedModel trace of the packer slow (an export traces it six times).
    """
    positions = tf.range(seq_length)[tf.newaxis, :]  # [1, seq_length]
    shape = tf.stack([segments[0].nrows(out_type=tf.int32), seq_length])
    word_ids = tf.broadcast_to(tf.where(positions == 0, start_of_sequence_id, padding_id), shape)
    type_ids = tf.zeros(shape, tf.int32)
    start = tf.ones([shape[0], 1], tf.int32)  # where the next segment begins in each row
    for type_id, segment in enumerate(segments):
        length = kept[:, type_id : type_id + 1]
        # One padding column, so that the gather has a column to read for an all-empty segment.
        tokens = tf.pad(segment.to_tensor(default_value=padding_id), [[0, 0], [0, 1]], constant_values=padding_id)
        offset = positions - start  # [batch, seq_length]: the position's index inside this segment
        index = tf.clip_by_value(offset, 0, tf.shape(tokens)[1] - 1)
        inside = (offset >= 0) & (offset < length)
        word_ids = tf.where(inside, tf.gather(tokens, index, batch_dims=1), word_ids)
        word_ids = tf.where(offset == length, end_of_segment_id, word_ids)
        type_ids = tf.where((offset >= 0) & (offset <= length), type_id, type_ids)
        start += length + 1
    return {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(positions < start, tf.int32),
        "input_type_ids": type_ids,
    }
