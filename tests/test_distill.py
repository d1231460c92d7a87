"""Distillation (`bert_tf.jobs.distillation`, `experiments.distill`): students, losses, resume, bad input.

A tiny teacher (L=2, H=32) is fine-tuned on the synthetic keyword-sentiment task; its students train for a few
dozen steps.
"""

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import run_main
from tests.helpers.jobs import distill, finetune

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEACHER_ARGUMENTS = dict(
    max_seq_length=16,
    train_batch_size=32,
    learning_rate=1e-3,
    warmup_proportion=0.1,
    steps_per_loop=50,
    seed=1,
)


# --- losses and layer choice (no training) ---------------------------------------------


def _numpy_kl(student, teacher, temperature):
    def log_softmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    log_p, log_q = log_softmax(teacher / temperature), log_softmax(student / temperature)
    return temperature**2 * np.mean(np.sum(np.exp(log_p) * (log_p - log_q), axis=-1))


@pytest.mark.parametrize("temperature", [1.0, 2.0, 5.0])
def test_soft_target_loss_is_kl_at_the_temperature_times_its_square(temperature):
    from bert_tf.distillation.losses import soft_target_loss

    rng = np.random.default_rng(0)
    student, teacher = rng.normal(0, 3, (6, 4)).astype("float32"), rng.normal(0, 3, (6, 4)).astype("float32")
    expected = _numpy_kl(student.astype(np.float64), teacher.astype(np.float64), temperature)
    got = float(soft_target_loss(student, teacher, temperature))
    assert expected > 0.01  # distributions that differ: the comparison below means something
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # The same logits: no loss.
    assert abs(float(soft_target_loss(teacher, teacher, temperature))) < 1e-6


def test_distillation_loss_mixes_soft_and_hard_and_skips_teacher_only_rows():
    from bert_tf.distillation.losses import DistillationLoss

    rng = np.random.default_rng(1)
    student, teacher = rng.normal(0, 2, (4, 3)).astype("float32"), rng.normal(0, 2, (4, 3)).astype("float32")
    labels = np.array([0, 2, 1, 1], np.int32)
    weights = np.array([1, 1, 0, 0], np.float32)  # the last two rows only the teacher labelled
    batch = {"label": labels, "label_weight": weights, "teacher_logits": teacher}
    metrics = DistillationLoss("classification", temperature=3.0, alpha=0.25)(batch, student)

    shifted = student - student.max(axis=-1, keepdims=True)
    log_q = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    hard = -np.mean(log_q[[0, 1], labels[:2]])
    soft = _numpy_kl(student, teacher, 3.0)
    np.testing.assert_allclose(float(metrics["hard_loss"]), hard, rtol=1e-5)
    np.testing.assert_allclose(float(metrics["soft_loss"]), soft, rtol=1e-5)
    np.testing.assert_allclose(float(metrics["loss"]), 0.25 * soft + 0.75 * hard, rtol=1e-5)


def test_regression_loss_is_the_squared_difference_to_the_teacher_and_to_the_labelled_scores():
    from bert_tf.distillation.losses import DistillationLoss

    student = np.array([[1.0], [2.5], [0.0], [4.0]], np.float32)
    teacher = np.array([[1.5], [2.0], [1.0], [2.0]], np.float32)
    labels = np.array([1.0, 3.0, 9.0, 9.0], np.float32)  # the last two rows' labels are placeholders
    weights = np.array([1, 1, 0, 0], np.float32)  # ... for rows that only the teacher scored
    batch = {"label": labels, "label_weight": weights, "teacher_logits": teacher}
    metrics = DistillationLoss("regression", temperature=5.0, alpha=0.25)(batch, student)

    soft = np.mean((student[:, 0] - teacher[:, 0]) ** 2)  # every row; no temperature for scores
    hard = np.mean((student[:2, 0] - labels[:2]) ** 2)  # labelled rows only
    np.testing.assert_allclose(float(metrics["soft_loss"]), soft, rtol=1e-6)
    np.testing.assert_allclose(float(metrics["hard_loss"]), hard, rtol=1e-6)
    np.testing.assert_allclose(float(metrics["mean_absolute_error"]), np.mean(np.abs(student[:2, 0] - labels[:2])))
    np.testing.assert_allclose(float(metrics["loss"]), 0.25 * soft + 0.75 * hard, rtol=1e-6)


@pytest.mark.parametrize(
    "teacher_layers,student_layers,expected",
    [(12, 6, [0, 2, 4, 7, 9, 11]), (6, 3, [0, 3, 5]), (6, 2, [0, 5]), (6, 1, [5]), (4, 4, [0, 1, 2, 3])],
)
def test_evenly_spaced_layers_are_distilberts_choice(teacher_layers, student_layers, expected):
    from bert_tf.distillation.students import evenly_spaced_layers

    assert evenly_spaced_layers(teacher_layers, student_layers) == expected


def test_copy_teacher_layers_sets_the_chosen_layers_embeddings_pooler_and_head():
    import keras

    from bert_tf.distillation.students import copy_teacher_layers, student_config
    from bert_tf.models import BertClassifier, BertEncoder

    keras.utils.set_random_seed(0)
    teacher = BertClassifier(BertEncoder(synthetic.tiny_config(num_hidden_layers=4)), num_classes=3)
    student = BertClassifier(BertEncoder(student_config(teacher.encoder.config, 2)), num_classes=3)
    copy_teacher_layers(student, teacher, [0, 3], head=lambda model: model.classifier)

    def same(a, b):
        return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights()))

    s, t = student.encoder, teacher.encoder
    assert same(s.transformer_layers[0], t.transformer_layers[0]) and same(
        s.transformer_layers[1], t.transformer_layers[3]
    )
    assert not same(s.transformer_layers[1], t.transformer_layers[1])
    assert (
        same(s.embeddings, t.embeddings) and same(s.pooler, t.pooler) and same(student.classifier, teacher.classifier)
    )


# --- the job ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A 2-layer classifier fine-tuned on the keyword-sentiment task, and its data."""
    tmp = tmp_path_factory.mktemp("distill")
    files = dict(
        train_file=synthetic.write_tsv(str(tmp / "train.tsv"), ["sentence", "label"], synthetic.sentiment_rows(320, 1)),
        eval_file=synthetic.write_tsv(str(tmp / "dev.tsv"), ["sentence", "label"], synthetic.sentiment_rows(100, 2)),
    )
    teacher_dir = str(tmp / "teacher")
    results = finetune(
        "classification",
        teacher_dir,
        model_dir=synthetic.make_model_dir(str(tmp / "model")),
        text_a_column="sentence",
        num_train_steps=60,
        do_train=True,
        do_eval=True,
        **files,
        **TEACHER_ARGUMENTS,
    )
    assert results["accuracy"] >= 0.9
    return dict(teacher_dir=teacher_dir, root=tmp, model_dir=str(tmp / "model"), teacher_results=results, **files)


def test_one_layer_student_learns_what_its_teacher_knows_and_is_a_fine_tuned_model_dir(teacher, tmp_path):
    from experiments import distill as tool

    output_dir = str(tmp_path / "student")
    argv = [
        f"--teacher_dir={teacher['teacher_dir']}",
        "--student_num_layers=1",
        f"--train_file={teacher['train_file']}",
        f"--eval_file={teacher['eval_file']}",
        "--text_a_column=sentence",
        "--num_train_steps=40",
        "--learning_rate=1e-3",
        *synthetic.ORIGINAL_UPDATE_FLAGS,
        "--steps_per_loop=20",
        "--seed=1",
        f"--output_dir={output_dir}",
    ]
    assert run_main(tool, argv, program="distill") == 0
    with open(os.path.join(output_dir, "distillation_results.json")) as f:
        results = json.load(f)
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["accuracy"] == results["student"]["accuracy"]
    student, teacher_metrics = results["student"], results["teacher"]
    assert teacher_metrics["accuracy"] == pytest.approx(teacher["teacher_results"]["accuracy"])
    # Chance is 0.5; the student keeps (nearly) all of its teacher's accuracy with half its layers.
    assert student["accuracy"] >= 0.9 and student["accuracy"] >= teacher_metrics["accuracy"] - 0.05
    with open(os.path.join(output_dir, "distillation.json")) as f:
        settings = json.load(f)
    assert settings["teacher_layers"] == [1] and settings["student_config"]["num_hidden_layers"] == 1

    # The student's directory is a fine-tuned model directory: evaluated again by the fine-tuning job ...
    again = finetune(
        "classification",
        output_dir,
        eval_file=teacher["eval_file"],
        text_a_column="sentence",
        do_eval=True,
        max_seq_length=16,
    )
    assert again["accuracy"] == pytest.approx(student["accuracy"]) and again["global_step"] == 40
    # ... and loaded by load_task_model (its weights file too), giving the predictions it wrote.
    from bert_tf.checkpoints import load_task_model
    from bert_tf.models import BertClassifier

    model = load_task_model(output_dir, lambda encoder: BertClassifier(encoder, num_classes=2))
    assert model.encoder.config.num_hidden_layers == 1
    assert os.path.exists(os.path.join(output_dir, "weights.safetensors"))


@pytest.fixture(scope="module")
def deep_teacher(teacher, tmp_path_factory) -> str:
    """A 4-layer teacher fine-tuned on the keyword task, for routes of intermediate students (read only: shared)."""
    tmp = tmp_path_factory.mktemp("deep_teacher")
    teacher_dir = str(tmp / "teacher")
    finetune(
        "classification",
        teacher_dir,
        model_dir=synthetic.make_model_dir(str(tmp / "model"), num_hidden_layers=4),
        train_file=teacher["train_file"],
        text_a_column="sentence",
        num_train_steps=60,
        do_train=True,
        do_eval=False,
        **TEACHER_ARGUMENTS,
    )
    return teacher_dir


def _record_layer_copies(monkeypatch) -> list:
    """[(source model's depth, its layers copied, the source model)] of every student initialised from layers."""
    from bert_tf.distillation import students

    copies = []
    original_copy = students.copy_teacher_layers

    def recording_copy(student, source, layers, head):
        copies.append((len(source.encoder.transformer_layers), list(layers), source))
        original_copy(student, source, layers, head)

    monkeypatch.setattr(students, "copy_teacher_layers", recording_copy)
    return copies


def _holds_trained_kernel(model_dir, kernel) -> bool:
    """Whether `kernel`'s values are one of the variables of `model_dir`'s latest checkpoint."""
    from bert_tf.checkpoints import latest_checkpoint

    stored = _checkpoint_values(latest_checkpoint(str(model_dir)))
    return any(np.array_equal(value, kernel.numpy()) for value in stored.values() if value.shape == tuple(kernel.shape))


def test_student_through_an_intermediate_student_starts_from_its_trained_layers_and_resumes(
    teacher, deep_teacher, tmp_path, monkeypatch
):
    """4-layer teacher -> 3-layer intermediate -> 2-layer student; each starts from the model before it."""
    copies = _record_layer_copies(monkeypatch)
    output_dir = tmp_path / "student"
    arguments = dict(
        teacher_dir=deep_teacher,
        student_num_layers=2,
        intermediate_num_layers=(3,),
        train_file=teacher["train_file"],
        eval_file=teacher["eval_file"],
        text_a_column="sentence",
        max_seq_length=16,
        learning_rate=1e-3,
        num_train_steps=30,
        steps_per_loop=15,
        seed=1,
    )
    results = distill(str(output_dir), **arguments)

    # The intermediate student starts from the teacher's layers [0, 2, 3]; the student from its layers
    # [0, 2], the teacher's [0, 3], as trained (its final checkpoint's values), not as the teacher had them.
    assert [(depth, layers) for depth, layers, _ in copies] == [(4, [0, 2, 3]), (3, [0, 2])]
    intermediate_dir = output_dir / "intermediate_3_layers"
    assert os.path.exists(intermediate_dir / "ckpt-30.index")
    trained_intermediate = copies[1][2]
    kernel = trained_intermediate.encoder.transformer_layers[1].attention.query.kernel
    assert _holds_trained_kernel(intermediate_dir, kernel)
    teacher_model = copies[0][2]
    assert not np.array_equal(
        teacher_model.encoder.transformer_layers[2].attention.query.kernel.numpy(), kernel.numpy()
    )
    with open(output_dir / "distillation.json") as f:
        settings = json.load(f)
    assert settings["teacher_layers"] == [0, 3] and settings["student"]["intermediate_num_layers"] == [3]
    assert results["student"]["accuracy"] >= 0.9

    # The same command again resumes both finished students: nothing is trained or initialised again, and the
    # teacher's logits on the training data come from the run's own file instead of a second labelling.
    from bert_tf.jobs.distillation import teacher_logits as job

    (kept,) = os.listdir(output_dir / job.TEACHER_LOGITS_DIR)
    reads = []
    original_read = job.read_logits

    def recording_read(path, num_features):
        logits = original_read(path, num_features)
        reads.append((os.path.basename(path), logits is not None))
        return logits

    monkeypatch.setattr(job, "read_logits", recording_read)
    copies.clear()
    again = distill(str(output_dir), **arguments)
    assert copies == [] and again["student"] == results["student"]
    assert reads == [(kept, True)]


def _fine_tuned_teacher(tmp_path, task, train_file, num_train_steps, **arguments) -> str:
    """The directory of a `task` teacher fine-tuned from a fresh tiny model on `train_file`."""
    teacher_dir = str(tmp_path / "teacher")
    finetune(
        task,
        teacher_dir,
        model_dir=synthetic.make_model_dir(str(tmp_path / "model")),
        train_file=train_file,
        do_train=True,
        num_train_steps=num_train_steps,
        **dict(TEACHER_ARGUMENTS, **arguments),
    )
    return teacher_dir


def test_sentence_pair_student_with_unlabeled_text_and_hidden_state_loss(tmp_path):
    rows = synthetic.pair_rows(128, 1)
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["a", "b", "label"], rows[:96])
    unlabeled = synthetic.write_tsv(str(tmp_path / "more.tsv"), ["a", "b"], [r[:2] for r in rows[96:]])
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["a", "b", "label"], synthetic.pair_rows(40, 2))
    columns = dict(text_a_column="a", text_b_column="b")
    teacher_dir = _fine_tuned_teacher(tmp_path, "sentence_pair_classification", train, 10, **columns)
    output_dir = str(tmp_path / "student")
    logits_file = str(tmp_path / "teacher_logits.npy")
    results = distill(
        output_dir,
        teacher_logits_file=logits_file,
        teacher_dir=teacher_dir,
        student_num_layers=1,
        hidden_loss_weight=1.0,
        unlabeled_file=unlabeled,
        augmented_copies=2,
        train_file=train,
        eval_file=dev,
        num_train_steps=4,
        learning_rate=1e-3,
        steps_per_loop=4,
        seed=1,
        **columns,
    )
    assert results["student"]["num_examples"] == 40 and results["student"]["global_step"] == 4
    assert set(results["teacher"]) >= {"accuracy", "f1"}
    with open(os.path.join(output_dir, "distillation.json")) as f:
        settings = json.load(f)
    assert settings["hidden_loss_weight"] == 1.0 and settings["unlabeled_file"] == unlabeled
    assert "packing" not in settings  # the hidden-state loss: one example a row by default, not a refusal
    assert settings["augmented_copies"] == 2
    # The teacher labelled the 96 training pairs, the 32 unlabeled ones and two altered copies of each training pair.
    assert np.load(logits_file).shape == (96 + 32 + 2 * 96, 2)
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f)["task"] == "sentence_pair_classification"


def test_narrower_student_learns_a_projection_for_the_hidden_state_loss_and_is_saved_without_it(teacher, tmp_path):
    """TinyBERT's W_h: a student of width 16 matches the width-32 teacher's states through a trained projection,
    which is checkpointed (for an exact resume) but is not part of the student's weights file or model."""
    from bert_tf.checkpoints import load_task_model
    from bert_tf.checkpoints.weights_file import read_weights_file
    from bert_tf.models import BertClassifier
    from experiments.demo.report import read_scalars

    narrow = synthetic.make_model_dir(
        str(tmp_path / "narrow_model"), hidden_size=16, num_attention_heads=2, intermediate_size=32
    )
    output_dir = str(tmp_path / "student")
    results = distill(
        output_dir,
        teacher_dir=teacher["teacher_dir"],
        student_model_dir=narrow,
        hidden_loss_weight=10.0,
        train_file=teacher["train_file"],
        eval_file=teacher["eval_file"],
        text_a_column="sentence",
        num_train_steps=20,
        learning_rate=1e-2,
        warmup_proportion=0.0,
        steps_per_loop=5,
        seed=1,
    )
    assert results["student"]["global_step"] == 20
    hidden_loss = [value for _, value in read_scalars(os.path.join(output_dir, "summaries", "train"))["hidden_loss"]]
    assert len(hidden_loss) == 4 and hidden_loss[-1] < 0.8 * hidden_loss[0]
    checkpoint = _checkpoint_values(os.path.join(output_dir, "ckpt-20"))
    kernel = [v for name, v in checkpoint.items() if name.startswith("hidden_projection/") and v.ndim == 2]
    assert len(kernel) == 1 and kernel[0].shape == (16, 32)
    # Initialised with a standard deviation of 0.02: trained, it has moved well beyond that.
    assert kernel[0].std() > 0.04
    weights, _ = read_weights_file(os.path.join(output_dir, "weights.safetensors"))
    assert weights and not any("projection" in name for name in weights)
    model = load_task_model(output_dir, lambda encoder: BertClassifier(encoder, num_classes=2))
    assert model.encoder.config.hidden_size == 16
    assert not any("projection" in v.path for v in model.weights)


def test_regression_student_learns_its_teachers_scores(tmp_path):
    """A regression teacher (the count of one word in a text) and its 1-layer student, both scored by Pearson's r."""
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text", "score"], synthetic.count_rows(320, 1))
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["text", "score"], synthetic.count_rows(100, 2))
    columns = dict(text_a_column="text", label_column="score")
    teacher_dir = _fine_tuned_teacher(tmp_path, "regression", train, 100, **columns)
    output_dir = str(tmp_path / "student")
    logits_file = str(tmp_path / "teacher_scores.npy")
    results = distill(
        output_dir,
        teacher_dir=teacher_dir,
        teacher_logits_file=logits_file,
        student_num_layers=1,
        train_file=train,
        eval_file=dev,
        num_train_steps=80,
        learning_rate=1e-3,
        steps_per_loop=40,
        seed=1,
        **columns,
    )
    teacher_metrics, student = results["teacher"], results["student"]
    # The teacher learnt the count. Its layer 1 and head alone start below 0.95 (the dropped layer shifts every
    # score), so the bar is met by training, which brings the student back to its teacher.
    assert teacher_metrics["pearson"] >= 0.95
    assert student["pearson"] >= 0.95 and student["pearson"] >= teacher_metrics["pearson"] - 0.02
    # The teacher's soft targets for regression are its scores: one per training text.
    scores = np.load(logits_file)
    assert scores.shape == (320, 1)
    labels = np.array([row[1] for row in synthetic.count_rows(320, 1)])
    assert np.corrcoef(scores[:, 0], labels)[0, 1] >= 0.9
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f)["task"] == "regression"


def test_tagging_student_with_unlabeled_sentences(tmp_path):
    """Per-token soft targets ([N, length, tags], cut with the batch's bucket) and a .txt of unlabelled sentences."""
    train = synthetic.write_conll(str(tmp_path / "train.conll"), synthetic.tagging_sentences(160, 1))
    dev = synthetic.write_conll(str(tmp_path / "dev.conll"), synthetic.tagging_sentences(40, 2))
    unlabeled = tmp_path / "more.txt"
    unlabeled.write_text("\n".join(" ".join(w for w, _ in s) for s in synthetic.tagging_sentences(40, 3)) + "\n")
    teacher_dir = _fine_tuned_teacher(tmp_path, "token_classification", train, 40, steps_per_loop=20)
    results = distill(
        str(tmp_path / "student"),
        teacher_dir=teacher_dir,
        student_num_layers=1,
        unlabeled_file=str(unlabeled),
        train_file=train,
        eval_file=dev,
        num_train_steps=30,
        learning_rate=1e-3,
        steps_per_loop=15,
        seed=1,
    )
    # Names and places from fixed lists: the teacher learns them, and its 1-layer student keeps them.
    assert results["teacher"]["entity_f1"] >= 0.9
    assert results["student"]["entity_f1"] >= results["teacher"]["entity_f1"] - 0.1
    # Dropping words would misalign the tags: altered copies are for texts only, refused before any work.
    from bert_tf.errors import JobArgumentError

    with pytest.raises(JobArgumentError, match="--augmented_copies"):
        distill(
            str(tmp_path / "augmented"),
            teacher_dir=teacher_dir,
            student_num_layers=1,
            augmented_copies=1,
            train_file=train,
            seed=1,
        )
    assert not os.path.exists(tmp_path / "augmented")


# --- resume after a kill ---------------------------------------------------------------


def _checkpoint_values(path):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name, _ in tf.train.list_variables(path)
        if not name.startswith(("train_iterator/", "save_counter/", "_CHECKPOINTABLE_OBJECT_GRAPH"))
    }


def test_killed_distillation_resumes_to_the_same_weights(teacher, tmp_path):
    """Killed inside step 5 (after the step-3 checkpoint), resumed: the uninterrupted run's weights, bit for bit."""
    arguments = dict(
        teacher_dir=teacher["teacher_dir"],
        student_num_layers=1,
        train_file=teacher["train_file"],
        text_a_column="sentence",
        do_eval=False,
        train_batch_size=16,
        learning_rate=1e-3,
        num_train_steps=6,
        steps_per_loop=3,
        save_checkpoints_steps=3,
        deterministic=True,
        seed=3,
    )
    distill(**dict(arguments, output_dir=str(tmp_path / "uninterrupted")))
    reference = _checkpoint_values(str(tmp_path / "uninterrupted" / "ckpt-6"))

    killed_dir = tmp_path / "killed"
    helper = os.path.join(REPO, "tests", "helpers", "training_run.py")
    killed = subprocess.Popen(
        [
            sys.executable,
            helper,
            "distill",
            "--kill_in_step=5",
            "--args=" + json.dumps(dict(arguments, output_dir=str(killed_dir))),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    try:
        log, _ = killed.communicate(timeout=300)
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait(timeout=60)
    assert killed.returncode == -signal.SIGKILL, log[-3000:]
    assert os.path.exists(killed_dir / "ckpt-3.index") and not os.path.exists(killed_dir / "ckpt-6.index")

    distill(**dict(arguments, output_dir=str(killed_dir)))
    resumed = _checkpoint_values(str(killed_dir / "ckpt-6"))
    assert sorted(reference) == sorted(resumed) and any(name.startswith("optimizer/") for name in reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)


# --- bad input -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_input_files(teacher):
    root = teacher["root"]
    # A model directory whose vocabulary has one token changed: a student that reads other word pieces.
    other_model = synthetic.make_model_dir(os.path.join(root, "other_model"))
    vocab_path = os.path.join(other_model, "vocab.txt")
    with open(vocab_path, encoding="utf-8") as f:
        tokens = f.read().split("\n")
    tokens[tokens.index("movie")] = "cinema"
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens))
    existing = os.path.join(root, "existing_output")
    os.makedirs(existing, exist_ok=True)
    with open(os.path.join(existing, "notes.txt"), "w") as f:
        f.write("keep me\n")
    return dict(other_model=other_model, existing=existing)


@pytest.mark.parametrize(
    "case,extra,expected",
    [
        ("teacher_without_task_head", ["--teacher_dir={model_dir}", "--student_num_layers=1"], "no task head"),
        ("deeper_student", ["--teacher_dir={teacher_dir}", "--student_num_layers=3"], "--student_num_layers=3"),
        (
            "vocabulary_mismatch",
            ["--teacher_dir={teacher_dir}", "--student_model_dir={other_model}"],
            "--student_model_dir",
        ),
        (
            "two_students",
            ["--teacher_dir={teacher_dir}", "--student_num_layers=1", "--student_model_dir={model_dir}"],
            "exactly one",
        ),
        (
            "bad_temperature",
            ["--teacher_dir={teacher_dir}", "--student_num_layers=1", "--temperature=0"],
            "--temperature",
        ),
        (
            "negative_copies",
            ["--teacher_dir={teacher_dir}", "--student_num_layers=1", "--augmented_copies=-1"],
            "--augmented_copies",
        ),
        (
            "intermediate_not_deeper",
            ["--teacher_dir={teacher_dir}", "--student_num_layers=1", "--intermediate_num_layers=1"],
            "--intermediate_num_layers=1: each must be deeper than --student_num_layers=1",
        ),
        (
            "intermediate_as_deep_as_the_teacher",
            ["--teacher_dir={teacher_dir}", "--student_num_layers=1", "--intermediate_num_layers=2"],
            "--intermediate_num_layers=2 is not below the teacher's 2 layers",
        ),
        (
            "intermediate_without_student_num_layers",
            ["--teacher_dir={teacher_dir}", "--student_model_dir={model_dir}", "--intermediate_num_layers=1"],
            "--intermediate_num_layers needs --student_num_layers",
        ),
        (
            "intermediate_not_an_integer",
            ["--teacher_dir={teacher_dir}", "--student_num_layers=1", "--intermediate_num_layers=two"],
            "--intermediate_num_layers: expected integers",
        ),
        (
            "output_exists",
            ["--teacher_dir={teacher_dir}", "--student_num_layers=1", "--output_dir={existing}"],
            "not empty",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(teacher, bad_input_files, tmp_path, capfd, case, extra, expected):
    from experiments import distill as tool

    files = dict(teacher, **bad_input_files)
    output_dir = str(tmp_path / "out")
    argv = [f"--train_file={teacher['train_file']}", "--text_a_column=sentence", f"--output_dir={output_dir}"]
    argv += [a.format(**files) for a in extra]
    existing_before = sorted(os.listdir(bad_input_files["existing"]))
    capfd.readouterr()
    code = run_main(tool, argv, program="distill")
    err = capfd.readouterr().err
    assert code == 2, err[-3000:]
    assert err.startswith("distill: error: ") and err.count("\n") == 1, err[-3000:]
    assert expected in err
    assert not os.path.exists(output_dir)
    assert sorted(os.listdir(bad_input_files["existing"])) == existing_before


def test_teacher_logits_file_is_read_only_when_it_has_a_row_per_feature(tmp_path):
    from bert_tf.jobs import distillation as job
    from bert_tf.jobs.distillation.teacher_logits import read_logits, with_teacher_logits
    from bert_tf.tasks.classification import ClassificationTask

    features = {"text_a": np.array(["a", "b", "c"]), "label": np.array([0, 1, 0])}
    kept = np.array([[1.0, -1.0], [2.0, -2.0], [3.0, -3.0]], np.float32)
    path = str(tmp_path / "logits.npy")
    np.save(path, kept)
    # No tokenizer and no teacher model: the logits can only come from the file.
    task = ClassificationTask(None, 8, ["0", "1"])
    with_logits = with_teacher_logits(task, None, features, None, 8, None, path)
    np.testing.assert_array_equal(with_logits[job.TEACHER_LOGITS_KEY], kept)
    np.testing.assert_array_equal(with_logits[job.LABEL_WEIGHT_KEY], [1, 1, 1])

    np.save(path, kept[:2])  # another data set's: one row short
    assert read_logits(path, 3) is None and read_logits(str(tmp_path / "none.npy"), 3) is None
    (tmp_path / "corrupt.npy").write_bytes(b"not numpy")
    assert read_logits(str(tmp_path / "corrupt.npy"), 3) is None


def test_teacher_logits_key_changes_with_what_the_teacher_labels(teacher, tmp_path):
    from bert_tf.jobs import distillation as job
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig

    train_file = tmp_path / "train.tsv"
    shutil.copy(teacher["train_file"], train_file)
    config = job.DistillationConfig(teacher_dir=teacher["teacher_dir"])
    data = FinetuningDataConfig(train_file=str(train_file), text_a_column="sentence")
    key = job.teacher_logits_key(config, data, seed=1)
    assert key == job.teacher_logits_key(config, data, seed=2)  # no augmented copies: the seed draws nothing

    with open(train_file, "a", encoding="utf-8") as f:  # the same file name, other contents
        f.write("one more line\t1\n")
    edited = job.teacher_logits_key(config, data, seed=1)
    longer = job.teacher_logits_key(dataclasses.replace(config, max_seq_length=64), data, seed=1)
    augmented = dataclasses.replace(config, augmented_copies=2)
    copies = {job.teacher_logits_key(augmented, data, seed) for seed in (1, 2)}
    assert len({key, edited, longer, *copies}) == 5


# --- the frontier ----------------------------------------------------------------------


def test_frontier_reports_every_model_and_form_with_interleaved_speeds(teacher, tmp_path):
    from experiments import distill_frontier

    output_dir = tmp_path / "frontier"
    argv = [
        f"--teacher_dir={teacher['teacher_dir']}",
        f"--output_dir={output_dir}",
        f"--train_file={teacher['train_file']}",
        f"--eval_file={teacher['eval_file']}",
        "--text_a_column=sentence",
        "--student_layers=1",
        "--seeds=3,4",
        "--forms=float32",  # the int8 and bfloat16 forms: tests/test_distillation_inference.py
        "--num_train_steps=20",
        "--learning_rate=1e-3",
        *synthetic.ORIGINAL_UPDATE_FLAGS,
        "--steps_per_loop=10",
        "--speed_examples=40",
        "--speed_rounds=2",
        "--eval_batch_size=32",
        "--max_seq_length=16",
    ]
    assert run_main(distill_frontier, argv) == 0
    with open(output_dir / "report.json") as f:
        report = json.load(f)
    rows = {(row["model"], row["form"]): row for row in report["rows"]}
    assert sorted(rows) == [("layers_1", "float32"), ("teacher", "float32")]
    # The teacher's float32 row is the reference; its metric is what the fine-tuning job measured.
    assert rows["teacher", "float32"]["speedup"] == 1.0 and rows["teacher", "float32"]["metric_change"] == 0.0
    assert rows["teacher", "float32"]["metric"] == pytest.approx(teacher["teacher_results"]["accuracy"])
    for row in rows.values():
        assert len(row["round_seconds"]) == 2 and row["sequences_per_second"] > 0
        assert os.path.exists(os.path.join(row["export_dir"], "saved_model.pb"))
    assert report["speed"]["examples"] == 40 and rows["layers_1", "float32"]["num_layers"] == 1
    # A student's metric is the mean of its seeds' own evaluations, each distilled with its seed.
    student = rows["layers_1", "float32"]
    assert report["seeds"] == [3, 4] and len(student["metric_per_seed"]) == 2
    assert student["metric"] == pytest.approx(sum(student["metric_per_seed"]) / 2)
    assert min(student["metric_per_seed"]) >= 0.8  # the keyword task, which the teacher has learned
    weights = [
        (output_dir / "students" / "layers_1" / f"seed_{seed}" / "weights.safetensors").read_bytes() for seed in (3, 4)
    ]
    assert weights[0] != weights[1]  # each seed its own dropout and batch order
    assert rows["teacher", "float32"]["metric_per_seed"] == [rows["teacher", "float32"]["metric"]]
    # The teacher labelled the 320 training sentences once for both students.
    (logits_file,) = (output_dir / "teacher_logits").glob("*.npy")
    assert np.load(logits_file).shape == (320, 2)
    assert (output_dir / "frontier.png").stat().st_size > 1000
    assert "| layers_1 | 1 | float32 |" in (output_dir / "report.md").read_text()
    assert report["distillation"] == {"temperature": 2.0, "alpha": 0.5, "intermediate_num_layers": []}


def test_frontier_trains_each_model_of_a_seeds_route_once_for_all_its_students(
    teacher, deep_teacher, tmp_path, monkeypatch
):
    """Students of 2 and 1 layers through 3 and 2 on a 4-layer teacher: the 1-layer student's route restores the
    2-layer student's intermediate and the 2-layer student itself, which start it the same way."""
    from experiments import distill_frontier

    copies = _record_layer_copies(monkeypatch)
    output_dir = tmp_path / "frontier"
    argv = [
        f"--teacher_dir={deep_teacher}",
        f"--output_dir={output_dir}",
        f"--train_file={teacher['train_file']}",
        f"--eval_file={teacher['eval_file']}",
        "--text_a_column=sentence",
        "--student_layers=1,2",
        "--intermediate_num_layers=3,2",
        "--forms=float32",
        "--num_train_steps=20",
        "--learning_rate=1e-3",
        *synthetic.ORIGINAL_UPDATE_FLAGS,
        "--steps_per_loop=10",
        "--speed_examples=20",
        "--speed_rounds=1",
        "--max_seq_length=16",
    ]
    assert run_main(distill_frontier, argv) == 0

    # Three trainings, each from the model before it: the 3-layer intermediate from the teacher, the 2-layer
    # student from it, the 1-layer student from the 2-layer one as it finished training. Nothing twice.
    assert [(depth, layers) for depth, layers, _ in copies] == [(4, [0, 2, 3]), (3, [0, 2]), (2, [1])]
    student_2, student_1 = (output_dir / "students" / f"layers_{n}" / "seed_42" for n in (2, 1))
    assert _holds_trained_kernel(student_2, copies[2][2].encoder.transformer_layers[1].attention.query.kernel)
    assert [name for name in os.listdir(student_1) if name.startswith("intermediate_")] == []
    with open(student_1 / "distillation.json") as f:
        settings = json.load(f)
    assert settings["student"]["intermediate_num_layers"] == [3, 2]
    # Recorded relative to the student's directory, so the frontier's directory may move and still resume.
    sibling = os.path.join("..", "..", "layers_2", "seed_42")
    assert settings["trained_intermediates"] == {"3": os.path.join(sibling, "intermediate_3_layers"), "2": sibling}
    with open(output_dir / "report.json") as f:
        report = json.load(f)
    assert sorted(row["model"] for row in report["rows"]) == ["layers_1", "layers_2", "teacher"]
    assert min(row["metric"] for row in report["rows"]) >= 0.8  # the keyword task, which every student learns

    # Moved, and run again for a new report, the frontier resumes every student: nothing is trained again.
    moved = tmp_path / "moved"
    shutil.move(output_dir, moved)
    os.remove(moved / "report.json")
    copies.clear()
    assert run_main(distill_frontier, [arg.replace(str(output_dir), str(moved)) for arg in argv]) == 0
    assert copies == [] and os.path.exists(moved / "report.json")
    student_2 = moved / "students" / "layers_2" / "seed_42"

    # An intermediate student trained for another schedule is refused, not started from.
    with pytest.raises(ValueError, match="no 3-layer student trained for 30 steps"):
        distill(
            str(tmp_path / "longer"),
            teacher_dir=deep_teacher,
            student_num_layers=1,
            intermediate_num_layers=(3,),
            train_file=teacher["train_file"],
            text_a_column="sentence",
            max_seq_length=16,
            num_train_steps=30,
            trained_intermediates={3: str(student_2 / "intermediate_3_layers")},
        )


@pytest.mark.parametrize(
    "flag,expected",
    [
        ("--intermediate_num_layers=2", "--intermediate_num_layers: [2] not below the teacher's 2 layers"),
        ("--student_layers=2", "--student_layers: [2] not below the teacher's 2 layers"),
        ("--seeds=1,x", "--seeds: expected integers"),
    ],
)
def test_frontier_bad_input_exits_2_with_one_line_before_any_work(teacher, tmp_path, capfd, flag, expected):
    from experiments import distill_frontier

    output_dir = tmp_path / "frontier"
    argv = [
        f"--teacher_dir={teacher['teacher_dir']}",
        f"--output_dir={output_dir}",
        f"--train_file={teacher['train_file']}",
        f"--eval_file={teacher['eval_file']}",
        "--text_a_column=sentence",
        "--student_layers=1",
        flag,
    ]
    capfd.readouterr()
    code = run_main(distill_frontier, argv)
    err = capfd.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err, err[-3000:]
    assert not output_dir.exists()


def test_frontier_config_routes_students_deepest_first():
    from bert_tf.jobs.distillation import FrontierConfig

    config = FrontierConfig(teacher_dir="t", student_layers=("1", "3"), intermediate_num_layers=("4", "5", "4"))
    assert config.intermediate_num_layers == (5, 4) and config.student_layers == (1, 3)
