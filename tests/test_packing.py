"""bert_pack_inputs: [CLS] A [SEP] B [SEP] layout, round-robin trimming, tensor seq_length."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from bert_tf.tokenization import bert_pack_inputs

CLS, SEP, PAD = 7, 8, 9  # deliberately not BERT's 101/102/0


def pack(segments, seq_length):
    return {
        k: v.numpy()
        for k, v in bert_pack_inputs(
            segments, seq_length, start_of_sequence_id=CLS, end_of_segment_id=SEP, padding_id=PAD
        ).items()
    }


def ragged(rows):
    return tf.ragged.constant(rows, dtype=tf.int32)


def round_robin(lengths, budget):
    """Hands out `budget` tokens one per segment in turn."""
    kept = [0] * len(lengths)
    while budget > 0 and any(k < n for k, n in zip(kept, lengths)):
        for i, n in enumerate(lengths):
            if budget > 0 and kept[i] < n:
                kept[i] += 1
                budget -= 1
    return kept


def expected_row(segments, seq_length):
    kept = round_robin([len(s) for s in segments], seq_length - len(segments) - 1)
    ids, types = [CLS], [0]
    for type_id, (segment, n) in enumerate(zip(segments, kept)):
        ids += list(segment[:n]) + [SEP]
        types += [type_id] * (n + 1)
    pad = seq_length - len(ids)
    return ids + [PAD] * pad, [1] * len(ids) + [0] * pad, types + [0] * pad


def test_one_segment():
    out = pack([ragged([[1, 2, 3], []])], 6)
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, 2, 3, SEP, PAD], [CLS, SEP, PAD, PAD, PAD, PAD]])
    np.testing.assert_array_equal(out["input_mask"], [[1, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(out["input_type_ids"], np.zeros((2, 6)))
    assert all(v.dtype == np.int32 for v in out.values())


def test_two_segments_type_ids():
    out = pack([ragged([[1, 2]]), ragged([[3, 4, 5]])], 9)
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, 2, SEP, 3, 4, 5, SEP, PAD]])
    np.testing.assert_array_equal(out["input_type_ids"], [[0, 0, 0, 0, 1, 1, 1, 1, 0]])
    np.testing.assert_array_equal(out["input_mask"], [[1] * 8 + [0]])


def test_three_segments_type_ids():
    out = pack([ragged([[1]]), ragged([[2]]), ragged([[3, 4]])], 8)
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, SEP, 2, SEP, 3, 4, SEP]])
    np.testing.assert_array_equal(out["input_type_ids"], [[0, 0, 0, 1, 1, 2, 2, 2]])


def test_truncation_is_round_robin():
    # Room for 5 tokens: the short segment stays whole, the long one is cut.
    out = pack([ragged([[1, 2, 3, 4, 5, 6, 7]]), ragged([[10, 11]])], 8)
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, 2, 3, SEP, 10, 11, SEP]])
    out = pack([ragged([[1, 2, 3, 4]]), ragged([[10, 11, 12, 13]])], 8)
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, 2, 3, SEP, 10, 11, SEP]])


@settings(max_examples=40, deadline=None)
@given(data=st.data(), num_segments=st.integers(1, 3), seq_length=st.integers(4, 12))
def test_matches_round_robin_model(data, num_segments, seq_length):
    batch = data.draw(st.integers(1, 4))
    segments = [
        [data.draw(st.lists(st.integers(10, 99), max_size=9)) for _ in range(batch)] for _ in range(num_segments)
    ]
    out = pack([tf.ragged.constant(s, dtype=tf.int32, ragged_rank=1) for s in segments], seq_length)
    for row in range(batch):
        ids, mask, types = expected_row([s[row] for s in segments], seq_length)
        assert out["input_word_ids"][row].tolist() == ids
        assert out["input_mask"][row].tolist() == mask
        assert out["input_type_ids"][row].tolist() == types


def test_an_empty_batch_and_all_empty_segments_pack():
    empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    assert all(v.shape == (0, 5) for v in pack([empty, empty], 5).values())
    out = pack([ragged([[], []]), ragged([[], []])], 5)
    assert out["input_word_ids"].tolist() == [[CLS, SEP, SEP, PAD, PAD]] * 2
    assert out["input_mask"].tolist() == [[1, 1, 1, 0, 0]] * 2
    assert out["input_type_ids"].tolist() == [[0, 0, 1, 0, 0]] * 2


def test_seq_length_as_tensor_in_one_graph():
    fn = tf.function(
        lambda a, b, n: bert_pack_inputs([a, b], n, CLS, SEP, PAD)["input_word_ids"],
        input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)] * 2 + [tf.TensorSpec([], tf.int32)],
    )
    a, b = ragged([[1, 2, 3]]), ragged([[4, 5]])
    assert fn(a, b, tf.constant(10)).shape == (1, 10)
    np.testing.assert_array_equal(fn(a, b, tf.constant(6)), [[CLS, 1, 2, SEP, 4, SEP]])
    assert len(fn._list_all_concrete_functions()) == 1


def test_words_and_dense_inputs_are_accepted():
    words = tf.RaggedTensor.from_nested_row_lengths([1, 2, 3], [[2], [2, 1]])  # [[[1, 2], [3]]]
    out = pack([tf.cast(words, tf.int64), tf.constant([[4, 5]])], 8)
    np.testing.assert_array_equal(out["input_word_ids"], [[CLS, 1, 2, 3, SEP, 4, 5, SEP]])


@pytest.mark.parametrize("segments", [[], [ragged([[1]])] * 4])
def test_segment_count_is_checked(segments):
    with pytest.raises(ValueError, match="1 to 3 segments"):
        pack(segments, 8)


def test_seq_length_too_small():
    with pytest.raises(ValueError, match="seq_length=2"):
        pack([ragged([[1]]), ragged([[2]])], 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="no room"):
        pack([ragged([[1]]), ragged([[2]])], tf.constant(2))


def test_batch_sizes_must_agree():
    with pytest.raises(ValueError, match="different batch sizes"):
        pack([ragged([[1], [2]]), ragged([[3]])], 6)
    fn = tf.function(
        lambda a, b: bert_pack_inputs([a, b], 6, CLS, SEP, PAD),
        input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)] * 2,
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="different batch size"):
        fn(ragged([[1], [2]]), ragged([[3]]))


def test_non_integer_segments_are_rejected():
    with pytest.raises(ValueError, match="integer token ids"):
        pack([tf.ragged.constant([["a"]])], 4)
