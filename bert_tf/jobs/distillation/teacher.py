"""The teacher: a fine-tuned model directory, checked; its task plug-in for the user's data; its frozen model."""

from __future__ import annotations

import dataclasses
import os

from absl import logging

from bert_tf import checkpoints
from bert_tf.checkpoints.model_source import TASK_CONFIG_NAME, ModelSource, ResolvedModel, read_task_config
from bert_tf.errors import JobArgumentError
from bert_tf.jobs.distillation.config import DistillationConfig
from bert_tf.jobs.finetuning import inputs as finetuning_inputs
from bert_tf.jobs.finetuning import phases as finetuning_phases
from bert_tf.jobs.finetuning.config import FinetuningDataConfig
from bert_tf.tasks import registry
from bert_tf.tasks.long_text import LongTextConfig
from bert_tf.tasks.task_config import FinetuningTaskConfig


@dataclasses.dataclass
class Teacher:
    """A fine-tuned model directory: its resolved files (`source`) and its `task_config.json` (`task_config`)."""

    source: ResolvedModel
    task_config: dict

    @property
    def task_type(self) -> str:
        return self.task_config["task"]

    def max_seq_length(self, override: int | None) -> int:
        """`override`, else the length the teacher was fine-tuned at (128 where its task_config.json has none)."""
        return override or self.task_config.get("max_seq_length") or 128

    def task(self, task: FinetuningTaskConfig, data: FinetuningDataConfig):
        """(examples reader, task plug-in) of `task` for `data`, with the teacher's labels and tokenizer."""
        reader = finetuning_inputs.task_reader(task, data)
        tokenizer = finetuning_inputs.task_tokenizer(self.source)
        return reader, finetuning_inputs.build_task(task, tokenizer, self.task_config.get("label_list"), reader)


def read_teacher(config: DistillationConfig) -> Teacher:
    """`config.teacher_dir`, checked: a distillable task's model directory with trained weights."""
    teacher_dir = config.teacher_dir
    if not os.path.isdir(teacher_dir):
        raise JobArgumentError(f"--teacher_dir: directory not found: {teacher_dir}")
    task_config_path = os.path.join(teacher_dir, TASK_CONFIG_NAME)
    if not os.path.exists(task_config_path):
        raise JobArgumentError(
            f"--teacher_dir={teacher_dir} holds no task head ({TASK_CONFIG_NAME} is missing): give a "
            "model directory that experiments.finetune trained."
        )
    task_config = read_task_config(teacher_dir)
    distillable = [name for name in registry.task_names() if registry.task_class(name).distillation_loss(name)]
    if task_config.get("task") not in distillable:
        raise JobArgumentError(
            f"--teacher_dir={teacher_dir} holds a {task_config.get('task')!r} model; distillation takes "
            f"{', '.join(distillable)}."
        )
    try:
        source = ModelSource(model_dir=teacher_dir, do_lower_case=config.do_lower_case).resolve()
    except JobArgumentError as e:
        raise JobArgumentError(f"--teacher_dir={teacher_dir}: {e}") from None
    from bert_tf.checkpoints import weights_file

    if checkpoints.latest_checkpoint(teacher_dir) is None and not os.path.exists(
        weights_file.weights_path(teacher_dir)
    ):
        raise JobArgumentError(f"--teacher_dir={teacher_dir} holds no trained weights (no checkpoint).")
    return Teacher(source, task_config)


def check_sentence_pair(teacher: Teacher, task_object, teacher_dir: str) -> None:
    """The data have single texts or pairs as the teacher was trained on (`--text_b_column`)."""
    if bool(task_object.config().get("sentence_pair")) != bool(teacher.task_config.get("sentence_pair")):
        raise JobArgumentError(
            f"The teacher in --teacher_dir={teacher_dir} was trained on "
            f"{'sentence pairs' if teacher.task_config.get('sentence_pair') else 'single sentences'}; "
            "set --text_b_column to match."
        )


def student_long_text(teacher: Teacher, config: DistillationConfig) -> LongTextConfig:
    """How the student reads texts longer than the window: as the teacher was fine-tuned (its soft targets are
    per document, pooled over its windows), logged. An explicit `config.long_text_config` that differs is refused,
    naming the flag, as are the options that cannot combine with the teacher's windows yet."""
    recorded = LongTextConfig.from_recorded(teacher.task_config.get("long_text"), TASK_CONFIG_NAME)
    given = config.long_text_config and config.long_text_config.resolved(recorded.windows)
    if given is not None and given != recorded:
        name = next(
            f.name for f in dataclasses.fields(LongTextConfig) if getattr(given, f.name) != getattr(recorded, f.name)
        )
        raise JobArgumentError(
            f"--{name}={getattr(given, name)} differs from the teacher's --{name}={getattr(recorded, name)} "
            f"({config.teacher_dir}/{TASK_CONFIG_NAME}): the student reads long texts as its teacher was trained; "
            f"leave --{name} out."
        )
    if recorded.long_text != "truncate":
        logging.info("The student reads long texts as its teacher was fine-tuned: %s.", recorded)
    if recorded.windows:
        for flag, value in (("packing", config.packing), ("hidden_loss_weight", config.hidden_loss_weight)):
            if value:
                raise JobArgumentError(
                    f"--{flag} does not combine with the teacher's --long_text=windows ({config.teacher_dir}/"
                    f"{TASK_CONFIG_NAME}) yet: leave --{flag} out."
                )
    return recorded


def load_teacher_model(task_object, teacher: Teacher):
    """The teacher's task model with its trained weights, frozen."""
    from bert_tf.checkpoints.model_dir import restore_from_model_dir

    model = finetuning_phases.build_model(task_object, teacher.source.config)
    try:
        restore_from_model_dir(model, teacher.source.checkpoint)
    except ValueError as e:
        raise JobArgumentError(f"--teacher_dir: {e}") from None
    model.trainable = False
    return model
