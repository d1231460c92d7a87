"""SQuAD windows in packed rows (the default): each window's logits, loss and gradients as alone, the same answers."""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.examples import SquadAnswer, SquadExample
from bert_tf.models import BertEncoder, BertSpanLabeler
from bert_tf.tasks.base import FEATURE_INDEX_KEY
from bert_tf.tasks.inference import predict_outputs
from bert_tf.tasks.squad import SquadConfig, SquadTask
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune

MAX_SEQ_LENGTH = 40
LONG_CONTEXT = "Alice walked to Paris, then  Bob's team played the match in Rome and London today. " * 3


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return TaskTokenizer(synthetic.write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt")))


def _examples():
    """Short one-window questions (some without an answer) and one long context of several full windows."""
    examples = []
    for paragraph in synthetic.squad_data(9, 3, unanswerable_fraction=0.3)["data"][0]["paragraphs"]:
        qa = paragraph["qas"][0]
        answers = tuple(SquadAnswer(a["text"], a["answer_start"]) for a in qa["answers"])
        examples.append(SquadExample(qa["id"], qa["question"], paragraph["context"], answers, qa["is_impossible"]))
    answer = SquadAnswer("Rome", LONG_CONTEXT.rindex("Rome"))
    examples.insert(4, SquadExample("long", "What comes after marker?", LONG_CONTEXT, (answer,)))
    return examples


def _tasks_and_models(tokenizer):
    packed_task = SquadTask(tokenizer, MAX_SEQ_LENGTH, doc_stride=8, max_query_length=8, packing=True)
    task = SquadTask(tokenizer, MAX_SEQ_LENGTH, doc_stride=8, max_query_length=8)
    tf.keras.utils.set_random_seed(0)
    # Large weights: windows whose states differ give visibly different logits.
    packed_model = packed_task.build_model(BertEncoder(synthetic.tiny_config(initializer_range=0.5)))
    model = BertSpanLabeler(packed_model.encoder)
    model.span.set_weights(packed_model.span.get_weights())
    return packed_task, task, packed_model, model


def test_packed_windows_give_the_logits_loss_and_gradients_of_one_window_a_row(tokenizer):
    packed_task, task, packed_model, model = _tasks_and_models(tokenizer)
    examples = _examples()
    features = task.featurize(examples, training=True)
    lengths = features.inputs["input_mask"].sum(axis=1)
    assert (lengths == MAX_SEQ_LENGTH).any() and (features.inputs["start_positions"] > 0).any()

    dataset = packed_task.dataset(features, 6, training=False)
    batches = list(dataset)
    index = np.concatenate([b[FEATURE_INDEX_KEY].numpy() for b in batches])
    assert sorted(index[index >= 0].tolist()) == list(range(len(features)))  # every window once
    filled = (index >= 0).sum(axis=1)
    full = [int(i) for i in np.flatnonzero(lengths == MAX_SEQ_LENGTH)]
    assert all(filled[np.flatnonzero((index == f).any(axis=1))[0]] == 1 for f in full)  # a full window is alone
    assert filled.max() >= 2  # other rows hold several windows

    packed = predict_outputs(packed_model, dataset, num_features=len(features))
    alone = predict_outputs(model, task.dataset(features, 6, training=False), num_features=len(features))
    mask = features.inputs["input_mask"].astype(bool)
    for name in ("start_logits", "end_logits"):
        assert np.ptp(alone[name][mask]) > 0.1  # the positions' logits differ by far more than 1e-5
        np.testing.assert_allclose(packed[name][mask], alone[name][mask], atol=1e-5)

    # Loss and gradients: a packed batch against its windows one a row, each padded to MAX_SEQ_LENGTH.
    for batch in batches:
        windows = batch[FEATURE_INDEX_KEY].numpy()
        windows = windows[windows >= 0]
        one_a_row = {name: tf.constant(values[windows]) for name, values in features.inputs.items()}
        results = []
        for current_task, current_model, inputs in (
            (packed_task, packed_model, batch),
            (task, model, one_a_row),
        ):
            with tf.GradientTape() as tape:
                outputs = current_model({k: inputs[k] for k in current_model.input}, training=False)
                metrics = current_task.compute_loss(inputs, outputs)
            variables = current_model.trainable_variables
            results.append((metrics, dict(zip([v.path for v in variables], tape.gradient(metrics["loss"], variables)))))
        (packed_metrics, packed_gradients), (metrics, gradients) = results
        for name in ("loss", "start_accuracy", "end_accuracy"):
            np.testing.assert_allclose(float(packed_metrics[name]), float(metrics[name]), rtol=1e-5, err_msg=name)
        assert sorted(packed_gradients) == sorted(gradients) and len(gradients) > 30
        for path, gradient in gradients.items():
            if gradient is None:  # the pooler: the span head reads the sequence output only
                assert packed_gradients[path] is None and "pooler" in path, path
                continue
            packed_gradient, gradient = tf.convert_to_tensor(packed_gradients[path]), tf.convert_to_tensor(gradient)
            assert float(tf.reduce_max(tf.abs(gradient))) > 0, path
            np.testing.assert_allclose(packed_gradient, gradient, atol=1e-5, err_msg=path)


def test_the_loss_is_each_windows_softmax_over_its_own_tokens(tokenizer):
    task = SquadTask(tokenizer, 8, doc_stride=2, max_query_length=2, packing=True)
    # One row: window 1 at tokens 0-2, window 2 at tokens 3-6, then padding; a third slot empty.
    example_ids = np.array([[1, 1, 1, 2, 2, 2, 2, 0]], "int32")
    start = np.array([[0.0, 2.0, 1.0, 3.0, 0.0, 1.0, 0.0, 50.0]], "float32")
    end = np.array([[1.0, 0.0, 0.0, 0.0, 4.0, 0.0, 2.0, 50.0]], "float32")
    features = {
        "input_example_ids": example_ids,
        "input_mask": np.int32(example_ids > 0),
        "start_positions": np.array([[1, 2, 0, 0]], "int32"),  # from each window's [CLS]
        "end_positions": np.array([[0, 1, 0, 0]], "int32"),
        FEATURE_INDEX_KEY: np.array([[5, 9, -1, -1]], "int32"),
    }

    def cross_entropy(logits, target):
        return float(np.log(np.exp(logits).sum()) - logits[target])

    start_losses = [cross_entropy(start[0, 0:3], 1), cross_entropy(start[0, 3:7], 2)]
    end_losses = [cross_entropy(end[0, 0:3], 0), cross_entropy(end[0, 3:7], 1)]
    result = task.compute_loss(features, {"start_logits": start, "end_logits": end})
    np.testing.assert_allclose(float(result["loss"]), (np.mean(start_losses) + np.mean(end_losses)) / 2, rtol=1e-6)
    np.testing.assert_allclose(float(result["start_accuracy"]), 0.5, rtol=1e-6)  # window 1 right, window 2 not
    np.testing.assert_allclose(float(result["end_accuracy"]), 1.0, rtol=1e-6)


def test_packing_is_squads_default_and_accepted():
    assert SquadConfig("squad").resolve_packing().packing is True
    assert SquadConfig("squad", packing=True).resolve_packing().packing is True
    assert SquadConfig("squad").packing_note().startswith("Batches of packed rows")
    assert SquadConfig("squad", packing=False).resolve_packing().packing is False


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_job_trains_packed_resumes_exactly_and_writes_the_same_predictions_packed_or_not(tmp_path, caplog):
    caplog.set_level("INFO", logger="absl")
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train_file = synthetic.write_json(str(tmp_path / "train.json"), synthetic.squad_data(60, 1, 0.3))
    dev_file = synthetic.write_json(str(tmp_path / "dev.json"), synthetic.squad_data(20, 2, 0.3))
    output_dir = str(tmp_path / "out")
    common = dict(
        eval_file=dev_file,
        predict_file=dev_file,
        max_seq_length=MAX_SEQ_LENGTH,
        doc_stride=6,
        max_query_length=8,
        eval_batch_size=4,
        version_2_with_negative=True,
        do_eval=True,
        do_predict=True,
        seed=1,
    )
    training = dict(
        train_file=train_file,
        model_dir=model_dir,
        train_batch_size=8,
        learning_rate=1e-3,
        num_train_steps=6,
        save_checkpoints_steps=3,
        deterministic=True,
        do_train=True,
        max_seq_length=MAX_SEQ_LENGTH,
        doc_stride=6,
        max_query_length=8,
        version_2_with_negative=True,
        seed=1,
    )
    packed = finetune("squad", output_dir, **dict(common, **training))
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Packed rows, training") for m in logged), logged
    per_row = [float(re.search(r"([0-9.]+) examples a row", m)[1]) for m in logged if m.startswith("Packed rows, inf")]
    assert per_row and min(per_row) > 1.2, logged  # the evaluation's rows hold several windows
    names = ("predictions.json", "nbest_predictions.json", "null_odds.json")
    files = {(p, name): _read(os.path.join(output_dir, p + name)) for name in names for p in ("", "eval_")}
    answers = files["", "predictions.json"].values()
    assert "" in answers and any(answers)  # null answers and spans both
    unpacked = finetune("squad", output_dir, packing=False, overwrite_predictions=True, **common)
    assert packed["global_step"] == 6
    for prefix in ("", "eval_"):
        path = os.path.join(output_dir, prefix)
        assert _read(path + "predictions.json") == files[prefix, "predictions.json"]
        nbest, expected = _read(path + "nbest_predictions.json"), files[prefix, "nbest_predictions.json"]
        assert {q: [e["text"] for e in v] for q, v in nbest.items()} == {
            q: [e["text"] for e in v] for q, v in expected.items()
        }
        for question, entries in expected.items():
            for entry, other in zip(entries, nbest[question]):
                np.testing.assert_allclose(other["probability"], entry["probability"], atol=1e-5)
        null_odds, expected = _read(path + "null_odds.json"), files[prefix, "null_odds.json"]
        assert sorted(null_odds) == sorted(expected)
        np.testing.assert_allclose([null_odds[q] for q in expected], [expected[q] for q in expected], atol=1e-4)
    assert {k: v for k, v in packed.items() if k != "global_step"} == pytest.approx(
        {k: v for k, v in unpacked.items() if k != "global_step"}
    )

    # Resumed from its step-3 checkpoint (model, optimizer and the packed iterator), the run ends where it did.
    resumed_dir = str(tmp_path / "resumed")
    shutil.copytree(output_dir, resumed_dir)
    for name in os.listdir(resumed_dir):
        if name.startswith("ckpt-6"):
            os.remove(os.path.join(resumed_dir, name))
    tf.compat.v1.train.update_checkpoint_state(resumed_dir, os.path.join(resumed_dir, "ckpt-3"))
    finetune("squad", resumed_dir, **training)
    reference = _checkpoint_values(os.path.join(output_dir, "ckpt-6"))
    resumed = _checkpoint_values(os.path.join(resumed_dir, "ckpt-6"))
    assert sorted(resumed) == sorted(reference) and any(n.startswith("optimizer/") for n in reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)


def _checkpoint_values(path):
    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name, _ in tf.train.list_variables(path)
        if not name.startswith(("train_iterator/", "save_counter/", "_CHECKPOINTABLE_OBJECT_GRAPH"))
    }
