"""Distillation from a teacher fine-tuned with --long_text: its soft targets are per document (its windows pooled
as `experiments.finetune --do_predict` pools them, here by learned attention), the student inherits the teacher's
cut and learns a label that sits only in a document's last window; a conflicting flag exits 2 naming it."""

import json
import os

import numpy as np
import pytest

from bert_tf.errors import JobArgumentError
from bert_tf.tasks import long_text
from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import listening_to_absl, run_main
from tests.helpers.jobs import distill, finetune
from tests.test_long_text import COMMON, last_window_rows

# The teacher pools its windows by learned attention: its soft targets come from that pooling (as its own
# --do_predict's), and the student, which reads long texts as the teacher was trained, learns one of its own.
TEACHER_LONG_TEXT = long_text.LongTextConfig("windows", window_pooling="attention")


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A windows classifier fine-tuned on documents whose label is in their last window; it predicts the student's
    training texts and the longer texts only it labels, in the order the distillation reads them."""
    root = tmp_path_factory.mktemp("long_distill")
    header = ["sentence", "label"]
    student_rows = last_window_rows(192, 4)
    # 66 to 106 words: 5 to 8 windows of 14 pieces, more than any training document's 4 (padded window slots).
    unlabeled = [" ".join([text] * 2) for text, _ in last_window_rows(8, 5)]
    files = dict(
        train_file=synthetic.write_tsv(str(root / "train.tsv"), header, last_window_rows(256, 1)),
        eval_file=synthetic.write_tsv(str(root / "dev.tsv"), header, last_window_rows(100, 2)),
        predict_file=synthetic.write_tsv(
            str(root / "teacher_reads.tsv"), ["sentence"], [(t,) for t, _ in student_rows] + [(t,) for t in unlabeled]
        ),
    )
    teacher_dir = str(root / "teacher")
    results = finetune(
        "classification",
        teacher_dir,
        model_dir=synthetic.make_model_dir(str(root / "model")),
        text_a_column="sentence",
        num_train_steps=200,
        do_train=True,
        do_eval=True,
        do_predict=True,
        long_text_config=TEACHER_LONG_TEXT,
        **files,
        **COMMON,
    )
    assert results["accuracy"] >= 0.95
    (root / "unlabeled.txt").write_text("\n".join(unlabeled) + "\n", encoding="utf-8")
    return dict(
        root=root,
        teacher_dir=teacher_dir,
        student_train=synthetic.write_tsv(str(root / "student_train.tsv"), header, student_rows),
        eval_file=files["eval_file"],
        unlabeled_file=str(root / "unlabeled.txt"),
    )


def test_student_learns_the_last_window_from_per_document_soft_targets(teacher, caplog):
    root = teacher["root"]
    output_dir = str(root / "student")
    student_config = synthetic.write_json(str(root / "student_config.json"), synthetic.tiny_config().to_dict())
    with listening_to_absl(caplog.handler):
        results = distill(
            output_dir,
            teacher_dir=teacher["teacher_dir"],
            student_bert_config_file=student_config,  # a random start: what it knows it learns here
            train_file=teacher["student_train"],
            eval_file=teacher["eval_file"],
            unlabeled_file=teacher["unlabeled_file"],
            text_a_column="sentence",
            num_train_steps=250,
            **dict(COMMON, max_seq_length=None, train_batch_size=16),
        )
    assert "reads long texts as its teacher was fine-tuned" in caplog.text
    # The default batches: one document a row, for the reason logged (an explicit --packing exits 2, below).
    assert "one example a row, not packed rows: the teacher's --long_text=windows" in caplog.text
    assert results["teacher"]["accuracy"] >= 0.95 and results["student"]["accuracy"] >= 0.9
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f)["long_text"] == TEACHER_LONG_TEXT.recorded()

    # The soft targets: one row per document (192 labelled, 8 only the teacher reads), the teacher's windows pooled
    # as its own --do_predict pooled them (predictions.tsv's probabilities, 6 decimals).
    (logits_file,) = (root / "student" / "teacher_logits").glob("*.npy")
    logits = np.load(logits_file).astype(np.float64)
    assert logits.shape == (192 + 8, 2)
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    with open(os.path.join(teacher["teacher_dir"], "predictions.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    predicted = np.array([[float(p) for p in row[-2:]] for row in rows])
    np.testing.assert_allclose(probabilities, predicted, atol=2e-6)
    assert np.abs(predicted - 0.5).max() > 0.4  # confident targets: the comparison means something


def test_head_tail_teacher_is_inherited_and_conflicts_are_refused(teacher):
    from bert_tf.jobs.distillation import DistillationConfig
    from bert_tf.jobs.distillation.teacher import Teacher, student_long_text

    head_tail = Teacher(None, {"task": "classification", "long_text": long_text.LongTextConfig("head_tail").recorded()})
    config = DistillationConfig(teacher_dir="t", packing=True)
    assert student_long_text(head_tail, config).long_text == "head_tail"  # head_tail packs as truncation does
    assert student_long_text(Teacher(None, {"task": "classification"}), config) == long_text.LongTextConfig("truncate")
    given = DistillationConfig(teacher_dir="t", long_text_config=long_text.LongTextConfig("windows"))
    with pytest.raises(JobArgumentError, match="--long_text=windows differs from the teacher's --long_text=head_tail"):
        student_long_text(head_tail, given)


def test_flags_that_conflict_with_the_teachers_windows_exit_2_naming_them(teacher, tmp_path, capfd):
    from experiments import distill as tool

    output_dir = tmp_path / "student"
    common = [
        f"--teacher_dir={teacher['teacher_dir']}",
        "--student_num_layers=1",
        f"--train_file={teacher['student_train']}",
        "--text_a_column=sentence",
        f"--output_dir={output_dir}",
    ]
    for extra, named in [
        (["--long_text=truncate"], "--long_text=truncate differs from the teacher's --long_text=windows"),
        (["--long_text=windows", "--window_stride=7"], "--window_stride=7 differs from the teacher's"),
        (["--window_pooling=mean"], "--window_pooling=mean differs from the teacher's --window_pooling=attention"),
        (["--packing"], "--packing does not combine with the teacher's --long_text=windows"),
        (["--hidden_loss_weight=1"], "--hidden_loss_weight does not combine with the teacher's --long_text=windows"),
    ]:
        assert run_main(tool, common + extra, program="distill") == 2
        assert named in capfd.readouterr().err
        assert not output_dir.exists()
