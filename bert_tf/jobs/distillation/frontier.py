"""`run_frontier`: how small can the model get before the task suffers? Accuracy against speed, measured.

    from bert_tf.jobs.distillation import FrontierConfig, run_frontier
    report = run_frontier("runs/frontier", FrontierConfig(teacher_dir="runs/sst", student_layers=(1, 2, 3)),
                          data, training_config)

For a fine-tuned teacher and the user's data (a `FinetuningDataConfig` with `train_file` and `eval_file`):

1. distils a student of each depth in `student_layers` once per seed in `seeds` (`run_distillation`, into
   `students/layers_<n>/seed_<s>`; a finished or interrupted one is resumed, so rerunning the command costs
   only what is missing), deepest first; with `intermediate_num_layers` a shallower student's route takes the
   intermediate students a deeper student of its seed trained, which start its route the same way;
2. makes every model (teacher and students) in every inference form of `forms` (float32, bfloat16, int8:
   `bert_tf.distillation.inference`) and measures its held-out metric on the evaluation data (a student's
   row: the mean over its seeds, each seed's figure beside it); exports each encoder as a SavedModel
   (`exports/<model>_<form>`, `bert_tf.export.export_encoder`, verified; a student's first seed, since its
   speed does not depend on the weights' values);
3. loads every SavedModel and times them interleaved in one process: `speed_rounds` rounds, each running
   every model (in a rotated order) over the same length-bucketed batches of the first `speed_examples`
   evaluation texts; the figure is the median round's sequences per second;
4. writes `report.json`, `report.md` and `frontier.png` (the metric against sequences per second).

The task head is a single dense layer on the pooled output; the exported encoder is where the time goes, so
the speed is the encoder SavedModel's and the metric is the (same-form) Keras model's, which the export
reproduces (verified at export).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

from absl import logging

from bert_tf import cpu_features, file_io
from bert_tf.errors import JobArgumentError
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.jobs.distillation.config import DistillationConfig, FrontierConfig, StudentConfig
from bert_tf.jobs.distillation.frontier_report import PLOT_NAME, REPORT_JSON, REPORT_MD, plot, report_markdown
from bert_tf.jobs.distillation.frontier_speed import interleaved_speeds, machine, speed_batches
from bert_tf.jobs.distillation.job import run_distillation
from bert_tf.jobs.distillation.route import intermediate_dir_name
from bert_tf.jobs.distillation.teacher import Teacher, read_teacher
from bert_tf.jobs.distillation.teacher_logits import teacher_logits_file
from bert_tf.tasks import registry
from bert_tf.tasks.task_config import FinetuningTaskConfig


@dataclasses.dataclass(frozen=True)
class _EvaluationData:
    """The evaluation data, featurized once with the teacher's task (the students share it)."""

    task_object: object
    examples: list
    features: object
    metric: str
    max_seq_length: int


def run_frontier(output_dir: str, config: FrontierConfig, data, training_config=None, runtime=None) -> dict:
    """Distils, converts, evaluates, exports and times; writes and returns the report (see the module docstring).

    Args:
      output_dir: where the students, the exports and the report go.
      config: a `FrontierConfig`.
      data: a `FinetuningDataConfig` with `train_file` and `eval_file` (as for fine-tuning).
      training_config, runtime: the students' `TrainingConfig` and `RuntimeConfig` (None: the distillation
        defaults).

    Raises:
      JobArgumentError, DataError: bad flags or data, before any work.
    """
    from bert_tf.training import RuntimeConfig

    output_dir = os.path.abspath(output_dir)
    teacher = _checked_teacher(output_dir, config, data)
    runtime = runtime if runtime is not None else RuntimeConfig(seed=DEFAULT_SEED)
    seeds = config.seeds or (runtime.seed,)
    students, distillation_seconds = _distil_students(output_dir, config, data, training_config, runtime, seeds)
    # {model name: [model directory per seed]}; the teacher is one model.
    models = {"teacher": [os.path.abspath(config.teacher_dir)], **students}
    evaluation = _evaluation_data(teacher, config, data)
    rows, exports = [], {}
    for name, model_dirs in models.items():
        for form in config.forms:
            row, exports[(name, form)] = _measure(output_dir, name, form, model_dirs, evaluation, data, teacher)
            rows.append(row)
    batches = speed_batches(evaluation.task_object, evaluation.features, config.speed_examples, config.speed_batch_size)
    _add_speeds(rows, interleaved_speeds(exports, batches, config.speed_rounds), config.forms[0])
    report = _report(models["teacher"][0], teacher, config, data, evaluation, batches, seeds, distillation_seconds)
    report["rows"] = rows
    os.makedirs(output_dir, exist_ok=True)
    file_io.write_json(os.path.join(output_dir, REPORT_JSON), report)
    file_io.write_text(os.path.join(output_dir, REPORT_MD), report_markdown(report))
    plot(report, os.path.join(output_dir, PLOT_NAME))
    return report


def _checked_teacher(output_dir: str, config: FrontierConfig, data) -> Teacher:
    """The teacher, once the data, the depths and `output_dir` are checked; warns of forms slow on this CPU."""
    if not data.eval_file and not data.tfds_name:
        raise JobArgumentError("--eval_file is required: the frontier is measured on held-out data.")
    teacher = read_teacher(DistillationConfig(teacher_dir=config.teacher_dir))
    teacher_layers = teacher.source.config.num_hidden_layers
    deeper = [n for n in config.student_layers if n >= teacher_layers]
    if deeper:
        raise JobArgumentError(
            f"--student_layers: {deeper} not below the teacher's {teacher_layers} layers (the teacher is measured too)."
        )
    deeper = [n for n in config.intermediate_num_layers if n >= teacher_layers]
    if deeper:
        raise JobArgumentError(f"--intermediate_num_layers: {deeper} not below the teacher's {teacher_layers} layers.")
    if os.path.exists(os.path.join(output_dir, REPORT_JSON)):
        raise JobArgumentError(f"--output_dir={output_dir} already holds {REPORT_JSON}; use a new --output_dir.")
    for form in config.forms:
        warning = cpu_features.form_cost_warning(form)
        if warning:
            logging.warning("%s", warning)
    return teacher


def _distil_students(output_dir, config: FrontierConfig, data, training_config, runtime, seeds):
    """Distils every student once per seed, deepest first; returns ({name: [directory per seed]}, {run: seconds})."""
    # Every student learns from the same teacher on the same data: the teacher labels it once.
    distillation = DistillationConfig(
        teacher_dir=config.teacher_dir,
        temperature=config.temperature,
        alpha=config.alpha,
        max_seq_length=config.max_seq_length,
        packing=config.packing,
    )
    logits_file = teacher_logits_file(output_dir, distillation, data, None)
    models, distillation_seconds = {}, {}
    # {seed: {depth: directory of a finished model of that depth on the route}}. Every route starts with the
    # intermediate depths above its student, deepest first, from the same teacher, data, schedule and seed: a
    # shallower student takes a deeper one's intermediate students (and the deeper student itself, when its
    # depth is on the route) instead of training them again.
    trained = {seed: {} for seed in seeds}
    for n in sorted(config.student_layers, reverse=True):
        name = f"layers_{n}"
        models[name] = []
        route = tuple(d for d in config.intermediate_num_layers if d > n)
        for seed in seeds:
            student_dir = os.path.join(output_dir, "students", name, f"seed_{seed}")
            started = time.perf_counter()
            run_distillation(
                student_dir,
                distillation,
                StudentConfig(student_num_layers=n, intermediate_num_layers=route),
                data,
                training_config,
                dataclasses.replace(runtime, seed=seed),
                do_eval=False,
                teacher_logits_file=logits_file,
                trained_intermediates={d: trained[seed][d] for d in route if d in trained[seed]},
            )
            distillation_seconds[f"{name}/seed_{seed}"] = round(time.perf_counter() - started, 1)
            models[name].append(student_dir)
            for d in route:
                trained[seed].setdefault(d, os.path.join(student_dir, intermediate_dir_name(d)))
            trained[seed][n] = student_dir
    return models, distillation_seconds


def _evaluation_data(teacher: Teacher, config: FrontierConfig, data) -> _EvaluationData:
    task_type = teacher.task_type
    max_seq_length = teacher.max_seq_length(config.max_seq_length)
    # One example a row, as its timed forms read them (the students train on packed rows by default).
    task_config = FinetuningTaskConfig(task_type, max_seq_length=max_seq_length, packing=False)
    reader, task_object = teacher.task(task_config, data)
    examples = reader.read("eval", data.eval_file)
    features = task_object.featurize(examples, training=False)
    metric = registry.task_class(task_type).headline_metric(task_type)
    return _EvaluationData(task_object, examples, features, metric, max_seq_length)


# --- models -----------------------------------------------------------------------


def _measure(output_dir, name, form, model_dirs, evaluation: _EvaluationData, data, teacher: Teacher):
    """(the report's row of model `name` in `form`, the SavedModel of its first seed's encoder)."""
    per_seed = []
    for index, model_dir in enumerate(model_dirs):
        model = _in_form(_load(evaluation.task_object, model_dir), form)
        metrics = _evaluate(
            evaluation.task_object, model, evaluation.examples, evaluation.features, data.eval_batch_size
        )
        logging.info("%s %s %s: %s", name, form, model_dir, metrics)
        per_seed.append(metrics)
        if index == 0:
            export_dir = os.path.join(output_dir, "exports", f"{name}_{form}")
            export = _export(model, export_dir, teacher.source.vocab_file)
            num_layers = model.encoder.config.num_hidden_layers
    metric = evaluation.metric
    row = {
        "model": name,
        "num_layers": num_layers,
        "form": form,
        "metric": round(statistics.fmean(m[metric] for m in per_seed), 6),
        "metric_per_seed": [m[metric] for m in per_seed],
        "metrics_per_seed": per_seed,
        "export_dir": export_dir,
    }
    return row, export


def _load(task_object, model_dir):
    from bert_tf.checkpoints import load_task_model

    return load_task_model(model_dir, task_object.build_model)


def _in_form(model, form):
    from bert_tf.distillation.inference import inference_form

    return inference_form(model, form)


def _evaluate(task_object, model, examples, features, batch_size) -> dict:
    from bert_tf.jobs.finetuning.phases import predict

    predictions = predict(task_object, model, examples, features, batch_size, None, False)
    return task_object.evaluate(examples, predictions)


def _export(model, export_dir, vocab_file):
    from bert_tf.export import export_encoder

    return export_encoder(model.encoder, export_dir, vocab_file=vocab_file, overwrite=True)


def _add_speeds(rows: list, speeds: dict, reference_form: str) -> None:
    """Each row's speed, and its speed-up and metric change against the teacher in `reference_form`."""
    reference = next(r for r in rows if r["model"] == "teacher" and r["form"] == reference_form)
    for row in rows:
        row.update(speeds[(row["model"], row["form"])])
    reference_speed = speeds[("teacher", reference_form)]["sequences_per_second"]
    for row in rows:
        row["speedup"] = round(row["sequences_per_second"] / reference_speed, 3)
        row["metric_change"] = round(row["metric"] - reference["metric"], 4)


def _report(teacher_dir, teacher: Teacher, config, data, evaluation: _EvaluationData, batches, seeds, seconds) -> dict:
    """report.json's fields before its rows."""
    return {
        "teacher_dir": teacher_dir,
        "task": teacher.task_type,
        "metric": evaluation.metric,
        "eval_file": data.eval_file,
        "num_eval_examples": len(evaluation.examples),
        "max_seq_length": evaluation.max_seq_length,
        "speed": {
            "examples": sum(len(b["input_word_ids"]) for b in batches),
            "batch_size": config.speed_batch_size,
            "rounds": config.speed_rounds,
            "what": "encoder SavedModel (tf.saved_model.load), length-bucketed evaluation batches, one process",
        },
        "seeds": list(seeds),
        "distillation": {
            "temperature": config.temperature,
            "alpha": config.alpha,
            "intermediate_num_layers": list(config.intermediate_num_layers),
        },
        "distillation_seconds": seconds,
        "machine": machine(),
    }
