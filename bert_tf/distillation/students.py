"""Students: which of the teacher's layers a shallower student starts from, and the copy of their weights.

DistilBERT initialises its 6-layer student from 6 of BERT-Base's 12 layers ([0, 2, 4, 7, 9, 11] in its
`extract_distilbert.py`), with the embeddings copied: a student of the teacher's width starts where the
teacher is, which converges faster and ends better than a random start. `evenly_spaced_layers` gives that
choice for any depths (the first and the last layer are always kept), and the same map pairs the student's
hidden states with the teacher's for the hidden-state loss (`losses.hidden_state_loss`).

    >>> evenly_spaced_layers(12, 6)
    [0, 2, 4, 7, 9, 11]
    >>> evenly_spaced_layers(6, 3)
    [0, 3, 5]
    >>> evenly_spaced_layers(6, 1)
    [5]
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_tf.config import BertConfig
from bert_tf.errors import JobArgumentError


def evenly_spaced_layers(num_teacher_layers: int, num_student_layers: int) -> list[int]:
    """The 0-based teacher layers for a student of `num_student_layers`: evenly spaced, first and last kept.

    `round(linspace(0, L - 1, N))`, as DistilBERT picks them; a 1-layer student gets the teacher's last layer
    (the one its pooler and head were trained on).
    """
    if not 1 <= num_student_layers <= num_teacher_layers:
        raise JobArgumentError(
            f"--student_num_layers={num_student_layers} must be between 1 and the teacher's "
            f"{num_teacher_layers} layers."
        )
    if num_student_layers == 1:
        return [num_teacher_layers - 1]
    # Round half up (not numpy's half to even), so the choice reads as the arithmetic says.
    positions = np.linspace(0, num_teacher_layers - 1, num_student_layers)
    return [int(np.floor(p + 0.5)) for p in positions]


def student_config(teacher: BertConfig, num_layers: int) -> BertConfig:
    """The teacher's config with `num_layers` Transformer layers (the same width, heads and vocabulary)."""
    evenly_spaced_layers(teacher.num_hidden_layers, num_layers)  # checks the depth
    return dataclasses.replace(teacher, num_hidden_layers=num_layers)


def copy_teacher_layers(student, teacher, layers: list[int], head) -> None:
    """Sets a student task model's weights from the teacher's: embeddings, `layers`, pooler and task head.

    Args:
      student, teacher: task models (`bert_tf.models.TaskModel`) of the same width and head; the student has
        `len(layers)` Transformer layers. The teacher is the model the student starts from: the teacher of
        the distillation, or a deeper student distilled from it (`StudentConfig.intermediate_num_layers`).
      layers: the teacher layer for each student layer (`evenly_spaced_layers`).
      head: the output layer of a task model of theirs (the task plug-in's `FinetuningTask.head`).
    """
    s_encoder, t_encoder = student.encoder, teacher.encoder
    if len(layers) != len(s_encoder.transformer_layers):
        raise ValueError(f"{len(layers)} teacher layers for a student of {len(s_encoder.transformer_layers)} layers.")
    s_encoder.embeddings.set_weights(t_encoder.embeddings.get_weights())
    for student_layer, teacher_index in zip(s_encoder.transformer_layers, layers):
        student_layer.set_weights(t_encoder.transformer_layers[teacher_index].get_weights())
    s_encoder.pooler.set_weights(t_encoder.pooler.get_weights())
    head(student).set_weights(head(teacher).get_weights())


def hidden_projection(student, teacher_width: int):
    """TinyBERT's W_h: a dense layer from the student's width to the teacher's, built, for the hidden-state loss.

    One projection serves the embedding output and every layer, as in TinyBERT's code (its `fit_dense`). It
    is trained with the student (`bert_tf.jobs.distillation` sets it as the student task model's
    `hidden_projection`) and left out of the student that is written (`copy_without_projection`).
    """
    import keras

    config = student.encoder.config
    projection = keras.layers.Dense(
        teacher_width,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range),
        dtype=student.encoder.dtype_policy,
        name="hidden_projection",
    )
    projection.build((None, None, config.hidden_size))
    return projection


def copy_without_projection(trained, student) -> None:
    """Sets `student` (a fresh task model) to the weights of `trained`, the same model with a `hidden_projection`.

    The projection's weights are tracked by `trained` after its own, so the remaining weights come in the
    order of a model built without it.
    """
    projection_ids = {id(v) for v in trained.hidden_projection.weights}
    weights = [v for v in trained.weights if id(v) not in projection_ids]
    if len(weights) != len(student.weights):
        raise ValueError(f"{len(weights)} trained weights for a student of {len(student.weights)}.")
    for target, source in zip(student.weights, weights):
        if tuple(target.shape) != tuple(source.shape):
            raise ValueError(f"{target.path}: shape {tuple(target.shape)}, trained weight {tuple(source.shape)}.")
        target.assign(source)
