"""`run_distillation`: a fine-tuned teacher trains a smaller student (the job behind `experiments.distill`).

    from bert_tf.jobs.distill import DistillationConfig, StudentConfig, run_distillation
    from bert_tf.jobs.finetuning_config import FinetuningDataConfig
    from bert_tf.training import TrainingConfig

    results = run_distillation(
        "runs/sst_3_layers",
        DistillationConfig(teacher_dir="runs/sst", temperature=2.0, alpha=0.5),
        StudentConfig(student_num_layers=3),
        FinetuningDataConfig(train_file="train.tsv", eval_file="dev.tsv", text_a_column="sentence"),
        TrainingConfig(learning_rate=1e-4, num_train_epochs=3.0, warmup_proportion=0.1))

The teacher is a model directory that `experiments.finetune` wrote (`task_config.json`, `bert_config.json`,
`vocab.txt`, a checkpoint or `weights.safetensors`): classification, sentence pairs, regression or tagging.
The data are read by the fine-tuning job's readers with its `FinetuningDataConfig`, featurized by the same
task plug-in (`bert_tf.tasks`) with the teacher's labels and vocabulary, and the student trains in the
project's distributed loop (`bert_tf.training.train`: strategies, length buckets, exact resume after a
kill) with `bert_tf.distillation.losses.DistillationLoss` in place of the task's loss. With
`StudentConfig.intermediate_num_layers` the student is the last of a route of ever shallower students, each
trained the same way in `intermediate_<n>_layers/` and started from the one before.

The teacher's logits are computed once, before training, over the training features (and the
`unlabeled_file` ones, which only the teacher labels) and travel with the batches as a `teacher_logits`
column: one inference pass instead of a teacher forward pass in every step of every epoch, and the same
targets on every resume. Only the hidden-state loss (`hidden_loss_weight`) runs the teacher's encoder inside
the step, since its states are too large to store.

`output_dir` becomes a model directory like fine-tuning's (`bert_config.json` of the student, the teacher's
`vocab.txt`, `task_config.json`, `ckpt-*`, `weights.safetensors`, `eval_results.json`,
`eval_predictions.*`), so `experiments.finetune --do_eval`, `experiments.export` and `load_task_model` take
it; `distillation.json` records the teacher, the student's origin and layers and the losses, and
`distillation_results.json` the teacher's and the student's evaluation metrics side by side.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING

import numpy as np
from absl import logging

from bert_tf import checkpoints, file_io
from bert_tf.checkpoints.model_source import (
    TASK_CONFIG_NAME,
    ModelSource,
    ResolvedModel,
    check_compatible,
    read_config,
    read_task_config,
)
from bert_tf.data.examples import TextExample
from bert_tf.data.finetuning_data import ExamplesReader
from bert_tf.distillation.augmentation import augmented_examples
from bert_tf.errors import DataError, JobArgumentError, check_int, check_utf8
from bert_tf.jobs import DEFAULT_SEED, finetuning_inputs, finetuning_phases
from bert_tf.jobs.finetuning_config import DEFAULT_SCHEDULE, FinetuningDataConfig, check_data_sources
from bert_tf.jobs.finetuning_files import task_record
from bert_tf.tasks import registry
from bert_tf.tasks.task_config import FinetuningTaskConfig

if TYPE_CHECKING:
    from bert_tf.training import RuntimeConfig, TrainingConfig

DISTILLATION_CONFIG_NAME = "distillation.json"
DISTILLATION_RESULTS_NAME = "distillation_results.json"
TEACHER_LOGITS_KEY = "teacher_logits"
# In a student's directory: the teacher's logits on the training data, kept for a resumed run.
TEACHER_LOGITS_DIR = "teacher_logits"
LABEL_WEIGHT_KEY = "label_weight"


@dataclasses.dataclass(frozen=True)
class StudentConfig:
    """Where the student comes from (the flags of the same names); exactly one is given.

    Attributes:
      student_num_layers: the teacher's architecture with this many layers, initialised from the teacher's
        embeddings, pooler, head and `evenly_spaced_layers` of its Transformer layers (DistilBERT's start).
      student_model_dir: a smaller pretrained encoder (a model directory with the teacher's vocabulary); the
        head starts random.
      student_bert_config_file: a `bert_config.json`; the student starts random.
      intermediate_num_layers: with `student_num_layers`, deeper students distilled first, deepest first,
        each starting from evenly spaced layers of the model before it (the teacher, then the previous one),
        the student from the last: layers are dropped a few at a time, each step trained against the
        teacher's soft targets, instead of all at once. Empty: the student starts from the teacher.
    """

    student_num_layers: int | None = None
    student_model_dir: str | None = None
    student_bert_config_file: str | None = None
    intermediate_num_layers: tuple = ()

    def __post_init__(self):
        sources = ("student_num_layers", "student_model_dir", "student_bert_config_file")
        given = [name for name in sources if getattr(self, name) is not None]
        if len(given) != 1:
            raise JobArgumentError(
                "Give exactly one of --student_num_layers, --student_model_dir and --student_bert_config_file"
                + (f" (got {', '.join('--' + g for g in given)})." if given else ".")
            )
        if self.student_num_layers is not None:
            check_int("student_num_layers", self.student_num_layers)
        # The route runs deepest first, whatever order the depths were given in.
        depths = tuple(sorted(set(self.intermediate_num_layers), reverse=True))
        object.__setattr__(self, "intermediate_num_layers", depths)
        if depths and self.student_num_layers is None:
            raise JobArgumentError("--intermediate_num_layers needs --student_num_layers: they are its layers' route.")
        for depth in depths:
            check_int("intermediate_num_layers", depth)
        if depths and depths[-1] <= self.student_num_layers:
            raise JobArgumentError(
                f"--intermediate_num_layers={depths[-1]}: each must be deeper than "
                f"--student_num_layers={self.student_num_layers}."
            )


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """The teacher, the losses and the task options (the flags of the same names).

    Attributes:
      teacher_dir: a fine-tuned model directory (`experiments.finetune --output_dir`).
      temperature: T of the soft targets (`bert_tf.distillation.losses`).
      alpha: the soft loss's weight; the hard-label loss has 1 - alpha.
      hidden_loss_weight: weight of TinyBERT's hidden-state loss (0: off). A student of another width than the
        teacher's maps its states to the teacher's width through a learned projection (TinyBERT's W_h), trained
        with it and left out of the student that is written.
      unlabeled_file: more text that only the teacher labels: a `.txt` file of one text per line (one word
        sequence per line for tagging), or a file in the training data's format whose labels are ignored.
      augmented_copies: altered copies of each training text (words dropped, some cropped to a span) that only
        the teacher labels (`bert_tf.distillation.augmentation`; texts and sentence pairs, not tagging). 0: none.
      max_seq_length: packed length; None: the teacher's (`task_config.json`).
      bucket_width, dropout_rate: as `FinetuningTaskConfig`'s.
      do_lower_case: the teacher's vocabulary is uncased.
    """

    teacher_dir: str
    temperature: float = 2.0
    alpha: float = 0.5
    hidden_loss_weight: float = 0.0
    unlabeled_file: str | None = None
    augmented_copies: int = 0
    max_seq_length: int | None = None
    bucket_width: int = 16
    dropout_rate: float | None = None
    do_lower_case: bool = True

    def __post_init__(self):
        if not self.teacher_dir:
            raise JobArgumentError("--teacher_dir is required.")
        if not self.temperature > 0:
            raise JobArgumentError(f"--temperature must be positive, got {self.temperature}.")
        if not 0.0 <= self.alpha <= 1.0:
            raise JobArgumentError(f"--alpha must be in [0, 1], got {self.alpha}.")
        if not self.hidden_loss_weight >= 0:
            raise JobArgumentError(f"--hidden_loss_weight must be >= 0, got {self.hidden_loss_weight}.")
        check_int("augmented_copies", self.augmented_copies, minimum=0)
        if self.max_seq_length is not None:
            check_int("max_seq_length", self.max_seq_length, minimum=2)
        check_int("bucket_width", self.bucket_width, minimum=0)


@dataclasses.dataclass
class _Teacher:
    source: ResolvedModel
    task_config: dict


@dataclasses.dataclass
class _Student:
    config: object  # BertConfig
    checkpoint: str | None  # pretrained encoder weights (--student_model_dir)
    teacher_layers: list | None  # the teacher layer each student layer starts from / is matched with
    # Initialised from `source_layers` of the teacher's weights, or of the intermediate student before it
    # (--student_num_layers).
    source_layers: list | None = None
    intermediate: list = dataclasses.field(default_factory=list)  # _Students trained first, deepest first


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
        features: read if it holds one row per feature, else computed and written. None: a file in
        `output_dir/teacher_logits/` named by `teacher_logits_key`, so that a resumed run does not label the
        data again. A caller that distils several students from one teacher on the same data (`run_frontier`)
        passes one file for all of them.
      trained_intermediates: {depth: a directory where a model of that depth on this same route (teacher, data,
        schedule, losses and seed) finished training}: those intermediate students are restored from there
        instead of trained again. `run_frontier` passes a deeper student's, whose route starts the same way.

    Raises:
      DataError: bad input data, naming the file and line or record.
      JobArgumentError (a ValueError): a bad teacher, student or output directory, naming the flag.
    """
    from bert_tf import training

    if training_config is None:
        training_config = training.TrainingConfig(**DEFAULT_SCHEDULE)
    runtime = runtime if runtime is not None else training.RuntimeConfig(seed=DEFAULT_SEED)
    output_dir = os.path.abspath(output_dir)
    do_eval = do_eval and bool(data.eval_file or data.tfds_name)
    teacher = _read_teacher(config)
    task_type = teacher.task_config["task"]
    max_seq_length = config.max_seq_length or teacher.task_config.get("max_seq_length") or 128
    check_compatible(teacher.source.config, None, max_seq_length)
    student_model = _resolve_student(student, teacher, config, max_seq_length)
    check_data_sources(data, True, do_eval, do_predict)
    if config.unlabeled_file:
        if not os.path.isfile(config.unlabeled_file):
            raise DataError(f"--unlabeled_file: file not found: {config.unlabeled_file}")
        check_utf8(config.unlabeled_file, "unlabeled_file")
    trained_intermediates = {
        depth: os.path.abspath(path)
        for depth, path in (trained_intermediates or {}).items()
        if depth in {stage.config.num_hidden_layers for stage in student_model.intermediate}
    }
    settings = _settings(config, student, student_model, teacher, max_seq_length, trained_intermediates, output_dir)
    _check_output_dir(output_dir, settings)

    # Everything is read and checked before TensorFlow starts and before anything is written.
    task = FinetuningTaskConfig(  # one example a row: the teacher's and student's batches are padded ones
        task_type,
        max_seq_length=max_seq_length,
        dropout_rate=config.dropout_rate,
        bucket_width=config.bucket_width,
        packing=False,
    )
    reader = finetuning_inputs.task_reader(task, data)
    task_object = finetuning_inputs.build_task(
        task, finetuning_inputs.task_tokenizer(teacher.source), teacher.task_config.get("label_list"), reader
    )
    if bool(task_object.config().get("sentence_pair")) != bool(teacher.task_config.get("sentence_pair")):
        raise JobArgumentError(
            f"The teacher in --teacher_dir={config.teacher_dir} was trained on "
            f"{'sentence pairs' if teacher.task_config.get('sentence_pair') else 'single sentences'}; "
            "set --text_b_column to match."
        )
    inputs = finetuning_inputs.FinetuningInputs(output_dir, teacher.source, task_object)
    train_examples = reader.read("train", data.train_file)
    inputs.add_phase("train", train_examples)
    unlabeled = _read_unlabeled(config.unlabeled_file, reader, task_object) if config.unlabeled_file else []
    if config.augmented_copies:
        if not all(isinstance(example, TextExample) for example in train_examples):
            raise JobArgumentError(
                f"--augmented_copies alters texts (classification, sentence pairs, regression); the teacher's "
                f"task is {task_type}."
            )
        unlabeled += augmented_examples(train_examples, config.augmented_copies, runtime.seed)
    unlabeled_features = task_object.featurize(unlabeled, training=False) if unlabeled else None
    if do_eval:
        inputs.add_phase("eval", reader.read("eval", data.eval_file))
    if do_predict:
        inputs.add_phase("predict", reader.read("predict", data.predict_file))

    with training.training_runtime(runtime, batch_sizes={"train_batch_size": data.train_batch_size}) as strategy:
        is_chief = training.is_chief(strategy)
        training.check_microbatches(
            training_config.num_microbatches, data.train_batch_size, strategy.num_replicas_in_sync
        )
        # The settings first: a run killed while the teacher labels the data resumes in its own directory.
        if is_chief:
            recorded_data = dataclasses.replace(data, **reader.columns_used())
            _write_model_files(output_dir, student_model, teacher, task_object, recorded_data, settings)
        if teacher_logits_file is None:
            key = teacher_logits_key(config, data, runtime.seed)
            teacher_logits_file = os.path.join(output_dir, TEACHER_LOGITS_DIR, key + ".npy")
        with strategy.scope():
            teacher_model = _load_teacher_model(task_object, teacher)
        inputs.train_features = _with_teacher_logits(
            task_object,
            teacher_model,
            inputs.train_features,
            unlabeled_features,
            data.eval_batch_size,
            strategy,
            teacher_logits_file if is_chief else None,
        )
        # The route: each intermediate student in its own subdirectory, then the student; each starts from the
        # model trained before it, and all train on the same features with the same schedule.
        stage_schedule = dataclasses.replace(
            training_config.in_steps(_num_features(inputs.train_features), data.train_batch_size),
            jit_compile=runtime.jit_compile,
        )
        trained = teacher_model
        for stage in (*student_model.intermediate, student_model):
            if stage is not student_model and stage.config.num_hidden_layers in trained_intermediates:
                trained = _restore_trained(
                    inputs,
                    stage,
                    trained_intermediates[stage.config.num_hidden_layers],
                    stage_schedule.num_train_steps,
                    strategy,
                )
                continue
            stage_dir = (
                output_dir
                if stage is student_model
                else os.path.join(output_dir, intermediate_dir_name(stage.config.num_hidden_layers))
            )
            trained, step = _train(
                inputs,
                stage_dir,
                teacher_model,
                trained,
                stage,
                config,
                strategy,
                stage_schedule,
                data.train_batch_size,
                runtime,
            )
        results = {}
        if not is_chief:
            return results
        from bert_tf.checkpoints import weights_file

        weights_file.write_weights_file(output_dir, trained, checkpoint=checkpoints.latest_checkpoint(output_dir))
        eval_strategy = finetuning_phases.evaluation_strategy(strategy)
        if do_eval:
            student_results = finetuning_phases.evaluate(
                inputs, trained, step, data.eval_batch_size, eval_strategy, runtime.jit_compile
            )
            predictions = finetuning_phases.predict(
                task_object,
                teacher_model,
                inputs.eval_examples,
                inputs.eval_features,
                data.eval_batch_size,
                eval_strategy,
                runtime.jit_compile,
            )
            teacher_results = task_object.evaluate(inputs.eval_examples, predictions)
            results = {"student": student_results, "teacher": teacher_results}
            file_io.write_json(os.path.join(output_dir, DISTILLATION_RESULTS_NAME), results)
            for key in sorted(teacher_results):
                logging.info("  teacher %s = %s, student %s", key, teacher_results[key], student_results.get(key))
        if do_predict:
            finetuning_phases.predict_and_write(
                inputs, trained, data.predict_batch_size or data.eval_batch_size, eval_strategy, runtime.jit_compile
            )
        return results


# --- teacher and student ----------------------------------------------------------


def _read_teacher(config: DistillationConfig) -> _Teacher:
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
    return _Teacher(source, task_config)


def _resolve_student(student: StudentConfig, teacher: _Teacher, config: DistillationConfig, max_seq_length):
    from bert_tf.distillation import students

    teacher_config = teacher.source.config
    if student.student_num_layers is not None:
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
            chain.append(_Student(config_of_depth, None, teacher_layers, source_layers=layers))
        resolved = chain[-1]
        resolved.intermediate = chain[:-1]
    elif student.student_model_dir is not None:
        if not os.path.isdir(student.student_model_dir):
            raise JobArgumentError(f"--student_model_dir: directory not found: {student.student_model_dir}")
        try:
            source = ModelSource(model_dir=student.student_model_dir, do_lower_case=config.do_lower_case).resolve(
                max_seq_length
            )
        except JobArgumentError as e:
            raise JobArgumentError(f"--student_model_dir={student.student_model_dir}: {e}") from None
        if source.vocab != teacher.source.vocab:
            line = next(
                (i + 1 for i, (a, b) in enumerate(zip(source.vocab, teacher.source.vocab)) if a != b),
                min(len(source.vocab), len(teacher.source.vocab)) + 1,
            )
            raise JobArgumentError(
                f"--student_model_dir: {source.vocab_file} differs from the teacher's vocabulary "
                f"{teacher.source.vocab_file} (first at line {line}); a student must read the teacher's word pieces."
            )
        from bert_tf.checkpoints.model_dir import find_checkpoint

        try:
            checkpoint = find_checkpoint(student.student_model_dir)
        except FileNotFoundError as e:
            raise JobArgumentError(f"--student_model_dir: {e}") from None
        resolved = _Student(source.config, checkpoint, None)
    else:
        student_config = read_config(student.student_bert_config_file, "student_bert_config_file")
        check_compatible(
            student_config,
            len(teacher.source.vocab),
            vocab_flag="teacher_dir",
            vocab_file=teacher.source.vocab_file,
            config_file=student.student_bert_config_file,
        )
        resolved = _Student(student_config, None, None)
    check_compatible(resolved.config, None, max_seq_length)
    if config.hidden_loss_weight:
        if resolved.teacher_layers is None:
            if resolved.config.num_hidden_layers > teacher_config.num_hidden_layers:
                raise JobArgumentError(
                    f"--hidden_loss_weight: the student has more layers ({resolved.config.num_hidden_layers}) "
                    f"than the teacher ({teacher_config.num_hidden_layers}) to match them with."
                )
            resolved.teacher_layers = students.evenly_spaced_layers(
                teacher_config.num_hidden_layers, resolved.config.num_hidden_layers
            )
    return resolved


def _settings(
    config, student, student_model: _Student, teacher: _Teacher, max_seq_length, trained_intermediates, output_dir
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
    if trained_intermediates:
        # Where the route's intermediate students were trained, relative to the student's directory: a frontier's
        # students are siblings, so its output directory still resumes after it is moved.
        settings["trained_intermediates"] = {
            depth: os.path.relpath(path, output_dir) for depth, path in trained_intermediates.items()
        }
    return settings


def _check_output_dir(output_dir: str, settings: dict) -> None:
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
    if saved != json.loads(json.dumps(settings)):
        raise JobArgumentError(
            f"--output_dir={output_dir} exists and is not empty"
            + (" (another distillation's run)" if saved is not None else "")
            + "; use a new --output_dir (the same command resumes its own run)."
        )


def _load_teacher_model(task_object, teacher: _Teacher):
    from bert_tf.checkpoints.model_dir import restore_from_model_dir

    model = finetuning_phases.build_model(task_object, teacher.source.config)
    try:
        restore_from_model_dir(model, teacher.source.checkpoint)
    except ValueError as e:
        raise JobArgumentError(f"--teacher_dir: {e}") from None
    model.trainable = False
    return model


def _write_model_files(output_dir, student: _Student, teacher: _Teacher, task_object, data, settings) -> None:
    from bert_tf.checkpoints.model_dir import write_model_files

    write_model_files(output_dir, student.config, teacher.source.vocab_file, keep_existing=True)
    record = task_record(task_object, teacher.source.do_lower_case, data)
    file_io.write_json(os.path.join(output_dir, TASK_CONFIG_NAME), record)
    file_io.write_json(os.path.join(output_dir, DISTILLATION_CONFIG_NAME), settings)


# --- data -------------------------------------------------------------------------


def _read_unlabeled(path: str, reader: ExamplesReader, task_object) -> list:
    """Examples without labels: a `.txt` file has one text (tagging: one sentence of words) per line."""
    if not path.endswith(".txt"):
        return [finetuning_inputs.without_label(e) for e in reader.read("predict", path)]
    if reader.sentence_pair:
        raise JobArgumentError(
            f"--unlabeled_file={path}: a .txt file has single texts; sentence pairs need a file with the "
            "training data's columns."
        )
    examples = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            guid = f"{os.path.basename(path)}:{number}"
            examples.append(task_object.unlabeled_example(guid, text))
    if not examples:
        raise DataError(f"--unlabeled_file: {path} has no text.")
    return examples


def _with_teacher_logits(task_object, teacher_model, features, unlabeled_features, batch_size, strategy, logits_file):
    """The training features (with the unlabeled ones appended) and the teacher's logits as a column.

    `logits_file`: None, or an `.npy` file to read the logits from (if it has one row per feature) or to
    write them to.
    """
    if isinstance(features, dict):  # classification, regression
        features = dict(features)
        features[LABEL_WEIGHT_KEY] = np.ones(len(features["text_a"]), np.float32)
        if unlabeled_features is not None:
            extra = dict(unlabeled_features)
            size = len(extra["text_a"])
            extra["label"] = np.zeros(size, features["label"].dtype)
            extra[LABEL_WEIGHT_KEY] = np.zeros(size, np.float32)
            features = {name: np.concatenate([features[name], extra[name]]) for name in features}
    else:  # tagging: TaggingFeatures; unlabelled tokens have label -1
        inputs = dict(features.inputs)
        if unlabeled_features is not None:
            extra = dict(unlabeled_features.inputs)
            extra["label_ids"] = np.full_like(extra["input_word_ids"], -1)
            inputs = {name: np.concatenate([inputs[name], extra[name]]) for name in inputs}
        features = dataclasses.replace(
            features,
            inputs=inputs,
            example_index=np.arange(len(inputs["input_word_ids"]), dtype=np.int32),
            word_index=np.zeros_like(inputs["input_word_ids"]),
        )
    from bert_tf.tasks.inference import predict_outputs

    num_features = (
        finetuning_phases.num_features(features) if isinstance(features, dict) else len(features.example_index)
    )
    logits = _read_logits(logits_file, num_features)
    if logits is None:
        dataset = task_object.dataset(features, batch_size, training=False)
        logits = predict_outputs(
            teacher_model, dataset, strategy=strategy, num_features=num_features, label="The teacher labels the data"
        )["logits"]
        logging.info("The teacher labelled %d training features.", num_features)
        if logits_file:
            os.makedirs(os.path.dirname(os.path.abspath(logits_file)), exist_ok=True)
            with file_io.atomic_path(logits_file) as tmp:
                with open(tmp, "wb") as f:
                    np.save(f, logits)
    else:
        logging.info("The teacher's logits on %d training features: %s", num_features, logits_file)
    if isinstance(features, dict):
        return dict(features, **{TEACHER_LOGITS_KEY: logits.astype(np.float32)})
    seq_length = features.inputs["input_word_ids"].shape[1]
    logits = np.pad(logits, [(0, 0), (0, seq_length - logits.shape[1]), (0, 0)]).astype(np.float32)
    return dataclasses.replace(features, inputs=dict(features.inputs, **{TEACHER_LOGITS_KEY: logits}))


def teacher_logits_key(config: DistillationConfig, data: FinetuningDataConfig, seed: int | None) -> str:
    """A name for the teacher's logits on the training data: another teacher, data, length or augmentation,
    another name. Files are known by path, size and modification time; `seed` counts only where it draws the
    augmented copies."""
    import hashlib

    def identity(path):
        stat = os.stat(path)
        return [os.path.abspath(path), stat.st_size, stat.st_mtime_ns]

    teacher_files = sorted(
        entry.path for entry in os.scandir(config.teacher_dir) if entry.is_file(follow_symlinks=True)
    )
    key = {
        "teacher": [identity(path) for path in teacher_files],
        "data": dataclasses.asdict(data),
        "train_file": identity(data.train_file) if data.train_file else None,
        "unlabeled_file": identity(config.unlabeled_file) if config.unlabeled_file else None,
        "augmented_copies": [config.augmented_copies, seed] if config.augmented_copies else 0,
        "max_seq_length": config.max_seq_length,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read_logits(path, num_features):
    """The logits kept in `path`, or None if there is no such file or it is not one row per feature."""
    if not path or not os.path.isfile(path):
        return None
    try:
        logits = np.load(path)
    except (OSError, ValueError):
        return None
    return logits if logits.shape[:1] == (num_features,) else None


# --- training ---------------------------------------------------------------------


def _loss_kind(task_object) -> str:
    return type(task_object).distillation_loss(task_object.name)


def _num_features(features) -> int:
    return finetuning_phases.num_features(features) if isinstance(features, dict) else len(features.example_index)


def _restore_trained(inputs, stage: _Student, model_dir: str, num_train_steps: int, strategy):
    """The intermediate student `stage` as it finished training in `model_dir`: its checkpoint of the last step."""
    from bert_tf.checkpoints.model_dir import restore

    checkpoint = checkpoints.latest_checkpoint(model_dir)
    # The loop numbers its checkpoints by step; an earlier one would start the next student from a half-trained one.
    if checkpoint is None or not checkpoint.endswith(f"-{num_train_steps}"):
        raise ValueError(
            f"{model_dir} holds no {stage.config.num_hidden_layers}-layer student trained for {num_train_steps} "
            f"steps (latest checkpoint: {checkpoint})."
        )
    with strategy.scope():
        model = finetuning_phases.build_model(inputs.task_object, stage.config)
    restore(model, checkpoint)
    logging.info("Restored the %d-layer intermediate student from %s.", stage.config.num_hidden_layers, checkpoint)
    return model


def intermediate_dir_name(num_layers: int) -> str:
    """The subdirectory of the student's `output_dir` where the intermediate student of `num_layers` trains."""
    return f"intermediate_{num_layers}_layers"


def _train(
    inputs,
    model_dir,
    teacher_model,
    source_model,
    student: _Student,
    config: DistillationConfig,
    strategy,
    training_config,
    batch_size,
    runtime,
):
    """Trains `student` in `model_dir` (resuming what is there); returns (model, step).

    `training_config`: the schedule in steps (`TrainingConfig.in_steps`) for batches of `batch_size`.

    `source_model`: the task model whose `student.source_layers` a student from the teacher's weights starts
    from: the teacher, or the intermediate student before it.
    """
    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.distillation import students
    from bert_tf.distillation.losses import DistillationLoss
    from bert_tf.training import default_forward, train

    task_object, features = inputs.task_object, inputs.train_features
    logging.info(
        "***** Distillation into %d layers: %d features, batch size %d, %d steps, teacher layers %s *****",
        student.config.num_hidden_layers,
        _num_features(features),
        batch_size,
        training_config.num_train_steps,
        student.teacher_layers,
    )

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(batch_size)
        return task_object.dataset(features, per_replica, training=True, seed=runtime.seed, input_context=input_context)

    def init_fn(model):
        if student.checkpoint:
            restore(model.encoder, student.checkpoint)
            logging.info("Initialised the student's encoder from %s.", student.checkpoint)
        elif student.source_layers is not None:
            students.copy_teacher_layers(model, source_model, student.source_layers)
            source = "teacher" if source_model is teacher_model else "intermediate student"
            logging.info("Initialised the student from the %s's layers %s.", source, student.source_layers)

    forward_fn = default_forward
    teacher_width = teacher_model.encoder.config.hidden_size
    # TinyBERT's learned W_h for a student narrower (or wider) than its teacher: trained and checkpointed with
    # the student (so a resumed run is exact), but not part of the student that is written or evaluated.
    project = bool(config.hidden_loss_weight) and student.config.hidden_size != teacher_width
    if config.hidden_loss_weight:
        forward_fn = _hidden_state_forward(teacher_model, student.teacher_layers)

    def model_fn():
        model = finetuning_phases.build_model(task_object, student.config)
        if project:
            model.hidden_projection = students.hidden_projection(model, teacher_width)
        return model

    def checkpoint_items_fn(model):
        items = dict(model.checkpoint_items)
        if project:
            items["hidden_projection"] = model.hidden_projection
        return items

    loss = DistillationLoss(
        _loss_kind(task_object),
        temperature=config.temperature,
        alpha=config.alpha,
        hidden_loss_weight=config.hidden_loss_weight,
    )
    result = train(
        strategy,
        model_fn,
        loss,
        dataset_fn,
        model_dir,
        training_config,
        init_fn=init_fn,
        forward_fn=forward_fn,
        checkpoint_items_fn=checkpoint_items_fn,
        preemption=runtime.preemption_watcher(),
    )
    if not project:
        return result.model, result.step
    with strategy.scope():
        student_model = finetuning_phases.build_model(task_object, student.config)
    students.copy_without_projection(result.model, student_model)
    return student_model, result.step


def _hidden_state_forward(teacher_model, teacher_layers):
    """A `forward_fn` returning the student's logits and its hidden states beside the teacher's mapped ones."""
    from keras import ops

    from bert_tf.distillation.students import task_head
    from bert_tf.models import ENCODER_INPUT_NAMES

    def forward(model, batch, training):
        encoder_inputs = {name: batch[name] for name in ENCODER_INPUT_NAMES}
        student_outputs = model.encoder(encoder_inputs, training=training)
        head_input = "sequence_output" if hasattr(model, "token_classifier") else "pooled_output"
        logits = task_head(model)(student_outputs[head_input], training=training)
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
