"""What `distillation.json` records, the check that `output_dir` is new or this run's own, and the model files.

An `output_dir` holding the same settings is the same distillation, which resumes; any other non-empty
directory is refused before anything is written.
"""

from __future__ import annotations

import dataclasses
import json
import os

from bert_tf import file_io
from bert_tf.checkpoints.model_source import TASK_CONFIG_NAME
from bert_tf.errors import JobArgumentError
from bert_tf.jobs.distillation.config import DISTILLATION_CONFIG_NAME, DistillationConfig, StudentConfig
from bert_tf.jobs.distillation.route import Student
from bert_tf.jobs.distillation.teacher import Teacher
from bert_tf.jobs.finetuning.files import task_record


def on_route(trained_intermediates: dict | None, student: Student) -> dict:
    """{depth: absolute directory} of the `trained_intermediates` whose depth is on `student`'s route."""
    depths = {stage.num_layers for stage in student.intermediate}
    return {depth: os.path.abspath(path) for depth, path in (trained_intermediates or {}).items() if depth in depths}


def run_settings(
    config: DistillationConfig,
    student: StudentConfig,
    student_model: Student,
    teacher: Teacher,
    max_seq_length: int,
    trained_intermediates: dict,
    output_dir: str,
) -> dict:
    """What `distillation.json` records; an `output_dir` holding the same settings is resumed."""
    settings = {
        "teacher_dir": os.path.abspath(config.teacher_dir),
        "teacher_task": teacher.task_config,
        "student": {k: v for k, v in dataclasses.asdict(student).items() if v not in (None, ())},
        "teacher_layers": student_model.teacher_layers,
        "student_config": student_model.config.to_dict(),
        "temperature": config.temperature,
        "alpha": config.alpha,
        "hidden_loss_weight": config.hidden_loss_weight,
        "unlabeled_file": os.path.abspath(config.unlabeled_file) if config.unlabeled_file else None,
        "augmented_copies": config.augmented_copies,
        "max_seq_length": max_seq_length,
    }
    if config.packing:  # another order of the training batches: another run (unpacked runs keep their record)
        settings["packing"] = True
    if trained_intermediates:
        # Where the route's intermediate students were trained, relative to the student's directory: a frontier's
        # students are siblings, so its output directory still resumes after it is moved.
        settings["trained_intermediates"] = {
            depth: os.path.relpath(path, output_dir) for depth, path in trained_intermediates.items()
        }
    return settings


def check_output_dir(output_dir: str, settings: dict) -> None:
    """`output_dir` is missing, empty, or holds a run of these same `settings` (which resumes)."""
    if not os.path.exists(output_dir):
        return
    if not os.path.isdir(output_dir):
        raise JobArgumentError(f"--output_dir={output_dir} exists and is not a directory.")
    if not os.listdir(output_dir):
        return
    path = os.path.join(output_dir, DISTILLATION_CONFIG_NAME)
    saved = None
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
        except (OSError, json.JSONDecodeError):
            saved = None
    expected = json.loads(json.dumps(settings))
    if saved != expected:
        raise JobArgumentError(
            f"--output_dir={output_dir} exists and is not empty"
            + (f" ({_other_run(saved, expected)})" if saved is not None else "")
            + "; use a new --output_dir (the same command resumes its own run)."
        )


def _other_run(saved: dict, expected: dict) -> str:
    """What the run in an output directory is: this distillation with the other batches (a run started with
    --nopacking, or before packed rows were the default, resumes with --nopacking), or another one."""
    if {k: v for k, v in saved.items() if k != "packing"} == {k: v for k, v in expected.items() if k != "packing"}:
        flag = "--packing" if saved.get("packing") else "--nopacking"
        return f"this distillation's run with {flag}: give {flag} to resume it"
    return "another distillation's run"


def write_model_files(output_dir, student: Student, teacher: Teacher, task_object, data, settings) -> None:
    """`bert_config.json` (the student's), the teacher's `vocab.txt`, `task_config.json` and `distillation.json`."""
    from bert_tf.checkpoints import model_dir

    model_dir.write_model_files(output_dir, student.config, teacher.source.vocab_file, keep_existing=True)
    record = task_record(task_object, teacher.source.do_lower_case, data)
    file_io.write_json(os.path.join(output_dir, TASK_CONFIG_NAME), record)
    file_io.write_json(os.path.join(output_dir, DISTILLATION_CONFIG_NAME), settings)
