"""The route's training: each stage in the project's loop with `DistillationLoss`, from the model before it.

Every stage trains on the same features (with the teacher's logits) with the same schedule; an intermediate
stage trains in `intermediate_<n>_layers/` (or is restored from where the same route already trained it), the
student in `output_dir`. Only the hidden-state loss runs the teacher's encoder inside the step.
"""

from __future__ import annotations

import dataclasses
import os

from absl import logging

from bert_tf import checkpoints
from bert_tf.jobs.distillation.config import DistillationConfig
from bert_tf.jobs.distillation.route import Student, intermediate_dir_name
from bert_tf.jobs.finetuning import phases as finetuning_phases


@dataclasses.dataclass(frozen=True)
class RouteTraining:
    """What every stage of the route trains with.

    `schedule`: the `TrainingConfig` in steps (`TrainingConfig.in_steps`) for batches of `batch_size`.
    """

    inputs: object  # FinetuningInputs, whose train_features carry the teacher's logits
    teacher_model: object
    config: DistillationConfig
    schedule: object  # TrainingConfig
    batch_size: int
    strategy: object
    runtime: object  # RuntimeConfig


def train_route(run: RouteTraining, student: Student, output_dir: str, trained_intermediates: dict):
    """Trains (or restores) every stage of `student`'s route in turn; returns (the student, its step)."""
    trained, step = run.teacher_model, None
    for stage in student.stages():
        if stage is not student and stage.num_layers in trained_intermediates:
            trained = restore_trained(run, stage, trained_intermediates[stage.num_layers])
            continue
        stage_dir = (
            output_dir if stage is student else os.path.join(output_dir, intermediate_dir_name(stage.num_layers))
        )
        trained, step = train_stage(run, stage, stage_dir, trained)
    return trained, step


def restore_trained(run: RouteTraining, stage: Student, model_dir: str):
    """The intermediate student `stage` as it finished training in `model_dir`: its checkpoint of the last step."""
    from bert_tf.checkpoints.model_dir import restore

    num_train_steps = run.schedule.num_train_steps
    checkpoint = checkpoints.latest_checkpoint(model_dir)
    # The loop numbers its checkpoints by step; an earlier one would start the next student from a half-trained one.
    if checkpoint is None or not checkpoint.endswith(f"-{num_train_steps}"):
        raise ValueError(
            f"{model_dir} holds no {stage.num_layers}-layer student trained for {num_train_steps} "
            f"steps (latest checkpoint: {checkpoint})."
        )
    with run.strategy.scope():
        model = finetuning_phases.build_model(run.inputs.task_object, stage.config)
    restore(model, checkpoint)
    logging.info("Restored the %d-layer intermediate student from %s.", stage.num_layers, checkpoint)
    return model


def train_stage(run: RouteTraining, student: Student, model_dir: str, source_model):
    """Trains `student` in `model_dir` (resuming what is there); returns (model, step).

    `source_model`: the task model whose `student.source_layers` a student from the teacher's weights starts
    from: the teacher, or the intermediate student before it.
    """
    from bert_tf.distillation.losses import DistillationLoss
    from bert_tf.training import default_forward, train

    task_object, features, config = run.inputs.task_object, run.inputs.train_features, run.config
    logging.info(
        "***** Distillation into %d layers: %d features, batch size %d, %d steps, teacher layers %s *****",
        student.num_layers,
        task_object.num_features(features),
        run.batch_size,
        run.schedule.num_train_steps,
        student.teacher_layers,
    )

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(run.batch_size)
        seed = run.runtime.seed
        return task_object.dataset(features, per_replica, training=True, seed=seed, input_context=input_context)

    teacher_width = run.teacher_model.encoder.config.hidden_size
    # TinyBERT's learned W_h for a student narrower (or wider) than its teacher: trained and checkpointed with
    # the student (so a resumed run is exact), but not part of the student that is written or evaluated.
    project = bool(config.hidden_loss_weight) and student.config.hidden_size != teacher_width
    forward_fn = default_forward
    if config.hidden_loss_weight:
        forward_fn = _hidden_state_forward(task_object, run.teacher_model, student.teacher_layers)
    model_fn, checkpoint_items_fn = _student_model_fns(task_object, student, teacher_width if project else None)
    loss = DistillationLoss(
        type(task_object).distillation_loss(task_object.name),
        temperature=config.temperature,
        alpha=config.alpha,
        hidden_loss_weight=config.hidden_loss_weight,
    )
    result = train(
        run.strategy,
        model_fn,
        loss,
        dataset_fn,
        model_dir,
        run.schedule,
        init_fn=_init_fn(task_object, student, source_model, run.teacher_model),
        forward_fn=forward_fn,
        checkpoint_items_fn=checkpoint_items_fn,
        jit_compile=run.runtime.jit_compile,
        preemption=run.runtime.preemption_watcher(),
    )
    if not project:
        return result.model, result.step
    return _without_projection(run, student, result.model), result.step


def _init_fn(task_object, student: Student, source_model, teacher_model):
    """The loop's `init_fn`: the student's start (a pretrained encoder, or layers of `source_model`)."""
    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.distillation import students

    def init_fn(model):
        if student.checkpoint:
            restore(model.encoder, student.checkpoint)
            logging.info("Initialised the student's encoder from %s.", student.checkpoint)
        elif student.source_layers is not None:
            students.copy_teacher_layers(model, source_model, student.source_layers, task_object.head)
            source = "teacher" if source_model is teacher_model else "intermediate student"
            logging.info("Initialised the student from the %s's layers %s.", source, student.source_layers)

    return init_fn


def _student_model_fns(task_object, student: Student, projection_width: int | None):
    """The loop's (model_fn, checkpoint_items_fn): with a `projection_width`, the model carries TinyBERT's W_h."""
    from bert_tf.distillation import students

    def model_fn():
        model = finetuning_phases.build_model(task_object, student.config)
        if projection_width:
            model.hidden_projection = students.hidden_projection(model, projection_width)
        return model

    def checkpoint_items_fn(model):
        items = dict(model.checkpoint_items)
        if projection_width:
            items["hidden_projection"] = model.hidden_projection
        return items

    return model_fn, checkpoint_items_fn


def _without_projection(run: RouteTraining, student: Student, trained):
    """The trained student as a task model of its own config: its weights without the hidden projection."""
    from bert_tf.distillation import students

    with run.strategy.scope():
        student_model = finetuning_phases.build_model(run.inputs.task_object, student.config)
    students.copy_without_projection(trained, student_model)
    return student_model


def _hidden_state_forward(task_object, teacher_model, teacher_layers):
    """A `forward_fn` returning the student's logits and its hidden states beside the teacher's mapped ones."""
    from keras import ops

    from bert_tf.models import ENCODER_INPUT_NAMES

    def forward(model, batch, training):
        encoder_inputs = {name: batch[name] for name in ENCODER_INPUT_NAMES}
        student_outputs = model.encoder(encoder_inputs, training=training)
        logits = task_object.head(model)(student_outputs[task_object.head_input], training=training)
        teacher_outputs = teacher_model.encoder(encoder_inputs, training=False)
        # The teacher is fixed: no gradient flows into (or is recorded through) its states.
        teacher_states = [
            ops.stop_gradient(state)
            for state in [teacher_outputs["embedding_output"]]
            + [teacher_outputs["encoder_outputs"][i] for i in teacher_layers]
        ]
        student_states = [student_outputs["embedding_output"]] + list(student_outputs["encoder_outputs"])
        projection = getattr(model, "hidden_projection", None)
        if projection is not None:  # a student of another width: TinyBERT's W_h, one for every state
            student_states = [projection(state) for state in student_states]
        return {"logits": logits, "student_states": student_states, "teacher_states": teacher_states}

    return forward
