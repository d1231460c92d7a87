"""Packed fine-tuning batches (the default): the predictions of one example a row, random order, exact resumes."""

import csv
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import packed_rows
from bert_tf.data.examples import TaggingExample, TextExample
from bert_tf.errors import JobArgumentError
from bert_tf.models import BertClassifier, BertEncoder, BertTokenClassifier
from bert_tf.tasks.base import FEATURE_INDEX_KEY
from bert_tf.tasks.classification import ClassificationTask
from bert_tf.tasks.inference import predict_outputs
from bert_tf.tasks.long_text import LongTextConfig
from bert_tf.tasks.squad import SquadConfig
from bert_tf.tasks.tagging import TaggingTask
from bert_tf.tasks.task_config import FinetuningTaskConfig
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune

MAX_SEQ_LENGTH = 48


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return TaskTokenizer(synthetic.write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt")))


def _long(text, rng):
    return " ".join([text] * rng.randint(1, 4))


def _examples(task_name, n=23):
    rng = random.Random(7)
    if task_name == "sentence_pair_classification":
        return [
            TextExample(f"x{i}", _long(a, rng), _long(b, rng), y)
            for i, (a, b, y) in enumerate(synthetic.pair_rows(n, 1))
        ]
    rows = synthetic.count_rows(n, 1) if task_name == "regression" else synthetic.sentiment_rows(n, 1)
    return [TextExample(f"x{i}", _long(t, rng), None, y) for i, (t, y) in enumerate(rows)]


def _task(task_name, tokenizer, packing):
    labels = None if task_name == "regression" else ["neg", "pos"]
    pair = task_name == "sentence_pair_classification"
    return ClassificationTask(tokenizer, MAX_SEQ_LENGTH, labels, sentence_pair=pair, packing=packing)


@pytest.mark.parametrize("task_name", ["classification", "sentence_pair_classification"])
def test_packed_predictions_equal_one_example_a_row(task_name, tokenizer):
    examples = _examples(task_name)
    packed_task, task = _task(task_name, tokenizer, True), _task(task_name, tokenizer, False)
    features = task.featurize(examples, training=False)
    tf.keras.utils.set_random_seed(0)
    # Large weights: examples whose states differ give visibly different logits.
    packed_model = packed_task.build_model(BertEncoder(synthetic.tiny_config(initializer_range=0.5)))
    model = BertClassifier(packed_model.encoder, task.num_outputs)
    model.classifier.set_weights(packed_model.classifier.get_weights())

    dataset = packed_task.dataset(features, 4, training=False)
    batches = list(dataset)
    slots = packed_rows.max_examples_per_row(MAX_SEQ_LENGTH)
    shapes = {(tuple(b["input_word_ids"].shape), tuple(b[FEATURE_INDEX_KEY].shape)) for b in batches}
    assert len(shapes) == 1 and next(iter(shapes))[0][1] == MAX_SEQ_LENGTH and next(iter(shapes))[1][1] == slots
    index = np.concatenate([b[FEATURE_INDEX_KEY].numpy().ravel() for b in batches])
    assert sorted(index[index >= 0].tolist()) == list(range(len(examples)))  # every example once
    assert max(int((b[FEATURE_INDEX_KEY].numpy() >= 0).sum(1).max()) for b in batches) >= 2  # rows hold several
    lengths = task.packed_lengths(features)
    for b in batches:  # the rows hold each example's tokens, marked 1..k in order, then padding
        ids, mask = b["input_example_ids"].numpy(), b["input_mask"].numpy()
        np.testing.assert_array_equal(mask, ids > 0)
        for row, slot_examples in zip(ids, b[FEATURE_INDEX_KEY].numpy()):
            filled = slot_examples[slot_examples >= 0]
            expected = np.concatenate([np.full(lengths[e], k + 1) for k, e in enumerate(filled)])
            np.testing.assert_array_equal(row[: len(expected)], expected)
            assert not row[len(expected) :].any()

    packed = predict_outputs(packed_model, dataset, num_features=len(examples))
    alone = predict_outputs(model, task.dataset(features, 4, training=False), num_features=len(examples))
    assert np.ptp(alone["logits"], axis=0).max() > 0.1  # the examples' logits differ by far more than 1e-5
    np.testing.assert_allclose(packed["logits"], alone["logits"], atol=1e-5)


def test_packed_tagging_gives_the_tags_of_one_sentence_a_row(tokenizer):
    rng = random.Random(5)
    sentences = [s * rng.randint(1, 3) for s in synthetic.tagging_sentences(15, 1)]
    examples = [
        TaggingExample(f"x{i}", tuple(w for w, _ in s), tuple(t for _, t in s)) for i, s in enumerate(sentences)
    ]
    tags = ["O", "B-PER", "B-LOC", "I-LOC"]
    packed_task, task = (
        TaggingTask(tokenizer, MAX_SEQ_LENGTH, tags, packing=True),
        TaggingTask(tokenizer, MAX_SEQ_LENGTH, tags, bucket_width=0),  # every feature at MAX_SEQ_LENGTH
    )
    features = task.featurize(examples, training=False)
    tf.keras.utils.set_random_seed(0)
    packed_model = packed_task.build_model(BertEncoder(synthetic.tiny_config(initializer_range=0.5)))
    model = BertTokenClassifier(packed_model.encoder, len(tags))
    model.token_classifier.set_weights(packed_model.token_classifier.get_weights())

    dataset = packed_task.dataset(features, 4, training=False)
    batch = next(iter(dataset))
    assert int((batch[FEATURE_INDEX_KEY].numpy() >= 0).sum(1).max()) >= 2  # rows hold several sentences
    labels, ids = batch["label_ids"].numpy(), batch["input_example_ids"].numpy()
    assert (labels[ids == 0] == -1).all() and (labels >= 0).any()  # padding is never a tagged word
    packed = predict_outputs(packed_model, dataset, num_features=len(features))
    alone = predict_outputs(model, task.dataset(features, 4, training=False), num_features=len(features))
    mask = features.inputs["input_mask"].astype(bool)
    assert np.ptp(alone["logits"][mask], axis=0).max() > 0.1
    np.testing.assert_allclose(packed["logits"][mask], alone["logits"][mask], atol=1e-5)
    assert packed_task.postprocess(examples, features, packed) == task.postprocess(examples, features, alone)


def _training_tables(lengths, seed, input_context=None, batch_size=8):
    return packed_rows.training_row_batches(lengths, batch_size, 40, seed, input_context)


def test_training_rows_are_random_full_and_cover_each_epoch_once():
    lengths = np.random.default_rng(0).integers(3, 41, 200)
    tables = _training_tables(lengths, 5)
    first = next(iter(tables)).numpy()
    rows = first.shape[0]
    per_epoch = []
    for table in tables.take(200):
        table = table.numpy()
        assert table.shape == first.shape
        filled = table >= 0
        # Slots fill from the front, and no row holds more than max_seq_length tokens.
        assert (np.sort(~filled, axis=1, kind="stable") == ~filled).all()
        assert (np.where(filled, lengths[np.maximum(table, 0)], 0).sum(1) <= 40).all()
        per_epoch.append(table)
    # Epoch 1 is the batches until an example comes back; each example appears at most once in it.
    seen, epoch = set(), []
    for table in per_epoch:
        indices = table[table >= 0].tolist()
        if seen & set(indices):
            break
        seen.update(indices)
        epoch.append(table)
    assert len(seen) >= 0.8 * len(lengths)  # only the rows past the last full batch sit out
    real = sum(lengths[t[t >= 0]].sum() for t in epoch) / (len(epoch) * rows * 40)
    assert real > 0.85, real
    examples_per_batch = np.mean([(t >= 0).sum() for t in epoch])
    assert 6 <= examples_per_batch <= 10  # train_batch_size 8 on average
    spread_within = np.mean([lengths[t[t >= 0]].std() for t in epoch])
    assert spread_within > 0.7 * lengths.std()  # random batches, not grouped by length
    # The seed decides; another seed or the next epoch is another order.
    again = [t.numpy() for t in _training_tables(lengths, 5).take(len(epoch))]
    assert all(np.array_equal(a, b) for a, b in zip(epoch, again))
    other = np.concatenate([t.numpy().ravel() for t in _training_tables(lengths, 6).take(len(epoch))])
    assert not np.array_equal(other, np.concatenate([t.ravel() for t in epoch]))
    # Two input pipelines take disjoint batches of each epoch.
    halves = [next(iter(_training_tables(lengths, 5, tf.distribute.InputContext(2, i, 2)))).numpy() for i in range(2)]
    assert np.array_equal(halves[0], epoch[0]) and np.array_equal(halves[1], epoch[1])


def test_data_smaller_than_a_batch_is_repeated_within_each_epoch():
    lengths = np.array([5, 9, 30])
    for table in _training_tables(lengths, 1, batch_size=4).take(3):
        table = table.numpy()
        assert set(table[table >= 0].tolist()) <= {0, 1, 2} and (table >= 0).sum() >= 1


def test_saved_packed_iterator_resumes_exactly(tmp_path, tokenizer):
    task = _task("classification", tokenizer, True)
    features = task.featurize(_examples("classification", 40), training=True)

    def dataset():
        return task.dataset(features, 4, training=True, seed=3)

    reference = [b for _, b in zip(range(25), dataset())]  # crosses epochs
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


def test_packed_regression_loss_is_the_mean_over_the_batchs_examples(tokenizer):
    task = _task("regression", tokenizer, True)
    scores = np.array([[[1.0], [3.0], [7.0]], [[-2.0], [9.0], [9.0]]], "float32")
    features = {
        "label": np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], "float32"),
        FEATURE_INDEX_KEY: np.array([[0, 1, -1], [2, -1, -1]]),
    }
    result = task.compute_loss(features, scores)
    np.testing.assert_allclose(float(result["loss"]), (1.0 + 4.0 + 4.0) / 3, rtol=1e-6)
    np.testing.assert_allclose(float(result["mean_absolute_error"]), (1.0 + 2.0 + 2.0) / 3, rtol=1e-6)


def test_packed_loss_is_the_mean_over_the_batchs_examples(tokenizer):
    task = _task("classification", tokenizer, True)
    logits = np.array([[[2.0, 0.0], [0.0, 1.0], [5.0, 5.0]], [[0.0, 3.0], [9.0, 9.0], [9.0, 9.0]]], "float32")
    features = {
        "label": np.array([[0, 0, 1], [1, 0, 0]], "int32"),
        FEATURE_INDEX_KEY: np.array([[4, 0, -1], [7, -1, -1]]),
    }
    losses = [np.log1p(np.exp(-2.0)), np.log1p(np.exp(1.0)), np.log1p(np.exp(-3.0))]  # the three real examples
    result = task.compute_loss(features, logits)
    np.testing.assert_allclose(float(result["loss"]), np.mean(losses), rtol=1e-6)
    np.testing.assert_allclose(float(result["accuracy"]), 2 / 3, rtol=1e-6)


def test_packing_is_the_default_where_it_can_be_and_refused_where_it_cannot(tmp_path):
    assert FinetuningTaskConfig("classification").resolve_packing().packing is True
    assert FinetuningTaskConfig("token_classification").resolve_packing().packing is True
    assert SquadConfig("squad").resolve_packing().packing is True  # its windows pack (tests/test_squad_packing.py)
    assert FinetuningTaskConfig("classification", packing=False).resolve_packing().packing is False
    assert FinetuningTaskConfig("classification").packing_note().startswith("Batches of packed rows")
    assert FinetuningTaskConfig("classification", packing=False).packing_note().endswith("(--nopacking).")
    # The default gives way, with the reason for the log, to an option that takes one example a row.
    for config, microbatches, reason in [
        (FinetuningTaskConfig("classification", group_by_length=True), 1, "--group_by_length"),
        (FinetuningTaskConfig("classification"), 2, "--num_microbatches"),
    ]:
        assert config.resolve_packing(microbatches).packing is False
        note = config.packing_note(microbatches)
        assert note.startswith("Batches of one example a row, not packed rows: " + reason), note
    # Given explicitly, it is refused there, naming the flags.
    with pytest.raises(JobArgumentError, match="--packing .*--num_microbatches"):
        finetune("classification", str(tmp_path), packing=True, num_microbatches=2, do_train=True, train_file="x.tsv")
    with pytest.raises(JobArgumentError, match="--packing.*--group_by_length"):
        FinetuningTaskConfig("classification", packing=True, group_by_length=True)


def _checkpoint_values(path):
    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name, _ in tf.train.list_variables(path)
        if not name.startswith(("train_iterator/", "save_counter/", "_CHECKPOINTABLE_OBJECT_GRAPH"))
    }


def test_job_trains_packed_by_default_resumes_exactly_and_evaluates_the_same_packed_or_not(tmp_path, caplog):
    caplog.set_level("INFO", logger="absl")
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    rng = random.Random(3)
    rows = [(_long(t, rng), y) for t, y in synthetic.sentiment_rows(70, 1)]
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], rows[:50])
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["text_a", "label"], rows[50:])
    # Rows of texts cut to the window (the default would read the longer ones in windows, which pack too).
    truncate = LongTextConfig("truncate")
    common = dict(eval_file=dev, max_seq_length=MAX_SEQ_LENGTH, eval_batch_size=6, do_eval=True, seed=1)
    common["long_text_config"] = truncate
    output_dir = str(tmp_path / "out")
    packed = finetune(
        "classification",
        output_dir,
        train_file=train,
        model_dir=model_dir,
        train_batch_size=8,
        num_train_steps=6,
        learning_rate=1e-3,
        do_train=True,
        save_checkpoints_steps=3,
        deterministic=True,
        **common,
    )
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Packed rows")]
    assert any(m.startswith("Packed rows, training") and "of the tokens are real" in m for m in logged), logged
    assert any(m.startswith("Packed rows, inference") for m in logged), logged
    assert not any(r.getMessage().startswith("Length buckets") for r in caplog.records)

    def predictions():
        with open(os.path.join(output_dir, "eval_predictions.tsv"), encoding="utf-8") as f:
            return list(csv.reader(f, delimiter="\t"))

    packed_rows_ = predictions()
    # Resumed from its step-3 checkpoint (model, optimizer and the packed iterator), the run ends where it did.
    resumed_dir = str(tmp_path / "resumed")
    shutil.copytree(output_dir, resumed_dir)
    for name in os.listdir(resumed_dir):
        if name.startswith("ckpt-6"):
            os.remove(os.path.join(resumed_dir, name))
    tf.compat.v1.train.update_checkpoint_state(resumed_dir, os.path.join(resumed_dir, "ckpt-3"))
    finetune(
        "classification",
        resumed_dir,
        train_file=train,
        model_dir=model_dir,
        train_batch_size=8,
        num_train_steps=6,
        learning_rate=1e-3,
        do_train=True,
        save_checkpoints_steps=3,
        deterministic=True,
        max_seq_length=MAX_SEQ_LENGTH,
        seed=1,
    )
    reference = _checkpoint_values(os.path.join(output_dir, "ckpt-6"))
    resumed = _checkpoint_values(os.path.join(resumed_dir, "ckpt-6"))
    assert sorted(resumed) == sorted(reference) and any(n.startswith("optimizer/") for n in reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)
    unpacked = finetune("classification", output_dir, packing=False, **common)
    assert packed["global_step"] == 6 and packed["accuracy"] == unpacked["accuracy"]
    unpacked_rows = predictions()
    assert [r[:3] for r in packed_rows_] == [r[:3] for r in unpacked_rows]
    np.testing.assert_allclose(
        np.array([r[3:] for r in packed_rows_[1:]], float),
        np.array([r[3:] for r in unpacked_rows[1:]], float),
        atol=1e-5,
    )


def test_job_trains_a_packed_tagger_by_default_that_evaluates_the_same_packed_or_not(tmp_path):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_conll(str(tmp_path / "train.conll"), synthetic.tagging_sentences(40, 1))
    dev = synthetic.write_conll(str(tmp_path / "dev.conll"), synthetic.tagging_sentences(12, 2))
    common = dict(eval_file=dev, max_seq_length=24, eval_batch_size=4, do_eval=True, seed=1)
    output_dir = str(tmp_path / "out")
    packed = finetune(
        "token_classification",
        output_dir,
        train_file=train,
        model_dir=model_dir,
        train_batch_size=8,
        num_train_steps=4,
        learning_rate=1e-3,
        do_train=True,
        **common,
    )
    with open(os.path.join(output_dir, "eval_predictions.txt"), encoding="utf-8") as f:
        packed_predictions = f.read()
    unpacked = finetune("token_classification", output_dir, packing=False, **common)
    with open(os.path.join(output_dir, "eval_predictions.txt"), encoding="utf-8") as f:
        assert f.read() == packed_predictions
    assert packed["global_step"] == 4
    assert packed == unpacked and "entity_f1" in packed  # the same predictions, so the same metrics
