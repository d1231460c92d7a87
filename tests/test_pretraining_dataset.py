"""Tests of bert_tf.data.pretraining_dataset and dynamic masking."""

import collections
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.dynamic_masking import DynamicMaskingConfig
from bert_tf.data.pretraining_dataset import pretraining_dataset
from bert_tf.pretraining_data import instances as pi
from bert_tf.pretraining_data import writer

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "pretraining"
SAMPLE = FIXTURES / "austen_sample.txt"
VOCAB = FIXTURES / "vocab.txt"
SEQ = 64
PREDICTIONS = 10
KEYS = {
    "input_word_ids": tf.int32,
    "input_mask": tf.int32,
    "input_type_ids": tf.int32,
    "masked_lm_positions": tf.int32,
    "masked_lm_ids": tf.int32,
    "masked_lm_weights": tf.float32,
    "next_sentence_labels": tf.int32,
}


def _write(directory, num_files, **config):
    directory.mkdir(parents=True, exist_ok=True)
    outputs = [str(directory / f"part-{i}.tfrecord") for i in range(num_files)]
    compression = config.pop("compression", None)
    summary = writer.write_pretraining_data(
        [str(SAMPLE)],
        outputs,
        str(VOCAB),
        pi.InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, **config),
        num_workers=1,
        compression=compression,
    )
    return outputs, summary.stats.num_instances


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    return {
        "masked": _write(root / "masked", 4, dupe_factor=2),
        "unmasked": _write(root / "unmasked", 1, dupe_factor=2, do_masking=False),
        "gzip": _write(root / "gzip", 1, dupe_factor=1, compression="GZIP"),
    }


@pytest.fixture(scope="module")
def special_ids():
    from bert_tf.tokenization import load_vocab

    vocab = load_vocab(str(VOCAB))
    return {t: vocab.index(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")}, len(vocab)


def _all(dataset):
    out = collections.defaultdict(list)
    for batch in dataset:
        for key, value in batch.items():
            out[key].append(value.numpy())
    return {key: np.concatenate(values) for key, values in out.items()}


def _eval(paths, **kwargs):
    return pretraining_dataset(
        paths,
        batch_size=kwargs.pop("batch_size", 32),
        seq_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        training=False,
        drop_remainder=False,
        **kwargs,
    )


def _raw(paths, compression=""):
    spec = {
        "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([PREDICTIONS], tf.int64),
    }
    dataset = tf.data.TFRecordDataset(paths, compression_type=compression).batch(100000)
    return {k: v.numpy() for k, v in next(iter(dataset.map(lambda r: tf.io.parse_example(r, spec)))).items()}


def _rows(array):
    return sorted(map(tuple, array.tolist()))


def test_training_batches_have_model_garden_keys_shapes_and_dtypes(files):
    paths, _ = files["masked"]
    dataset = pretraining_dataset(
        ",".join(paths), batch_size=16, seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, seed=1
    )
    batch = next(iter(dataset))
    assert {k: v.dtype for k, v in batch.items()} == KEYS
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        assert batch[key].shape == (16, SEQ)
    for key in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        assert batch[key].shape == (16, PREDICTIONS)
    assert batch["next_sentence_labels"].shape == (16,)
    assert dataset.element_spec["input_word_ids"].shape == (16, SEQ)  # static: drop_remainder
    assert dataset.options().autotune.enabled is False  # bert_tf.prefetching


def test_reads_every_record_written_by_the_writer_once(files):
    paths, count = files["masked"]
    data = _all(_eval(paths))
    raw = _raw(paths)
    assert len(data["input_word_ids"]) == count == len(raw["input_ids"])
    assert _rows(data["input_word_ids"]) == _rows(raw["input_ids"])
    assert _rows(data["masked_lm_ids"]) == _rows(raw["masked_lm_ids"])
    # Training mode repeats: more batches than one epoch holds.
    training = pretraining_dataset(paths, 64, SEQ, PREDICTIONS, seed=0)
    assert sum(1 for _ in training.take(count // 64 + 5)) == count // 64 + 5


def test_reads_a_record_written_like_google_research_bert(tmp_path):
    """An Example built by hand with the original script's feature order and types."""

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    input_ids = [2, 17, 4, 19, 3, 23, 29, 3] + [0] * (SEQ - 8)
    features = collections.OrderedDict()
    features["input_ids"] = ints(input_ids)
    features["input_mask"] = ints([1] * 8 + [0] * (SEQ - 8))
    features["segment_ids"] = ints([0] * 5 + [1] * 3 + [0] * (SEQ - 8))
    features["masked_lm_positions"] = ints([2, 6] + [0] * (PREDICTIONS - 2))
    features["masked_lm_ids"] = ints([18, 31] + [0] * (PREDICTIONS - 2))
    features["masked_lm_weights"] = tf.train.Feature(
        float_list=tf.train.FloatList(value=[1.0, 1.0] + [0.0] * (PREDICTIONS - 2))
    )
    features["next_sentence_labels"] = ints([1])
    path = tmp_path / "original.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        example = tf.train.Example(features=tf.train.Features(feature=features))
        writer.write(example.SerializeToString())
    batch = next(iter(_eval(str(path))))
    assert batch["input_word_ids"].numpy()[0].tolist() == input_ids
    assert batch["input_type_ids"].numpy()[0, :8].tolist() == [0] * 5 + [1] * 3
    assert batch["masked_lm_positions"].numpy()[0, :3].tolist() == [2, 6, 0]
    assert batch["masked_lm_ids"].numpy()[0, :3].tolist() == [18, 31, 0]
    assert batch["masked_lm_weights"].numpy()[0, :3].tolist() == [1.0, 1.0, 0.0]
    assert batch["next_sentence_labels"].numpy().tolist() == [1]


def test_input_context_shards_files_or_records(files):
    paths, count = files["masked"]

    def read(paths, pipelines, pipeline_id):
        context = tf.distribute.InputContext(
            num_input_pipelines=pipelines, input_pipeline_id=pipeline_id, num_replicas_in_sync=pipelines
        )
        return _all(_eval(paths, input_context=context, batch_size=6))["input_word_ids"]

    for shard_paths, pipelines in [(paths, 2), (paths[:1], 3)]:  # 4 files / 2: files; 1 file / 3: records
        parts = [read(shard_paths, pipelines, i) for i in range(pipelines)]
        everything = _rows(_raw(shard_paths)["input_ids"])
        assert sorted(sum((_rows(p) for p in parts), [])) == everything
        assert all(abs(len(p) - len(everything) / pipelines) <= len(everything) / pipelines * 0.5 for p in parts)
    # The global batch is split over replicas.
    context = tf.distribute.InputContext(2, 0, 2)
    dataset = pretraining_dataset(paths, 8, SEQ, PREDICTIONS, input_context=context, seed=0)
    assert next(iter(dataset))["input_word_ids"].shape == (4, SEQ)


def test_seeded_order_is_deterministic(files):
    paths, _ = files["masked"]

    def first_batches(seed):
        dataset = pretraining_dataset(paths, 8, SEQ, PREDICTIONS, seed=seed, shuffle_buffer_size=500)
        return [b["input_word_ids"].numpy() for b in dataset.take(4)]

    first = first_batches(3)
    assert all(np.array_equal(a, b) for a, b in zip(first, first_batches(3)))
    assert not all(np.array_equal(a, b) for a, b in zip(first, first_batches(4)))


def test_iterator_checkpoint_resumes_mid_epoch(files, special_ids, tmp_path):
    ids, vocab_size = special_ids
    config = DynamicMaskingConfig(
        vocab_size=vocab_size, mask_token_id=ids["[MASK]"], unselectable_ids=(ids["[PAD]"], ids["[CLS]"], ids["[SEP]"])
    )
    paths, _ = files["masked"]
    dataset = pretraining_dataset(paths, 8, SEQ, PREDICTIONS, seed=5, shuffle_buffer_size=200, dynamic_masking=config)
    iterator = iter(dataset)
    for _ in range(3):
        next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    saved = checkpoint.save(str(tmp_path / "ckpt"))
    after = [next(iterator) for _ in range(3)]
    checkpoint.restore(saved)
    again = [next(iterator) for _ in range(3)]
    for a, b in zip(after, again):
        for key in a:
            np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())


def test_clear_errors_name_patterns_and_files(files, tmp_path):
    with pytest.raises(ValueError, match=r"nothing-\*.*matches no file"):
        pretraining_dataset([str(tmp_path / "nothing-*")], 8, SEQ, PREDICTIONS)
    paths, _ = files["masked"]
    with pytest.raises(
        ValueError,
        match=r"part-0.tfrecord: feature 'input_ids' has length 64 but "
        r"seq_length=128",
    ):
        pretraining_dataset(paths, 8, 128, PREDICTIONS)
    with pytest.raises(
        ValueError,
        match=r"part-0.tfrecord: feature 'masked_lm_positions' has length "
        r"10 but max_predictions_per_seq=20",
    ):
        pretraining_dataset(paths, 8, SEQ, 20)
    text = tmp_path / "not_records.tfrecord"
    text.write_text("this is not a TFRecord file\n" * 10)
    with pytest.raises(ValueError, match="not_records.tfrecord: cannot read as a TFRecord file"):
        pretraining_dataset(str(text), 8, SEQ, PREDICTIONS)


def test_gzip_is_detected(files):
    paths, count = files["gzip"]
    assert len(_all(_eval(paths))["input_word_ids"]) == count
    assert len(_all(_eval(paths, compression="GZIP"))["input_word_ids"]) == count


def _selectable(batch, ids):
    word_ids = batch["input_word_ids"]
    return (batch["input_mask"] > 0) & ~np.isin(word_ids, [ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]])


def test_dynamic_masking_statistics(files, special_ids):
    ids, vocab_size = special_ids
    config = DynamicMaskingConfig(
        vocab_size=vocab_size, mask_token_id=ids["[MASK]"], unselectable_ids=(ids["[PAD]"], ids["[CLS]"], ids["[SEP]"])
    )
    paths, count = files["unmasked"]
    original = _all(_eval(paths))
    assert not original["masked_lm_weights"].any()  # written unmasked
    masked = _all(_eval(paths, dynamic_masking=config, seed=11))
    # Same records, same order (eval mode): compare row by row.
    np.testing.assert_array_equal(masked["input_mask"], original["input_mask"])
    np.testing.assert_array_equal(masked["next_sentence_labels"], original["next_sentence_labels"])
    real = masked["masked_lm_weights"] > 0
    selectable = _selectable(original, ids)
    expected = np.minimum(PREDICTIONS, np.ceil(selectable.sum(axis=1).astype(np.float32) * np.float32(0.15)))
    np.testing.assert_array_equal(real.sum(axis=1), expected)
    rows = np.broadcast_to(np.arange(len(real))[:, None], real.shape)
    positions = masked["masked_lm_positions"]
    # Only selectable positions, labels are the original tokens.
    assert selectable[rows[real], positions[real]].all()
    np.testing.assert_array_equal(
        masked["masked_lm_ids"][real], original["input_word_ids"][rows[real], positions[real]]
    )
    # Unselected positions are untouched.
    touched = np.zeros_like(selectable)
    touched[rows[real], positions[real]] = True
    np.testing.assert_array_equal(masked["input_word_ids"][~touched], original["input_word_ids"][~touched])
    now = masked["input_word_ids"][rows[real], positions[real]]
    labels = masked["masked_lm_ids"][real]
    assert real.sum() > 2000
    assert abs(np.mean(now == ids["[MASK]"]) - 0.8) < 0.03
    assert abs(np.mean(now == labels) - 0.1) < 0.03
    assert abs(np.mean((now != labels) & (now != ids["[MASK]"])) - 0.1) < 0.03
    # Another seed (another epoch) draws other masks; the same seed the same ones.
    again = _all(_eval(paths, dynamic_masking=config, seed=11))
    other = _all(_eval(paths, dynamic_masking=config, seed=12))
    np.testing.assert_array_equal(again["masked_lm_positions"], positions)
    assert np.mean(other["masked_lm_positions"] != positions) > 0.5


def test_dynamic_masking_restores_statically_masked_records_first(files, special_ids):
    ids, vocab_size = special_ids
    config = DynamicMaskingConfig.from_vocab_file(str(VOCAB), masked_lm_prob=0.2)
    assert config.mask_token_id == ids["[MASK]"] and config.vocab_size == vocab_size
    paths, _ = files["masked"]
    static = _all(_eval(paths[:1]))
    dynamic = _all(_eval(paths[:1], dynamic_masking=config, seed=0))
    # The original text: static input with the static labels put back.
    text = static["input_word_ids"].copy()
    real = static["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(text))[:, None], real.shape)
    text[rows[real], static["masked_lm_positions"][real]] = static["masked_lm_ids"][real]
    new = dynamic["masked_lm_weights"] > 0
    np.testing.assert_array_equal(dynamic["masked_lm_ids"][new], text[rows[new], dynamic["masked_lm_positions"][new]])
    selectable = _selectable({"input_word_ids": text, "input_mask": static["input_mask"]}, ids)
    expected = np.minimum(PREDICTIONS, np.ceil(selectable.sum(axis=1).astype(np.float32) * np.float32(0.2)))
    np.testing.assert_array_equal(new.sum(axis=1), expected)
    with pytest.raises(ValueError, match="mask_token_rate"):
        DynamicMaskingConfig(vocab_size=10, mask_token_id=3, unselectable_ids=(0,), mask_token_rate=0.95)
