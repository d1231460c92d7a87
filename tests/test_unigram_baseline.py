"""The masked LM's unigram baseline, on records whose answer is known by construction."""

import math

import tensorflow as tf

from bert_tf.data.unigram_baseline import next_sentence_baseline, unigram_baseline

SEQ, PREDICTIONS, VOCAB = 8, 3, 20


def _record(masked_ids, weights, next_sentence_label=0):
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    features = {
        "input_ids": ints([2, 5, 4, 6, 3, 8, 3, 0]),
        "input_mask": ints([1] * 7 + [0]),
        "segment_ids": ints([0] * 5 + [1, 1, 0]),
        "masked_lm_positions": ints([1, 2, 3]),
        "masked_lm_ids": ints(masked_ids),
        "next_sentence_labels": ints([next_sentence_label]),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights)),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _write(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def test_unigram_baseline_counts_only_real_predictions(tmp_path):
    # Training labels: 7 three times, 9 once; the zero-weight slots (ids 0 and 9) are padding.
    train = _write(tmp_path / "train.tfrecord", [_record([7, 7, 0], [1, 1, 0]), _record([7, 9, 9], [1, 1, 0])])
    # Held-out labels: 7, 9, 9, 11 (and a padded 7).
    held_out = _write(tmp_path / "eval.tfrecord", [_record([7, 9, 7], [1, 1, 0]), _record([9, 11, 0], [1, 1, 0])])
    baseline = unigram_baseline(train, held_out, SEQ, PREDICTIONS, VOCAB)
    assert (baseline.train_predictions, baseline.eval_predictions, baseline.most_frequent_id) == (4, 4, 7)
    assert baseline.accuracy == 0.25
    # Add-one smoothing over 20 ids: p(7) = 4/24, p(9) = 2/24, p(11) = 1/24.
    expected_loss = -(math.log(4 / 24) + 2 * math.log(2 / 24) + math.log(1 / 24)) / 4
    assert abs(baseline.loss - expected_loss) < 1e-9


def test_next_sentence_baseline_is_the_label_frequencies(tmp_path):
    labels = [1, 0, 1, 1, 0, 1, 1, 1]
    path = _write(tmp_path / "eval.tfrecord", [_record([7, 7, 0], [1, 1, 0], label) for label in labels])
    baseline = next_sentence_baseline(path, SEQ, PREDICTIONS)
    assert baseline.accuracy == 6 / 8
    assert abs(baseline.loss - -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))) < 1e-9
