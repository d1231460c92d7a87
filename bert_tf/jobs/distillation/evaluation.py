"""The trained student, written and measured: its weights file, its metrics beside the teacher's, its predictions."""

from __future__ import annotations

import os

from absl import logging

from bert_tf import checkpoints, file_io
from bert_tf.jobs.distillation.config import DISTILLATION_RESULTS_NAME
from bert_tf.jobs.finetuning import phases as finetuning_phases


def write_student(output_dir: str, student_model) -> None:
    """`weights.safetensors` of the student beside its last checkpoint."""
    from bert_tf.checkpoints import weights_file

    weights_file.write_weights_file(output_dir, student_model, checkpoint=checkpoints.latest_checkpoint(output_dir))


def evaluate_and_predict(inputs, student_model, teacher_model, step, data, strategy, runtime, *, do_eval, do_predict):
    """Evaluates the student and the teacher (`do_eval`), predicts with the student (`do_predict`).

    Returns {"student": metrics, "teacher": metrics} (empty without `do_eval`), also written to
    `distillation_results.json`; the student's `eval_results.json` and prediction files are fine-tuning's.
    """
    results = {}
    eval_strategy = finetuning_phases.evaluation_strategy(strategy)
    if do_eval:
        student_results = finetuning_phases.evaluate(
            inputs, student_model, step, data.eval_batch_size, eval_strategy, runtime.jit_compile
        )
        teacher_results = _teacher_metrics(inputs, teacher_model, data.eval_batch_size, eval_strategy, runtime)
        results = {"student": student_results, "teacher": teacher_results}
        file_io.write_json(os.path.join(inputs.output_dir, DISTILLATION_RESULTS_NAME), results)
        for key in sorted(teacher_results):
            logging.info("  teacher %s = %s, student %s", key, teacher_results[key], student_results.get(key))
    if do_predict:
        finetuning_phases.predict_and_write(
            inputs, student_model, data.predict_batch_size or data.eval_batch_size, eval_strategy, runtime.jit_compile
        )
    return results


def _teacher_metrics(inputs, teacher_model, batch_size, strategy, runtime) -> dict:
    task_object, examples = inputs.task_object, inputs.eval_examples
    predictions = finetuning_phases.predict(
        task_object, teacher_model, examples, inputs.eval_features, batch_size, strategy, runtime.jit_compile
    )
    return task_object.evaluate(examples, predictions)
