"""`run_distillation`: the stages in order, teacher -> route -> data -> labels -> stages -> evaluation."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from absl import logging

from bert_tf.checkpoints.model_source import check_compatible
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.jobs.distillation import data as distillation_data
from bert_tf.jobs.distillation import evaluation, settings, stages, teacher_logits
from bert_tf.jobs.distillation.config import DistillationConfig, StudentConfig
from bert_tf.jobs.distillation.route import Student, resolve_student
from bert_tf.jobs.distillation.teacher import (
    Teacher,
    check_sentence_pair,
    load_teacher_model,
    read_teacher,
    student_long_text,
)
from bert_tf.jobs.finetuning import inputs as finetuning_inputs
from bert_tf.jobs.finetuning.config import DEFAULT_SCHEDULE, FinetuningDataConfig, check_data_sources
from bert_tf.tasks.task_config import FinetuningTaskConfig

if TYPE_CHECKING:
    from bert_tf.data.finetuning_data import ExamplesReader
    from bert_tf.training import RuntimeConfig, TrainingConfig


def run_distillation(
    output_dir: str,
    config: DistillationConfig,
    student: StudentConfig,
    data: FinetuningDataConfig,
    training_config: TrainingConfig | None = None,
    runtime: RuntimeConfig | None = None,
    *,
    do_eval: bool = True,
    do_predict: bool = False,
    teacher_logits_file: str | None = None,
    trained_intermediates: dict | None = None,
) -> dict:
    """Trains the student, then evaluates it and the teacher; returns {"student": metrics, "teacher": metrics}.

    Args:
      output_dir: the student's model directory; new (or empty), or this same distillation's, which resumes.
      config, student: see their classes.
      data: the training (`train_file`), evaluation and prediction data, as for fine-tuning (the labels are
        the teacher's; `label_list` is not used).
      training_config: the `TrainingConfig`; None: fine-tuning's `DEFAULT_SCHEDULE`.
      runtime: strategy, precision and seeds; None: `RuntimeConfig(seed=DEFAULT_SEED)`.
      do_eval, do_predict: evaluate on `data.eval_file` (when given), predict on `data.predict_file`.
      teacher_logits_file: an `.npy` file that keeps the teacher's logits on the training (and unlabeled)
        features (`teacher_logits.with_teacher_logits`). None: one in `output_dir/teacher_logits/` named by
        `teacher_logits_key`. `run_frontier` passes one file for all the students of one teacher and data.
      trained_intermediates: {depth: a directory where a model of that depth on this same route (teacher, data,
        schedule, losses and seed) finished training}, restored instead of trained again (`run_frontier`
        passes a deeper student's).

    Raises:
      DataError: bad input data, naming the file and line or record.
      JobArgumentError (a ValueError): a bad teacher, student or output directory, naming the flag.
    """
    from bert_tf import training

    training_config = training_config if training_config is not None else training.TrainingConfig(**DEFAULT_SCHEDULE)
    runtime = runtime if runtime is not None else training.RuntimeConfig(seed=DEFAULT_SEED)
    do_eval = do_eval and bool(data.eval_file or data.tfds_name)
    # Everything is read and checked before TensorFlow starts and before anything is written.
    job = _read_and_check(
        output_dir, config, student, data, runtime, training_config, trained_intermediates, do_eval, do_predict
    )
    with training.training_runtime(runtime, batch_sizes={"train_batch_size": data.train_batch_size}) as strategy:
        training.check_microbatches(
            training_config.num_microbatches, data.train_batch_size, strategy.num_replicas_in_sync
        )
        logging.info("%s", job.packing_note)
        # The settings first: a run killed while the teacher labels the data resumes in its own directory.
        if training.is_chief(strategy):
            _write_settings(job)
        teacher_model = _label_training_data(job, teacher_logits_file, runtime.seed, strategy)
        run = _route_training(job, teacher_model, training_config, strategy, runtime)
        trained, step = stages.train_route(run, job.student_model, job.output_dir, job.trained_intermediates)
        if not training.is_chief(strategy):
            return {}
        evaluation.write_student(job.output_dir, trained)
        return evaluation.evaluate_and_predict(
            job.inputs, trained, teacher_model, step, data, strategy, runtime, do_eval=do_eval, do_predict=do_predict
        )


@dataclasses.dataclass
class _DistillationJob:
    """What `run_distillation` read and checked before TensorFlow starts: teacher, student, route and data.

    `config`: the job's, with `packing` resolved (`DistillationConfig.resolve_packing`); `packing_note` says
    which batches and why.
    """

    output_dir: str
    config: DistillationConfig
    packing_note: str
    data: FinetuningDataConfig
    teacher: Teacher
    student_model: Student
    trained_intermediates: dict
    run_settings: dict
    reader: ExamplesReader
    inputs: finetuning_inputs.FinetuningInputs
    unlabeled_features: object  # the task plug-in's features of the teacher-only texts, or None


def _read_and_check(
    output_dir, config, student, data, runtime, training_config, trained_intermediates, do_eval, do_predict
) -> _DistillationJob:
    """Teacher -> student route -> data, read and checked; nothing is written."""
    output_dir, num_microbatches = os.path.abspath(output_dir), training_config.num_microbatches
    teacher = read_teacher(config)
    max_seq_length = teacher.max_seq_length(config.max_seq_length)
    check_compatible(teacher.source.config, None, max_seq_length)
    student_model = resolve_student(student, teacher, config, max_seq_length)
    check_data_sources(data, True, do_eval, do_predict)
    distillation_data.check_unlabeled_file(config)
    # Packed rows unless the teacher or an option rules them out (logged); an explicit --packing there is refused.
    long_text = student_long_text(teacher, config)
    packing_note = config.packing_note(teacher.task_type, long_text, num_microbatches)
    config = config.resolve_packing(teacher.task_type, long_text, num_microbatches)
    trained_intermediates = settings.on_route(trained_intermediates, student_model)
    run_settings = settings.run_settings(
        config, student, student_model, teacher, max_seq_length, trained_intermediates, output_dir
    )
    settings.check_output_dir(output_dir, run_settings)
    reader, inputs = _teacher_task(output_dir, teacher, config, data, max_seq_length, long_text)
    unlabeled_features = distillation_data.read_inputs(
        inputs, reader, data, config, runtime.seed, do_eval=do_eval, do_predict=do_predict
    )
    return _DistillationJob(
        output_dir,
        config,
        packing_note,
        data,
        teacher,
        student_model,
        trained_intermediates,
        run_settings,
        reader,
        inputs,
        unlabeled_features,
    )


def _write_settings(job: _DistillationJob) -> None:
    """The student's model files and the run's settings, with the data columns the reader used."""
    recorded_data = dataclasses.replace(job.data, **job.reader.columns_used())
    settings.write_model_files(
        job.output_dir, job.student_model, job.teacher, job.inputs.task_object, recorded_data, job.run_settings
    )


def _teacher_task(output_dir, teacher, config: DistillationConfig, data, max_seq_length: int, long_text):
    """(the examples reader, new `FinetuningInputs`) of the teacher's task plug-in for `data`, read as `long_text`
    (`student_long_text`)."""
    task = FinetuningTaskConfig(
        teacher.task_type,
        max_seq_length=max_seq_length,
        dropout_rate=config.dropout_rate,
        bucket_width=config.bucket_width,
        packing=config.packing,
        long_text_config=long_text,
    )
    reader, task_object = teacher.task(task, data)
    check_sentence_pair(teacher, task_object, config.teacher_dir)
    return reader, finetuning_inputs.FinetuningInputs(output_dir, teacher.source, task_object)


def _label_training_data(job: _DistillationJob, logits_file, seed: int, strategy):
    """Loads the teacher's model and adds its logits to the training features (`with_teacher_logits`), kept in
    `logits_file` by the chief (None: `teacher_logits_file`'s)."""
    from bert_tf import training

    if logits_file is None:
        logits_file = teacher_logits.teacher_logits_file(job.output_dir, job.config, job.data, seed)
    inputs = job.inputs
    with strategy.scope():
        teacher_model = load_teacher_model(inputs.task_object, job.teacher)
    inputs.train_features = teacher_logits.with_teacher_logits(
        inputs.task_object,
        teacher_model,
        inputs.train_features,
        job.unlabeled_features,
        job.data.eval_batch_size,
        strategy,
        logits_file if training.is_chief(strategy) else None,
    )
    return teacher_model


def _route_training(job: _DistillationJob, teacher_model, training_config, strategy, runtime):
    """What every stage of the route trains with: the same features, with the same schedule in steps."""
    inputs, batch_size = job.inputs, job.data.train_batch_size
    num_features = inputs.task_object.num_features(inputs.train_features)
    schedule = training_config.in_steps(num_features, batch_size)
    return stages.RouteTraining(inputs, teacher_model, job.config, schedule, batch_size, strategy, runtime)
