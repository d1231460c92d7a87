"""The student's route: the models trained in turn, each from the one before it, the student last.

With `--student_num_layers` the route is the intermediate students (deepest first) and then the student, each
starting from evenly spaced layers of the model before it (the teacher first); a student from
`--student_model_dir` or `--student_bert_config_file` is a route of one model.
"""

from __future__ import annotations

import dataclasses
import os

from bert_tf.checkpoints.model_source import ModelSource, check_compatible, read_config
from bert_tf.errors import JobArgumentError
from bert_tf.jobs.distillation.config import DistillationConfig, StudentConfig
from bert_tf.jobs.distillation.teacher import Teacher


@dataclasses.dataclass
class Student:
    """One model of the route: its config, where its weights start, and (the student's) the route before it."""

    config: object  # BertConfig
    checkpoint: str | None  # pretrained encoder weights (--student_model_dir)
    teacher_layers: list | None  # the teacher layer each student layer starts from / is matched with
    # Initialised from `source_layers` of the teacher's weights, or of the intermediate student before it
    # (--student_num_layers).
    source_layers: list | None = None
    intermediate: list = dataclasses.field(default_factory=list)  # Students trained first, deepest first

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    def stages(self) -> tuple:
        """The route in training order: the intermediate students, then this one."""
        return (*self.intermediate, self)


def intermediate_dir_name(num_layers: int) -> str:
    """The subdirectory of the student's `output_dir` where the intermediate student of `num_layers` trains."""
    return f"intermediate_{num_layers}_layers"


def resolve_student(student: StudentConfig, teacher: Teacher, config: DistillationConfig, max_seq_length) -> Student:
    """The student (its route in `intermediate`) that `student` describes, checked against the teacher."""
    from bert_tf.distillation import students

    teacher_config = teacher.source.config
    if student.student_num_layers is not None:
        resolved = _layered_route(student, teacher_config)
    elif student.student_model_dir is not None:
        resolved = _pretrained_student(student.student_model_dir, teacher, config.do_lower_case, max_seq_length)
    else:
        resolved = _configured_student(student.student_bert_config_file, teacher)
    check_compatible(resolved.config, None, max_seq_length)
    if config.hidden_loss_weight and resolved.teacher_layers is None:
        if resolved.num_layers > teacher_config.num_hidden_layers:
            raise JobArgumentError(
                f"--hidden_loss_weight: the student has more layers ({resolved.num_layers}) "
                f"than the teacher ({teacher_config.num_hidden_layers}) to match them with."
            )
        resolved.teacher_layers = students.evenly_spaced_layers(teacher_config.num_hidden_layers, resolved.num_layers)
    return resolved


def _layered_route(student: StudentConfig, teacher_config) -> Student:
    from bert_tf.distillation import students

    if student.student_num_layers > teacher_config.num_hidden_layers:
        raise JobArgumentError(
            f"--student_num_layers={student.student_num_layers} exceeds the teacher's "
            f"{teacher_config.num_hidden_layers} layers: a student takes a subset of them."
        )
    if student.intermediate_num_layers and student.intermediate_num_layers[0] >= teacher_config.num_hidden_layers:
        raise JobArgumentError(
            f"--intermediate_num_layers={student.intermediate_num_layers[0]} is not below the teacher's "
            f"{teacher_config.num_hidden_layers} layers."
        )
    # Each model of the route starts from evenly spaced layers of the one before; `teacher_layers` composes
    # the maps, so every student's layers (and hidden-state pairs) name the teacher layers they descend from.
    chain, teacher_layers = [], list(range(teacher_config.num_hidden_layers))
    for depth in (*student.intermediate_num_layers, student.student_num_layers):
        layers = students.evenly_spaced_layers(len(teacher_layers), depth)
        teacher_layers = [teacher_layers[i] for i in layers]
        config_of_depth = students.student_config(teacher_config, depth)
        chain.append(Student(config_of_depth, None, teacher_layers, source_layers=layers))
    resolved = chain[-1]
    resolved.intermediate = chain[:-1]
    return resolved


def _pretrained_student(model_dir: str, teacher: Teacher, do_lower_case: bool, max_seq_length) -> Student:
    from bert_tf.checkpoints.model_dir import find_checkpoint

    if not os.path.isdir(model_dir):
        raise JobArgumentError(f"--student_model_dir: directory not found: {model_dir}")
    try:
        source = ModelSource(model_dir=model_dir, do_lower_case=do_lower_case).resolve(max_seq_length)
    except JobArgumentError as e:
        raise JobArgumentError(f"--student_model_dir={model_dir}: {e}") from None
    if source.vocab != teacher.source.vocab:
        line = next(
            (i + 1 for i, (a, b) in enumerate(zip(source.vocab, teacher.source.vocab)) if a != b),
            min(len(source.vocab), len(teacher.source.vocab)) + 1,
        )
        raise JobArgumentError(
            f"--student_model_dir: {source.vocab_file} differs from the teacher's vocabulary "
            f"{teacher.source.vocab_file} (first at line {line}); a student must read the teacher's word pieces."
        )
    try:
        checkpoint = find_checkpoint(model_dir)
    except FileNotFoundError as e:
        raise JobArgumentError(f"--student_model_dir: {e}") from None
    return Student(source.config, checkpoint, None)


def _configured_student(config_file: str, teacher: Teacher) -> Student:
    student_config = read_config(config_file, "student_bert_config_file")
    check_compatible(
        student_config,
        len(teacher.source.vocab),
        vocab_flag="teacher_dir",
        vocab_file=teacher.source.vocab_file,
        config_file=config_file,
    )
    return Student(student_config, None, None)
