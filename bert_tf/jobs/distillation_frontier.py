"""`run_frontier`: how small can the model get before the task suffers? Accuracy against speed, measured.

    from bert_tf.jobs.distillation_frontier import FrontierConfig, run_frontier
    report = run_frontier("runs/frontier", FrontierConfig(teacher_dir="runs/sst", student_layers=(1, 2, 3)),
                          data, training_config)

For a fine-tuned teacher and the user's data (a `FinetuningDataConfig` with `train_file` and `eval_file`):

1. distils a student of each depth in `student_layers` once per seed in `seeds` (`bert_tf.jobs.distill`, into
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
from bert_tf.errors import JobArgumentError, check_int

REPORT_JSON, REPORT_MD, PLOT_NAME = "report.json", "report.md", "frontier.png"


@dataclasses.dataclass(frozen=True)
class FrontierConfig:
    """The frontier's models, forms and timing (the flags of `experiments.distill_frontier`).

    Attributes:
      teacher_dir: the fine-tuned teacher.
      student_layers: depths of the students (each at most the teacher's depth).
      forms: inference forms measured for every model.
      seeds: each student is distilled once per seed and its metric is the mean (one distillation's metric
        moves with the seed by about as much as neighbouring students differ); empty: the runtime's seed.
      temperature, alpha: the students' losses (`DistillationConfig`).
      intermediate_num_layers: deeper students each student is distilled through first, those of these
        depths above its own (`StudentConfig.intermediate_num_layers`); empty: every student starts from the
        teacher.
      max_seq_length: None: the teacher's.
      speed_examples: evaluation texts timed per model and round.
      speed_batch_size: batch size of the timed batches.
      speed_rounds: interleaved timing rounds (the median is reported).
    """

    teacher_dir: str
    student_layers: tuple = (1, 2, 3)
    forms: tuple = ("float32", "bfloat16", "int8")
    seeds: tuple = ()
    temperature: float = 2.0
    alpha: float = 0.5
    intermediate_num_layers: tuple = ()
    max_seq_length: int | None = None
    speed_examples: int = 512
    speed_batch_size: int = 32
    speed_rounds: int = 3

    def __post_init__(self):
        from bert_tf.distillation.inference import INFERENCE_FORMS

        object.__setattr__(self, "student_layers", tuple(int(n) for n in self.student_layers))
        object.__setattr__(self, "forms", tuple(self.forms))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if len(set(self.seeds)) != len(self.seeds):
            raise JobArgumentError(f"--seeds: each seed once, got {list(self.seeds)}.")
        for n in self.student_layers:
            check_int("student_layers", n)
        depths = tuple(sorted({int(n) for n in self.intermediate_num_layers}, reverse=True))
        object.__setattr__(self, "intermediate_num_layers", depths)
        for n in depths:
            check_int("intermediate_num_layers", n)
        unknown = [form for form in self.forms if form not in INFERENCE_FORMS]
        if unknown or not self.forms:
            raise JobArgumentError(f"--forms: expected some of {', '.join(INFERENCE_FORMS)}, got {list(self.forms)}.")
        for name in ("speed_examples", "speed_batch_size", "speed_rounds"):
            check_int(name, getattr(self, name))


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
    from bert_tf.jobs import DEFAULT_SEED, distill, finetuning_inputs
    from bert_tf.tasks import registry
    from bert_tf.tasks.task_config import FinetuningTaskConfig
    from bert_tf.training import RuntimeConfig

    if not data.eval_file and not data.tfds_name:
        raise JobArgumentError("--eval_file is required: the frontier is measured on held-out data.")
    output_dir = os.path.abspath(output_dir)
    teacher = distill._read_teacher(distill.DistillationConfig(teacher_dir=config.teacher_dir))
    teacher_layers = teacher.source.config.num_hidden_layers
    deeper = [n for n in config.student_layers if n >= teacher_layers]
    if deeper:
        raise JobArgumentError(
            f"--student_layers: {deeper} not below the teacher's {teacher_layers} layers (the teacher is measured too)."
        )
    deeper = [n for n in config.intermediate_num_layers if n >= teacher_layers]
    if deeper:
        raise JobArgumentError(f"--intermediate_num_layers: {deeper} not below the teacher's {teacher_layers} layers.")
    report_path = os.path.join(output_dir, REPORT_JSON)
    if os.path.exists(report_path):
        raise JobArgumentError(f"--output_dir={output_dir} already holds {REPORT_JSON}; use a new --output_dir.")
    for form in config.forms:
        warning = cpu_features.form_cost_warning(form)
        if warning:
            logging.warning("%s", warning)

    runtime = runtime if runtime is not None else RuntimeConfig(seed=DEFAULT_SEED)
    seeds = config.seeds or (runtime.seed,)
    # {model name: [model directory per seed]}; the teacher is one model.
    models = {"teacher": [os.path.abspath(config.teacher_dir)]}
    # Every student learns from the same teacher on the same data: the teacher labels it once.
    distillation = distill.DistillationConfig(
        teacher_dir=config.teacher_dir,
        temperature=config.temperature,
        alpha=config.alpha,
        max_seq_length=config.max_seq_length,
    )
    key = distill.teacher_logits_key(distillation, data, None)
    teacher_logits_file = os.path.join(output_dir, distill.TEACHER_LOGITS_DIR, key + ".npy")
    distillation_seconds = {}
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
            distill.run_distillation(
                student_dir,
                distillation,
                distill.StudentConfig(student_num_layers=n, intermediate_num_layers=route),
                data,
                training_config,
                dataclasses.replace(runtime, seed=seed),
                do_eval=False,
                teacher_logits_file=teacher_logits_file,
                trained_intermediates={d: trained[seed][d] for d in route if d in trained[seed]},
            )
            distillation_seconds[f"{name}/seed_{seed}"] = round(time.perf_counter() - started, 1)
            models[name].append(student_dir)
            for d in route:
                trained[seed].setdefault(d, os.path.join(student_dir, distill.intermediate_dir_name(d)))
            trained[seed][n] = student_dir

    # The evaluation data, featurized once with the teacher's task (the students share it).
    task_type = teacher.task_config["task"]
    metric = registry.task_class(task_type).headline_metric(task_type)
    max_seq_length = config.max_seq_length or teacher.task_config.get("max_seq_length") or 128
    task = FinetuningTaskConfig(task_type, max_seq_length=max_seq_length, packing=False)  # the students' batches
    reader = finetuning_inputs.task_reader(task, data)
    task_object = finetuning_inputs.build_task(
        task, finetuning_inputs.task_tokenizer(teacher.source), teacher.task_config.get("label_list"), reader
    )
    eval_examples = reader.read("eval", data.eval_file)
    eval_features = task_object.featurize(eval_examples, training=False)

    rows, exports = [], {}
    for name, model_dirs in models.items():
        for form in config.forms:
            per_seed = []
            for index, model_dir in enumerate(model_dirs):
                model = _in_form(_load(task_object, model_dir), form)
                metrics = _evaluate(task_object, model, eval_examples, eval_features, data.eval_batch_size)
                logging.info("%s %s %s: %s", name, form, model_dir, metrics)
                per_seed.append(metrics)
                if index == 0:
                    export_dir = os.path.join(output_dir, "exports", f"{name}_{form}")
                    exports[(name, form)] = _export(model, export_dir, teacher.source.vocab_file)
                    num_layers = model.encoder.config.num_hidden_layers
            rows.append(
                {
                    "model": name,
                    "num_layers": num_layers,
                    "form": form,
                    "metric": round(statistics.fmean(m[metric] for m in per_seed), 6),
                    "metric_per_seed": [m[metric] for m in per_seed],
                    "metrics_per_seed": per_seed,
                    "export_dir": export_dir,
                }
            )

    batches = _speed_batches(task_object, eval_features, config.speed_examples, config.speed_batch_size)
    speeds = _interleaved_speeds(exports, batches, config.speed_rounds)
    reference = next(r for r in rows if r["model"] == "teacher" and r["form"] == config.forms[0])
    for row in rows:
        row.update(speeds[(row["model"], row["form"])])
    reference_speed = speeds[("teacher", config.forms[0])]["sequences_per_second"]
    for row in rows:
        row["speedup"] = round(row["sequences_per_second"] / reference_speed, 3)
        row["metric_change"] = round(row["metric"] - reference["metric"], 4)

    report = {
        "teacher_dir": models["teacher"][0],
        "task": task_type,
        "metric": metric,
        "eval_file": data.eval_file,
        "num_eval_examples": len(eval_examples),
        "max_seq_length": max_seq_length,
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
        "distillation_seconds": distillation_seconds,
        "machine": _machine(),
        "rows": rows,
    }
    os.makedirs(output_dir, exist_ok=True)
    file_io.write_json(report_path, report)
    file_io.write_text(os.path.join(output_dir, REPORT_MD), report_markdown(report))
    _plot(report, os.path.join(output_dir, PLOT_NAME))
    return report


# --- models -----------------------------------------------------------------------


def _load(task_object, model_dir):
    from bert_tf.checkpoints import load_task_model

    return load_task_model(model_dir, task_object.build_model)


def _in_form(model, form):
    from bert_tf.distillation.inference import inference_form

    return inference_form(model, form)


def _evaluate(task_object, model, examples, features, batch_size) -> dict:
    from bert_tf.jobs.finetuning_phases import predict

    predictions = predict(task_object, model, examples, features, batch_size, None, False)
    return task_object.evaluate(examples, predictions)


def _export(model, export_dir, vocab_file):
    from bert_tf.export import export_encoder

    return export_encoder(model.encoder, export_dir, vocab_file=vocab_file, overwrite=True)


# --- timing -----------------------------------------------------------------------


def _speed_batches(task_object, features, num_examples, batch_size) -> list:
    """Length-bucketed batches (encoder inputs, numpy) of the first `num_examples` evaluation features."""
    from bert_tf.models import ENCODER_INPUT_NAMES

    if isinstance(features, dict):
        subset = {k: v[:num_examples] for k, v in features.items()}
    else:
        subset = dataclasses.replace(
            features,
            inputs={k: v[:num_examples] for k, v in features.inputs.items()},
            example_index=features.example_index[:num_examples],
            word_index=features.word_index[:num_examples],
        )
    batches = []
    for batch in task_object.dataset(subset, batch_size, training=False):
        keep = batch["feature_index"].numpy() >= 0  # the rows that fill up the last batch are not timed
        batches.append({k: batch[k].numpy()[keep] for k in ENCODER_INPUT_NAMES})
    return batches


def _interleaved_speeds(exports: dict, batches: list, rounds: int) -> dict:
    """{(model, form): {"sequences_per_second", "round_seconds"}}: every SavedModel timed in every round."""
    import tensorflow as tf

    loaded = {key: tf.saved_model.load(path) for key, path in exports.items()}
    total = sum(len(b["input_word_ids"]) for b in batches)

    def run(module):
        for batch in batches:
            module(batch)["pooled_output"].numpy()

    for module in loaded.values():  # the first call of each shape traces
        run(module)
    keys = list(loaded)
    seconds = {key: [] for key in keys}
    for round_index in range(rounds):
        # A rotated order, so no model always runs first (or right after the same neighbour).
        shift = round_index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            started = time.perf_counter()
            run(loaded[key])
            seconds[key].append(time.perf_counter() - started)
    return {
        key: {
            "sequences_per_second": round(total / statistics.median(values), 2),
            "round_seconds": [round(v, 4) for v in values],
        }
        for key, values in seconds.items()
    }


def _machine() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu": cpu_features.cpu_name(),
        "instruction_set": cpu_features.instruction_set_level(),
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in load] if load else None,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


# --- report -----------------------------------------------------------------------


def report_markdown(report: dict) -> str:
    """The report as a Markdown table, fastest first."""
    metric = report["metric"]
    machine = report["machine"]
    seeds = report["seeds"]
    several = len(seeds) > 1
    lines = [
        "# Distillation frontier",
        "",
        f"Teacher `{report['teacher_dir']}` ({report['task']}), held-out {metric} on "
        f"{report['num_eval_examples']} examples of `{report['eval_file']}`"
        + (f"; a student's {metric} is the mean over seeds {', '.join(map(str, seeds))}" if several else "")
        + f". Speed: {report['speed']['what']}, {report['speed']['examples']} sequences (max length "
        f"{report['max_seq_length']}, batch {report['speed']['batch_size']}), median of {report['speed']['rounds']} "
        "interleaved rounds.",
        f"Machine: {machine['cpu']} ({machine['instruction_set']}), "
        f"{machine['cpu_count']} CPUs, load average {machine['load_average']} at "
        f"{machine['date']}.",
        "",
        f"| model | layers | form | {metric} | "
        + ("per seed | " if several else "")
        + "change | sequences/s | speed-up |",
        "|---|---:|---|---:|" + ("---|" if several else "") + "---:|---:|---:|",
    ]
    for row in sorted(report["rows"], key=lambda r: -r["sequences_per_second"]):
        per_seed = " / ".join(f"{m:.4f}" for m in row["metric_per_seed"])
        lines.append(
            f"| {row['model']} | {row['num_layers']} | {row['form']} | {row['metric']:.4f} | "
            + (f"{per_seed} | " if several else "")
            + f"{row['metric_change']:+.4f} | {row['sequences_per_second']:.1f} | {row['speedup']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def _plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    markers = {"float32": "o", "bfloat16": "s", "int8": "^"}
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for form, marker in markers.items():
        rows = [r for r in report["rows"] if r["form"] == form]
        if not rows:
            continue
        axes.scatter([r["sequences_per_second"] for r in rows], [r["metric"] for r in rows], marker=marker, label=form)
        for r in rows:
            axes.annotate(
                f"{r['model']}",
                (r["sequences_per_second"], r["metric"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    axes.set_xlabel("sequences / s (exported encoder SavedModel)")
    axes.set_ylabel(f"held-out {report['metric']}")
    axes.set_title("Distillation frontier")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
