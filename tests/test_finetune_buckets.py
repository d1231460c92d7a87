"""Length-bucketed batches (--nopacking): the same predictions as padding to max_seq_length, and exact resumes."""

import csv
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import length_buckets
from bert_tf.data.examples import TaggingExample, TextExample
from bert_tf.models import BertEncoder
from bert_tf.tasks.base import FEATURE_INDEX_KEY, length_bucketed_dataset
from bert_tf.tasks.classification import ClassificationTask
from bert_tf.tasks.inference import predict_outputs
from bert_tf.tasks.long_text import LongTextConfig
from bert_tf.tasks.tagging import TaggingTask
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune

MAX_SEQ_LENGTH = 48
# The job tests batch rows of texts cut to the window; the default would read the longer ones in windows.
TRUNCATE = LongTextConfig("truncate")
WIDTH = 8


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return TaskTokenizer(synthetic.write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt")))


def _long(text, rng):
    # 1 to 6 copies: packed lengths from a few pieces to past MAX_SEQ_LENGTH (trimmed), so several buckets.
    return " ".join([text] * rng.randint(1, 6))


def _examples(task_name):
    rng = random.Random(7)
    if task_name == "classification":
        return [
            TextExample(f"x{i}", _long(t, rng), None, y) for i, (t, y) in enumerate(synthetic.sentiment_rows(21, 1))
        ]
    if task_name == "sentence_pair_classification":
        rows = synthetic.pair_rows(21, 1)
        return [TextExample(f"x{i}", _long(a, rng), _long(b, rng), y) for i, (a, b, y) in enumerate(rows)]
    if task_name == "regression":
        return [TextExample(f"x{i}", _long(t, rng), None, y) for i, (t, y) in enumerate(synthetic.count_rows(21, 1))]
    sentences = synthetic.tagging_sentences(21, 1)
    sentences = [s * rng.randint(1, 8) for s in sentences]  # the longest split into several features
    return [TaggingExample(f"x{i}", tuple(w for w, _ in s), tuple(t for _, t in s)) for i, s in enumerate(sentences)]


def _task(task_name, tokenizer):
    if task_name == "token_classification":
        return TaggingTask(tokenizer, MAX_SEQ_LENGTH, ["O", "B-PER", "B-LOC", "I-LOC"], bucket_width=WIDTH)
    labels = None if task_name == "regression" else ["neg", "pos"]
    pair = task_name == "sentence_pair_classification"
    return ClassificationTask(tokenizer, MAX_SEQ_LENGTH, labels, sentence_pair=pair, bucket_width=WIDTH)


@pytest.mark.parametrize(
    "task_name", ["classification", "sentence_pair_classification", "regression", "token_classification"]
)
def test_bucketed_predictions_equal_padded_ones(task_name, tokenizer):
    task = _task(task_name, tokenizer)
    examples = _examples(task_name)
    features = task.featurize(examples, training=False)
    tf.keras.utils.set_random_seed(0)
    model = task.build_model(BertEncoder(synthetic.tiny_config()))

    def predict(bucket_width):
        task.bucket_width = bucket_width
        dataset = task.dataset(features, 4, training=False)
        lengths = {int(batch["input_mask"].shape[1]) for batch in dataset}
        outputs = predict_outputs(
            model, dataset, num_features=len(features["text_a"]) if isinstance(features, dict) else len(features)
        )
        return outputs, lengths, task.postprocess(examples, features, outputs)

    padded, padded_lengths, padded_predictions = predict(0)
    bucketed, bucketed_lengths, bucketed_predictions = predict(WIDTH)
    assert padded_lengths == {MAX_SEQ_LENGTH}
    assert len(bucketed_lengths) >= 3 and all(n % WIDTH == 0 and n <= MAX_SEQ_LENGTH for n in bucketed_lengths)
    logits, reference = bucketed["logits"], padded["logits"]
    if task_name == "token_classification":
        # Positions past a batch's bucket are padding; the real ones agree.
        mask = features.inputs["input_mask"].astype(bool)
        reference, logits = (
            reference[mask],
            np.pad(logits, [(0, 0), (0, MAX_SEQ_LENGTH - logits.shape[1]), (0, 0)])[mask],
        )
        assert bucketed_predictions == padded_predictions
    else:
        for key in padded_predictions:
            np.testing.assert_allclose(bucketed_predictions[key], padded_predictions[key], atol=1e-5)
    np.testing.assert_allclose(logits, reference, atol=1e-5)


@pytest.mark.parametrize("group_by_length", [False, True])
def test_training_batches_cover_each_epoch_in_random_or_length_grouped_order(group_by_length):
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 41, 100)

    def batches(seed, input_context=None):
        return length_buckets.training_batch_indices(
            lengths, 8, 40, WIDTH, seed, input_context, group_by_length=group_by_length, chunk_batches=4
        )

    indices = batches(5)
    epoch = list(indices.take(12))  # 100 // 8 = 12 batches an epoch; 4 examples sit out
    rows = np.concatenate([r.numpy() for r, _ in epoch])
    assert len(set(rows.tolist())) == 96
    for r, seq_length in epoch:
        assert int(seq_length) == min(40, -(-lengths[r.numpy()].max() // WIDTH) * WIDTH)
    # Random batches (the default) spread lengths as the data does; grouped ones hold near-equal lengths.
    spread_within = np.mean([lengths[r.numpy()].std() for r, _ in epoch])
    if group_by_length:
        assert spread_within < 0.4 * lengths.std()
    else:
        assert spread_within > 0.7 * lengths.std()
    # Deterministic from the seed; the next epoch is another order; another seed, another order.
    again = batches(5)
    assert all(np.array_equal(a.numpy(), b.numpy()) for (a, _), (b, _) in zip(epoch, again.take(12)))
    second = np.concatenate([r.numpy() for r, _ in indices.skip(12).take(12)])
    assert not np.array_equal(second, rows)
    assert not np.array_equal(np.concatenate([r.numpy() for r, _ in batches(6).take(12)]), rows)
    # Two input pipelines take disjoint halves of each epoch.
    halves = [
        np.concatenate([r.numpy() for r, _ in batches(5, tf.distribute.InputContext(2, i, 2)).take(6)])
        for i in range(2)
    ]
    assert sorted(np.concatenate(halves).tolist()) == sorted(rows.tolist())


@pytest.mark.parametrize("group_by_length", [False, True])
def test_saved_training_iterator_resumes_exactly(tmp_path, group_by_length):
    rng = np.random.default_rng(1)
    lengths = rng.integers(2, 33, 40)
    columns = {
        "input_word_ids": np.where(np.arange(32) < lengths[:, None], 7, 0).astype(np.int32),
        "input_mask": (np.arange(32) < lengths[:, None]).astype(np.int32),
        "label": np.arange(40, dtype=np.int32),
    }

    def dataset():
        return length_bucketed_dataset(
            columns,
            lengths,
            4,
            32,
            True,
            seed=3,
            bucket_width=WIDTH,
            group_by_length=group_by_length,
            sequence_keys=("input_word_ids", "input_mask"),
        )

    reference = [b for _, b in zip(range(25), dataset())]  # crosses two epochs
    iterator = iter(dataset())
    for _ in range(13):
        next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "it"))
    resumed = iter(dataset())
    tf.train.Checkpoint(iterator=resumed).read(path).assert_consumed()
    for expected in reference[13:]:
        batch = next(resumed)
        assert sorted(batch) == sorted(expected)
        for key in expected:
            np.testing.assert_array_equal(batch[key].numpy(), expected[key].numpy())
    assert len({int(b["input_mask"].shape[1]) for b in reference}) >= 2  # batches of several bucket lengths
    for b in reference:
        np.testing.assert_array_equal(b["input_mask"].numpy().sum(1), lengths[b[FEATURE_INDEX_KEY].numpy()])


def test_job_evaluates_the_same_bucketed_or_padded(tmp_path, caplog):
    """A model trained with buckets evaluates to the same probabilities with --bucket_width=0."""
    caplog.set_level("INFO", logger="absl")  # an earlier in-process tool may have set absl to WARNING
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    rng = random.Random(3)
    rows = [(_long(t, rng), y) for t, y in synthetic.sentiment_rows(70, 1)]
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], rows[:50])
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["text_a", "label"], rows[50:])
    # --nopacking: batches of one example a row, which the buckets pad (the default packs rows).
    common = dict(eval_file=dev, max_seq_length=MAX_SEQ_LENGTH, eval_batch_size=6, do_eval=True, seed=1, packing=False)
    common["long_text_config"] = TRUNCATE  # rows of truncated texts (the default reads these in windows)
    output_dir = str(tmp_path / "out")
    bucketed = finetune(
        "classification",
        output_dir,
        train_file=train,
        model_dir=model_dir,
        train_batch_size=8,
        num_train_steps=6,
        learning_rate=1e-3,
        do_train=True,
        bucket_width=WIDTH,
        **common,
    )
    with open(os.path.join(output_dir, "eval_predictions.tsv"), encoding="utf-8") as f:
        bucketed_rows = list(csv.reader(f, delimiter="\t"))
    # The job logs the distinct padded lengths (the shapes an XLA-compiled step compiles for).
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Length buckets")]
    assert any(m.startswith("Length buckets, training") for m in logged), logged
    assert any(m.startswith("Length buckets, inference") and "bucket width 8" in m for m in logged), logged
    padded = finetune("classification", output_dir, bucket_width=0, **common)
    with open(os.path.join(output_dir, "eval_predictions.tsv"), encoding="utf-8") as f:
        padded_rows = list(csv.reader(f, delimiter="\t"))
    assert bucketed["accuracy"] == padded["accuracy"] and bucketed["global_step"] == 6
    assert [r[:3] for r in bucketed_rows] == [r[:3] for r in padded_rows]
    np.testing.assert_allclose(
        np.array([r[3:] for r in bucketed_rows[1:]], float),
        np.array([r[3:] for r in padded_rows[1:]], float),
        atol=2e-6,
    )


def test_bad_bucket_width_is_refused():
    from bert_tf.tasks.task_config import FinetuningTaskConfig

    with pytest.raises(ValueError, match="--bucket_width"):
        FinetuningTaskConfig("classification", bucket_width=-1)


def test_data_smaller_than_a_batch_per_pipeline_is_repeated_within_each_epoch():
    lengths = np.array([5, 9, 30])
    halves = [
        length_buckets.training_batch_indices(lengths, 4, 32, WIDTH, 1, tf.distribute.InputContext(2, i, 2))
        for i in range(2)
    ]
    for half in halves:
        for rows, seq_length in half.take(3):
            assert rows.shape == (4,) and set(rows.numpy().tolist()) <= {0, 1, 2}
            assert int(seq_length) == -(-lengths[rows.numpy()].max() // WIDTH) * WIDTH


@pytest.mark.parametrize("task_name", ["classification", "token_classification"])
def test_training_bucketed_or_padded_reaches_the_same_weights(task_name, tmp_path):
    """Without dropout, the same batches trained at their bucket length or at max_seq_length give one model.

    The two pipelines hold the same examples in the same order (only the padded length differs), and attention
    masks the padding, so any gap beyond float rounding would be a bug in one training path."""
    from safetensors.numpy import load_file

    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))  # tiny_config: dropout 0
    rng = random.Random(5)
    if task_name == "classification":
        rows = [(_long(t, rng), y) for t, y in synthetic.sentiment_rows(48, 1)]
        train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], rows)
    else:
        sentences = [s * rng.randint(1, 5) for s in synthetic.tagging_sentences(48, 1)]
        train = synthetic.write_conll(str(tmp_path / "train.conll"), sentences)
    weights = {}
    for width in (WIDTH, 0):
        output_dir = str(tmp_path / f"out_{width}")
        finetune(
            task_name,
            output_dir,
            train_file=train,
            model_dir=model_dir,
            max_seq_length=MAX_SEQ_LENGTH,
            train_batch_size=8,
            num_train_steps=12,
            learning_rate=3e-3,
            do_train=True,
            bucket_width=width,
            packing=False,  # one example a row (the default packs rows)
            seed=1,
            **({"long_text_config": TRUNCATE} if task_name == "classification" else {}),
        )
        assert os.path.exists(os.path.join(output_dir, "ckpt-12.index")), sorted(os.listdir(output_dir))
        weights[width] = load_file(os.path.join(output_dir, "weights.safetensors"))
    initial = load_file(os.path.join(model_dir, "weights.safetensors"))
    assert weights[WIDTH].keys() == weights[0].keys()
    moved = [k for k in initial if k in weights[0] and not np.allclose(initial[k], weights[0][k], atol=1e-3)]
    assert len(moved) > len(initial) // 2  # the training moved the weights well beyond the tolerance below
    for key in weights[0]:
        np.testing.assert_allclose(weights[WIDTH][key], weights[0][key], atol=2e-5, err_msg=key)


@pytest.mark.parametrize("task_name", ["classification", "token_classification"])
def test_padded_batches_keep_the_static_shape_tpus_need(task_name, tokenizer):
    task = _task(task_name, tokenizer)
    task.bucket_width = 0
    for training in (True, False):
        dataset = task.dataset(task.featurize(_examples(task_name), training=training), 4, training=training, seed=1)
        assert dataset.element_spec["input_word_ids"].shape.as_list() == [4, MAX_SEQ_LENGTH], training
