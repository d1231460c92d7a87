"""Distillation on packed rows (`experiments.distill`'s default): the teacher's logits, the losses, the job, and
which cases take one example a row instead.

A tiny teacher (L=2, H=32) is fine-tuned unpacked on the synthetic keyword-sentiment task at length 16, where a
row holds one to three of its sentences; packed, every example must get what it gets alone.
"""

import json
import os

import numpy as np
import pytest

from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import run_main, temporary_flags
from tests.helpers.jobs import distill, finetune, record_compute_dtypes

SEQ_LENGTH = 16


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A 2-layer classifier fine-tuned (unpacked) on the keyword-sentiment task, and its data."""
    tmp = tmp_path_factory.mktemp("distill_packing")
    files = dict(
        train_file=synthetic.write_tsv(str(tmp / "train.tsv"), ["sentence", "label"], synthetic.sentiment_rows(96, 1)),
        eval_file=synthetic.write_tsv(str(tmp / "dev.tsv"), ["sentence", "label"], synthetic.sentiment_rows(40, 2)),
    )
    teacher_dir = str(tmp / "teacher")
    results = finetune(
        "classification",
        teacher_dir,
        model_dir=synthetic.make_model_dir(str(tmp / "model")),
        text_a_column="sentence",
        num_train_steps=30,
        do_train=True,
        max_seq_length=SEQ_LENGTH,
        train_batch_size=16,
        learning_rate=1e-3,
        steps_per_loop=30,
        do_eval=True,
        packing=False,
        seed=1,
        **files,
    )
    return dict(teacher_dir=teacher_dir, teacher_eval=results, **files)


def _teacher_and_features(teacher, packing: bool):
    """(task plug-in, frozen teacher model, training features) as the distillation builds them."""
    from bert_tf.jobs.distillation import DistillationConfig
    from bert_tf.jobs.distillation.teacher import load_teacher_model, read_teacher
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    from bert_tf.tasks.task_config import FinetuningTaskConfig

    loaded = read_teacher(DistillationConfig(teacher_dir=teacher["teacher_dir"], packing=packing))
    data = FinetuningDataConfig(train_file=teacher["train_file"], text_a_column="sentence")
    task = FinetuningTaskConfig("classification", max_seq_length=SEQ_LENGTH, packing=packing)
    reader, task_object = loaded.task(task, data)
    features = task_object.featurize(reader.read("train", data.train_file), training=True)
    return task_object, load_teacher_model(task_object, loaded), features


def test_teacher_logits_on_packed_rows_equal_the_unpacked_ones(teacher):
    import tensorflow as tf

    from bert_tf.jobs.distillation import teacher_logits

    logits = {}
    for packing in (False, True):
        task_object, model, features = _teacher_and_features(teacher, packing)
        labelled = teacher_logits.with_teacher_logits(
            task_object, model, features, None, 8, tf.distribute.get_strategy(), None
        )
        logits[packing] = labelled[teacher_logits.TEACHER_LOGITS_KEY]
    assert logits[True].shape == logits[False].shape == (96, 2)
    assert np.abs(logits[False]).max() > 0.1  # a trained head, not zeros
    np.testing.assert_allclose(logits[True], logits[False], atol=1e-5, rtol=0)


def _per_example_losses(loss, batch, logits) -> dict:
    """{feature: `loss`'s total for that example of `batch` alone}: every other slot marked empty (index -1)."""
    index = batch["feature_index"]
    flat = index.reshape(-1)
    losses = {}
    for position in np.flatnonzero(flat >= 0):
        alone = np.full_like(flat, -1)
        alone[position] = flat[position]
        losses[int(flat[position])] = float(loss(dict(batch, feature_index=alone.reshape(index.shape)), logits)["loss"])
    return losses


def test_per_example_distillation_losses_of_a_packed_batch_equal_the_unpacked_ones(teacher):
    """One packed training batch: the same examples' losses (soft, hard, unlabelled rows) as in an unpacked batch."""
    from bert_tf.distillation.losses import DistillationLoss

    results = {}
    for packing in (True, False):
        task_object, model, features = _teacher_and_features(teacher, packing)
        features = task_object.with_unlabeled(features, None)
        features["label_weight"] = (np.arange(96) % 3 != 0).astype(np.float32)  # every third one unlabelled
        features["teacher_logits"] = np.random.default_rng(1).normal(size=(96, 2)).astype(np.float32) * 3
        if packing:
            batch = next(iter(task_object.dataset(features, 16, training=True, seed=3)))
            chosen = np.asarray(batch["feature_index"])
            chosen = chosen[chosen >= 0]
            assert batch["input_word_ids"].shape[1] == SEQ_LENGTH and (np.asarray(batch["feature_index"]) < 0).any()
            assert len(chosen) > batch["input_word_ids"].shape[0]  # rows of several examples
        else:  # the same examples, one a row
            subset = {name: values[chosen] for name, values in features.items()}
            batch = next(iter(task_object.dataset(subset, len(chosen), training=False)))
            batch = dict(batch, feature_index=chosen[np.asarray(batch["feature_index"])])
        batch = {name: np.asarray(value) for name, value in batch.items()}
        logits = model({k: batch[k] for k in model.input}, training=False)
        loss = DistillationLoss("classification", temperature=2.0, alpha=0.5)
        results[packing] = (_per_example_losses(loss, batch, logits), float(loss(batch, logits)["loss"]))
    packed, unpacked = results[True], results[False]
    assert sorted(packed[0]) == sorted(unpacked[0])
    for index, value in packed[0].items():
        assert value == pytest.approx(unpacked[0][index], abs=1e-5), index
    assert packed[1] == pytest.approx(unpacked[1], abs=1e-5)  # the batch's loss: the mean over its examples
    assert len(set(np.round(list(packed[0].values()), 4))) > 3  # examples with losses of their own


def _one_layer_student(teacher) -> dict:
    """The distillation's arguments for a 1-layer student of the fixture's teacher, 12 steps."""
    return dict(
        teacher_dir=teacher["teacher_dir"],
        student_num_layers=1,
        train_file=teacher["train_file"],
        eval_file=teacher["eval_file"],
        text_a_column="sentence",
        num_train_steps=12,
        train_batch_size=16,
        learning_rate=1e-3,
        steps_per_loop=6,
        seed=1,
    )


def test_default_distillation_packs_end_to_end_and_its_teacher_scores_as_unpacked(teacher, tmp_path):
    arguments = _one_layer_student(teacher)
    packed_dir = str(tmp_path / "student")
    results = distill(packed_dir, **arguments)  # packing left to its default
    # The teacher, evaluated on packed rows, scores what fine-tuning's (unpacked) evaluation measured; its
    # logits are kept for resuming (their equality packed or not: the test above).
    assert results["teacher"]["accuracy"] == pytest.approx(teacher["teacher_eval"]["accuracy"], abs=1e-6)
    assert len(os.listdir(os.path.join(packed_dir, "teacher_logits"))) == 1
    with open(os.path.join(packed_dir, "distillation.json")) as f:
        assert json.load(f)["packing"] is True
    student = results["student"]
    assert student["global_step"] == 12 and 0.0 <= student["accuracy"] <= 1.0
    # The same command resumes (here: finds its run complete) rather than refusing its own directory.
    again = distill(packed_dir, **arguments)
    assert again["student"] == student


def test_the_packing_flag_left_out_packs_unless_the_teacher_or_an_option_rules_it_out():
    """The default resolves to packed rows; the hidden-state loss, a windows teacher and microbatches to one example a
    row with the reason logged; --nopacking stays unpacked; an explicit --packing in such a case is refused."""
    import dataclasses

    from bert_tf.errors import JobArgumentError
    from bert_tf.jobs.distillation import DistillationConfig
    from bert_tf.tasks.long_text import LongTextConfig
    from experiments import distill as tool
    from experiments import job_flags

    truncate, windows = LongTextConfig(), LongTextConfig("windows")
    with temporary_flags(tool.define_flags, ["distill", "--teacher_dir=t"]):
        default = job_flags.config_from_flags(DistillationConfig)
    with temporary_flags(tool.define_flags, ["distill", "--teacher_dir=t", "--nopacking"]):
        unpacked = job_flags.config_from_flags(DistillationConfig)
    assert default.packing is None and unpacked.packing is False
    for task in ("classification", "sentence_pair_classification", "regression", "token_classification"):
        assert default.resolve_packing(task, truncate).packing is True
    assert default.packing_note("classification", truncate).startswith("Batches of packed rows")
    assert unpacked.resolve_packing("classification", truncate).packing is False
    assert unpacked.packing_note("classification", truncate) == "Batches of one example a row (--nopacking)."

    hidden = dataclasses.replace(default, hidden_loss_weight=1.0)
    cases = [
        (hidden, truncate, 1, "--hidden_loss_weight compares the hidden states of unpacked rows"),
        (default, windows, 1, "the teacher's --long_text=windows is not packed in distillation yet"),
        (default, truncate, 2, "--num_microbatches splits each batch's rows"),
    ]
    for config, long_text, microbatches, reason in cases:
        assert config.resolve_packing("classification", long_text, microbatches).packing is False
        note = config.packing_note("classification", long_text, microbatches)
        assert note == f"Batches of one example a row, not packed rows: {reason}."
        if config is not hidden:  # --packing with the hidden-state loss is refused as the config is built
            explicit = dataclasses.replace(config, packing=True)
            with pytest.raises(JobArgumentError, match=f"--packing is not possible here: {reason}"):
                explicit.resolve_packing("classification", long_text, microbatches)


def test_a_run_of_the_other_batches_is_named_with_the_flag_that_resumes_it(tmp_path):
    """A run started with --nopacking (or before packed rows were the default) is refused by the default's settings
    with the flag that resumes it; another distillation's run is refused as such."""
    from bert_tf.errors import JobArgumentError
    from bert_tf.jobs.distillation import settings

    unpacked = {"teacher_dir": "/t", "temperature": 2.0, "max_seq_length": 16}
    packed = dict(unpacked, packing=True)
    (tmp_path / "distillation.json").write_text(json.dumps(unpacked))
    settings.check_output_dir(str(tmp_path), unpacked)  # its own run: resumes
    with pytest.raises(JobArgumentError, match="this distillation's run with --nopacking: give --nopacking"):
        settings.check_output_dir(str(tmp_path), packed)
    (tmp_path / "distillation.json").write_text(json.dumps(packed))
    with pytest.raises(JobArgumentError, match="this distillation's run with --packing: give --packing"):
        settings.check_output_dir(str(tmp_path), unpacked)
    with pytest.raises(JobArgumentError, match="another distillation's run"):
        settings.check_output_dir(str(tmp_path), dict(packed, temperature=1.0))


def test_packing_with_the_hidden_state_loss_exits_2_naming_the_flags(teacher, tmp_path, capfd):
    from experiments import distill as tool

    output_dir = str(tmp_path / "out")
    argv = [
        f"--teacher_dir={teacher['teacher_dir']}",
        "--student_num_layers=1",
        f"--train_file={teacher['train_file']}",
        "--text_a_column=sentence",
        "--packing",
        "--hidden_loss_weight=1",
        f"--output_dir={output_dir}",
    ]
    capfd.readouterr()
    code = run_main(tool, argv, program="distill")
    err = capfd.readouterr().err
    assert code == 2, err[-3000:]
    assert err.startswith("distill: error: ") and err.count("\n") == 1, err[-3000:]
    assert "--hidden_loss_weight" in err and "--nopacking" in err
    assert not os.path.exists(output_dir)


def test_packed_tagging_teacher_labels_each_token_as_unpacked(tmp_path):
    """Per-token soft targets ([N, length, tags]) travel packed as the tokens do (a tagging student trains on
    them by default in test_distill.py)."""
    import tensorflow as tf

    from bert_tf.jobs.distillation import DistillationConfig, teacher_logits
    from bert_tf.jobs.distillation.teacher import load_teacher_model, read_teacher
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    from bert_tf.tasks.task_config import FinetuningTaskConfig

    train = synthetic.write_conll(str(tmp_path / "train.conll"), synthetic.tagging_sentences(64, 1))
    teacher_dir = str(tmp_path / "teacher")
    finetune(
        "token_classification",
        teacher_dir,
        model_dir=synthetic.make_model_dir(str(tmp_path / "model")),
        train_file=train,
        do_train=True,
        num_train_steps=30,
        max_seq_length=SEQ_LENGTH,
        train_batch_size=16,
        learning_rate=1e-3,
        steps_per_loop=30,
        seed=1,
    )
    logits, masks = {}, {}
    for packing in (False, True):
        loaded = read_teacher(DistillationConfig(teacher_dir=teacher_dir, packing=packing))
        data = FinetuningDataConfig(train_file=train)
        task = FinetuningTaskConfig("token_classification", max_seq_length=SEQ_LENGTH, packing=packing)
        reader, task_object = loaded.task(task, data)
        features = task_object.featurize(reader.read("train", train), training=True)
        labelled = teacher_logits.with_teacher_logits(
            task_object, load_teacher_model(task_object, loaded), features, None, 8, tf.distribute.get_strategy(), None
        )
        logits[packing] = labelled.inputs[teacher_logits.TEACHER_LOGITS_KEY]
        masks[packing] = labelled.inputs["input_mask"]
    np.testing.assert_array_equal(masks[True], masks[False])
    real = masks[True].astype(bool)  # the soft loss reads real tokens only (padding: 0 packed, anything unpacked)
    assert logits[True].shape == logits[False].shape and np.abs(logits[False][real]).max() > 0.1
    np.testing.assert_allclose(logits[True][real], logits[False][real], atol=1e-5, rtol=0)


def test_distillation_in_mixed_bfloat16_computes_in_bfloat16_and_writes_float32_weights(teacher, tmp_path, monkeypatch):
    """`--mixed_precision=mixed_bfloat16`: the teacher labels and the student trains in bfloat16 (packed rows, the
    default), with float32 variables; the teacher scores what float32 fine-tuning measured, to one of 40 sentences."""
    import keras

    from bert_tf.checkpoints import weights_file

    compute_dtypes = record_compute_dtypes(monkeypatch)
    policy = keras.mixed_precision.global_policy().name
    output_dir = str(tmp_path / "student")
    results = distill(output_dir, **_one_layer_student(teacher), mixed_precision="mixed_bfloat16")
    assert compute_dtypes and set(compute_dtypes) == {"bfloat16"}
    assert results["teacher"]["accuracy"] == pytest.approx(teacher["teacher_eval"]["accuracy"], abs=1 / 40 + 1e-6)
    assert results["student"]["global_step"] == 12
    tensors, _ = weights_file.read_weights_file(output_dir)
    assert tensors and {str(t.dtype) for t in tensors.values()} == {"float32"}
    assert keras.mixed_precision.global_policy().name == policy
