"""`run_finetuning`: the fine-tuning job (train, evaluate, predict) behind `experiments.finetune`.

    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.finetune import FinetuningDataConfig, FinetuningTaskConfig, run_finetuning
    from bert_tf.training import TrainingConfig

    results = run_finetuning(
        FinetuningTaskConfig("classification", max_seq_length=128), "runs/sst",
        ModelSource(model_dir="models/bert_base"),
        FinetuningDataConfig(train_file="train.tsv", eval_file="dev.tsv", text_a_column="sentence"),
        TrainingConfig(learning_rate=2e-5, num_train_epochs=3.0, warmup_proportion=0.1),
        do_train=True, do_eval=True)

The config objects hold the flags of `experiments.finetune` (which documents
them) and check them when they are built; the runtime (strategy, precision,
seeds) is a `bert_tf.training.RuntimeConfig`.

The model comes from a model directory (`bert_config.json`, `vocab.txt`,
checkpoint; written by `experiments.convert` or `experiments.pretrain`) or from
an explicit checkpoint, config and vocabulary. Training runs the project's
distributed loop (`bert_tf.training.train`) with `output_dir` as its model
directory, so an interrupted job resumes where it stopped. `output_dir` then
also holds `bert_config.json`, `vocab.txt` and `task_config.json` (labels,
lengths): it is itself a model directory, and a later run with only
`do_eval`/`do_predict` restores the fine-tuned model from it.

Outputs: `eval_results.json` (also logged and returned), `eval_predictions.*`
for the evaluation data and `predictions.*` for the prediction data (TSV for
classification, CoNLL text for tagging, JSON for SQuAD).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from absl import logging

from bert_tf import checkpoints, file_io
from bert_tf.checkpoints.model_source import ModelSource, ResolvedModel, check_resumable
from bert_tf.data import finetuning_readers
from bert_tf.data.finetuning_data import FinetuningDataSource
from bert_tf.errors import DataError, JobArgumentError, check_int, check_utf8
from bert_tf.jobs import DEFAULT_SEED

if TYPE_CHECKING:  # bert_tf.training loads TensorFlow; this module does not, until a job runs.
    from bert_tf.training import RuntimeConfig, TrainingConfig

# The schedule of `run_finetuning(schedule=None)`, and the defaults of experiments.finetune's flags
# (a `bert_tf.training.TrainingConfig`'s fields): google-research/bert's run_classifier.py.
DEFAULT_SCHEDULE = dict(
    learning_rate=5e-5,
    num_train_epochs=3.0,
    warmup_proportion=0.1,
    weight_decay_rate=0.01,
    clip_norm=1.0,
    steps_per_loop=100,
    save_checkpoints_steps=1000,
    keep_checkpoint_max=5,
)

TASKS = ("classification", "sentence_pair_classification", "regression", "token_classification", "squad")
TASK_CONFIG_NAME = "task_config.json"

Column = str | int | None


class NonFiniteMetricError(RuntimeError):
    """An evaluation metric is NaN or infinite: the run failed (eval_results.json lists which)."""


# --- configs ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FinetuningTaskConfig:
    """The task and its options (the flags of the same names).

    Attributes:
      task_type: one of `TASKS` (the flag `--task`): which plug-in (`bert_tf.tasks`) the job runs.
      max_seq_length: packed sequence length (WordPieces incl. [CLS]/[SEP]).
      dropout_rate: dropout before the output layer; None: the model's hidden_dropout_prob.
      bucket_width: training, evaluation and prediction batches are padded to the smallest multiple of it
        that holds their longest sequence (capped at max_seq_length), so a batch costs its tokens rather than
        max_seq_length, with at most max_seq_length / bucket_width compiled shapes; 0 turns it off (the same
        batches, every one at max_seq_length). Not for SQuAD, whose windows are fixed.
      group_by_length: training batches of near-equal lengths instead of random ones (less padding, slower
        learning on small data; `bert_tf.data.length_buckets`).
      doc_stride, max_query_length, max_answer_length, n_best_size,
      version_2_with_negative, null_score_diff_threshold: SQuAD's options.
    """

    task_type: str
    max_seq_length: int = 128
    dropout_rate: float | None = None
    bucket_width: int = 16
    group_by_length: bool = False
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0

    def __post_init__(self):
        if self.task_type not in TASKS:
            raise JobArgumentError(f"--task must be one of {', '.join(TASKS)}, got {self.task_type!r}.")
        check_int("max_seq_length", self.max_seq_length)
        check_int("bucket_width", self.bucket_width, minimum=0)
        if self.task_type == "squad" and self.max_query_length + 3 >= self.max_seq_length:
            raise JobArgumentError(
                f"--max_seq_length ({self.max_seq_length}) must exceed --max_query_length "
                f"({self.max_query_length}) + 3."
            )


@dataclasses.dataclass(frozen=True)
class FinetuningDataConfig:
    """The training, evaluation and prediction data (the flags of the same names).

    Attributes:
      train_file, eval_file, predict_file: TSV/CSV/JSONL (classification,
        regression), CoNLL columns (token_classification) or SQuAD JSON.
      tfds_name, tfds_data_dir, tfds_*_split: a prepared TFDS text dataset
        instead of files (classification and regression).
      text_a_column, text_b_column, label_column: columns of the text files
        (names or 0-based indices; keys for JSONL), or TFDS feature names.
      file_format, has_header: of the text files (format default: from the extension).
      label_list: class names or tags in id order; default: from a previous
        run's `task_config.json`, the TFDS label names, or the training data.
      conll_word_column, conll_label_column: CoNLL files' columns.
      train_batch_size, eval_batch_size: global batch sizes (over all replicas).
      predict_batch_size: None: `eval_batch_size`.
    """

    train_file: str | None = None
    eval_file: str | None = None
    predict_file: str | None = None
    tfds_name: str | None = None
    tfds_data_dir: str | None = None
    tfds_train_split: str = "train"
    tfds_eval_split: str | None = None
    tfds_predict_split: str | None = None
    text_a_column: Column = None
    text_b_column: Column = None
    label_column: Column = None
    file_format: str | None = None
    has_header: bool = True
    label_list: Sequence[str] | None = None
    conll_word_column: int = 0
    conll_label_column: int = -1
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int | None = None

    def __post_init__(self):
        for flag in ("train_batch_size", "eval_batch_size"):
            check_int(flag, getattr(self, flag))
        if self.predict_batch_size is not None:
            check_int("predict_batch_size", self.predict_batch_size)
        if self.label_list is not None:
            object.__setattr__(self, "label_list", tuple(self.label_list))
        if self.tfds_name:
            for flag in ("train_file", "eval_file", "predict_file"):
                if getattr(self, flag):
                    raise JobArgumentError(f"Give either --tfds_name or --{flag}, not both.")


# --- the job ----------------------------------------------------------------------


@dataclasses.dataclass
class _Inputs:
    """What the job read and checked before TensorFlow is set up (examples and features per phase)."""

    output_dir: str
    source: ResolvedModel
    task_object: object  # FinetuningTask
    train_examples: list | None = None
    train_features: object = None
    eval_examples: list | None = None
    eval_features: object = None
    predict_examples: list | None = None
    predict_features: object = None


def run_finetuning(
    task: FinetuningTaskConfig,
    output_dir: str,
    model: ModelSource,
    data: FinetuningDataConfig,
    schedule: TrainingConfig | None = None,
    runtime: RuntimeConfig | None = None,
    *,
    do_train: bool = False,
    do_eval: bool = False,
    do_predict: bool = False,
) -> dict:
    """Fine-tunes, evaluates and/or predicts; returns the evaluation metrics (empty without `do_eval`).

    Args:
      task, model, data: see their classes.
      schedule: the `bert_tf.training.TrainingConfig` (`num_train_steps`, or `num_train_epochs` over the
        training features; `warmup_proportion` of the steps); None: `DEFAULT_SCHEDULE`.
      output_dir: checkpoints, summaries, results and predictions.
      runtime: strategy, precision and seeds; None: `RuntimeConfig(seed=DEFAULT_SEED)`.
        Its seed seeds initialisation, dropout and shuffling; `deterministic`
        also makes TensorFlow's ops deterministic (process-wide; a GPU op
        without a deterministic kernel then raises).
      do_train, do_eval, do_predict: the phases to run (at least one).

    Raises:
      DataError: bad input data, naming the file and line or record.
      JobArgumentError (a ValueError): inconsistent arguments, naming the flag.
    """
    from bert_tf import training
    from bert_tf.training import distribution

    schedule = schedule if schedule is not None else training.TrainingConfig(**DEFAULT_SCHEDULE)
    runtime = runtime if runtime is not None else training.RuntimeConfig(seed=DEFAULT_SEED)
    if not (do_train or do_eval or do_predict):
        raise JobArgumentError("At least one of --do_train, --do_eval and --do_predict must be set.")
    if data.tfds_name and task.task_type in ("token_classification", "squad"):
        raise JobArgumentError(
            f"--tfds_name is supported for classification and regression, not --task={task.task_type}; "
            "use --train_file/--eval_file/--predict_file."
        )
    if schedule.eval_every_steps and not (do_train and do_eval):
        raise JobArgumentError("--eval_every_steps needs --do_train and --do_eval (with --eval_file or --tfds_name).")
    _check_data_sources(data, do_train, do_eval, do_predict)
    # Nothing is written to output_dir before every check passed.
    inputs = _read_inputs(task, os.path.abspath(output_dir), model, data, do_train, do_eval, do_predict)

    batch_sizes = {"train_batch_size": data.train_batch_size} if do_train else {}
    with training.training_runtime(runtime, batch_sizes=batch_sizes, always_seed=True) as strategy:
        is_chief = training.is_chief(strategy)
        if getattr(inputs.task_object, "bucket_width", 0) and distribution.is_tpu_strategy(strategy):
            # TPUs compile for static shapes; a batch of unknown length does not fit them.
            logging.info("--bucket_width is off on TPU: every batch is padded to --max_seq_length.")
            inputs.task_object.bucket_width = 0
        if do_train:
            training.check_microbatches(schedule.num_microbatches, data.train_batch_size, strategy.num_replicas_in_sync)
            if is_chief:
                # Written first, so a run stopped during training can be evaluated or resumed as it is.
                _write_model_files(inputs.output_dir, inputs.source, inputs.task_object)
            trained, step = _train(inputs, strategy, schedule, data, runtime)
            if is_chief:
                # The backend-neutral copy of the trained weights (bert_tf/checkpoints/weights_file.py).
                from bert_tf.checkpoints import weights_file

                weights_file.write_weights_file(
                    inputs.output_dir, trained, checkpoint=checkpoints.latest_checkpoint(inputs.output_dir)
                )
        else:
            trained, step = _restore_finetuned(inputs.task_object, inputs.source, strategy, inputs.output_dir)

        results = {}
        if not is_chief:
            return results
        eval_strategy = _evaluation_strategy(strategy)
        if do_eval:
            results = _evaluate(inputs, trained, step, data.eval_batch_size, eval_strategy, runtime.jit_compile)
        if do_predict:
            _predict_and_write(
                inputs,
                trained,
                data.predict_batch_size or data.eval_batch_size,
                eval_strategy,
                runtime.jit_compile,
            )
        return results


def _read_inputs(
    task: FinetuningTaskConfig,
    output_dir: str,
    model: ModelSource,
    data: FinetuningDataConfig,
    do_train: bool,
    do_eval: bool,
    do_predict: bool,
) -> _Inputs:
    """Reads the model's config and vocabulary and all the data, and checks them; writes nothing."""
    reader = FinetuningDataSource(task.task_type, data, task.version_2_with_negative)
    saved_task_config = _read_task_config(output_dir)
    finetuned = checkpoints.latest_checkpoint(output_dir)
    source = _model_source(model, output_dir, task.max_seq_length, need_init=do_train and finetuned is None)
    tokenizer = _tokenizer(source)

    train_examples = reader.read("train", data.train_file) if do_train else None
    labels = _resolve_labels(task.task_type, data.label_list, saved_task_config, reader, train_examples)
    task_object = _build_task(task, tokenizer, labels, reader.sentence_pair)
    if finetuned is not None:
        _check_resumable(output_dir, saved_task_config, source, task_object)
    # All data is read and featurized before training, so bad evaluation or prediction data
    # (an unknown label, a malformed record) fails now rather than after hours of training.
    inputs = _Inputs(output_dir, source, task_object)
    if do_train:
        inputs.train_examples = train_examples
        inputs.train_features = task_object.featurize(train_examples, training=True)
    if do_eval:
        inputs.eval_examples = reader.read("eval", data.eval_file)
        inputs.eval_features = task_object.featurize(inputs.eval_examples, training=False)
    if do_predict:
        inputs.predict_examples = reader.read("predict", data.predict_file)
        inputs.predict_features = task_object.featurize(
            [_without_label(e) for e in inputs.predict_examples], training=False
        )
    return inputs


def _tokenizer(source: ResolvedModel):
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    # The vocabulary was read and checked by the model source; the tokenizer builds its lookup table from it.
    return TaskTokenizer(source.vocab_file, lower_case=source.do_lower_case, vocab=source.vocab)


def _evaluate(inputs: _Inputs, model, step, batch_size, strategy, jit_compile) -> dict:
    """Evaluates, writes eval_predictions.* and eval_results.json; a non-finite metric fails the run."""
    from bert_tf.training import EVAL_RESULTS_NAME

    task_object, examples = inputs.task_object, inputs.eval_examples
    predictions = _predict(task_object, model, examples, inputs.eval_features, batch_size, strategy, jit_compile)
    results = task_object.evaluate(examples, predictions)
    results.update(num_examples=len(examples), global_step=step)
    task_object.write_predictions(examples, predictions, inputs.output_dir, prefix="eval_")
    non_finite = sorted(k for k, v in results.items() if isinstance(v, float) and not math.isfinite(v))
    # JSON has no NaN/Infinity: such metrics are written as null and listed, and the run fails.
    written = {k: (None if k in non_finite else v) for k, v in results.items()}
    if non_finite:
        written["non_finite_metrics"] = non_finite
    file_io.write_json(os.path.join(inputs.output_dir, EVAL_RESULTS_NAME), written)
    logging.info("***** Eval results (step %d) *****", step)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
    if non_finite:
        raise NonFiniteMetricError(
            "evaluation gave non-finite metrics: "
            + ", ".join(f"{k}={results[k]}" for k in non_finite)
            + f" (step {step}); the model diverged or the evaluation data is degenerate."
        )
    return results


def _predict_and_write(inputs: _Inputs, model, batch_size, strategy, jit_compile) -> None:
    task_object, examples = inputs.task_object, inputs.predict_examples
    predictions = _predict(task_object, model, examples, inputs.predict_features, batch_size, strategy, jit_compile)
    paths = task_object.write_predictions(examples, predictions, inputs.output_dir, prefix="")
    logging.info("Wrote predictions for %d examples to %s.", len(examples), ", ".join(paths))


def _evaluation_strategy(strategy):
    """Multi-worker runs evaluate on the chief alone, outside the collective strategy."""
    import tensorflow as tf

    from bert_tf import training

    return strategy if training.num_workers(strategy) == 1 else tf.distribute.get_strategy()


# --- arguments -----------------------------------------------------------------


def _check_data_sources(data: FinetuningDataConfig, do_train, do_eval, do_predict):
    if data.tfds_name:
        return  # FinetuningDataConfig refuses files besides it.
    for wanted, flag, value in (
        (do_train, "train_file", data.train_file),
        (do_eval, "eval_file", data.eval_file),
        (do_predict, "predict_file", data.predict_file),
    ):
        if wanted and not value:
            raise JobArgumentError(f"--do_{flag.split('_')[0]} needs --{flag} (or --tfds_name).")
        if wanted:
            # The readers' decode errors name no line; fine-tuning files are small enough to check first.
            check_utf8(value, flag)


def _check_resumable(output_dir, saved_task_config, source: ResolvedModel, task_object):
    """Refuses a fine-tuned `output_dir` of another task, labels, config or vocabulary; writes nothing.

    Runs before `_write_model_files`, so a refused run leaves the directory's
    files describing the checkpoint that is there.
    """
    if saved_task_config:
        for key in ("task", "label_list"):
            saved, wanted = saved_task_config.get(key), task_object.config().get(key)
            if saved != wanted:
                raise JobArgumentError(
                    f"--output_dir={output_dir} holds a fine-tuned model with {key} {saved!r}, not "
                    f"{wanted!r}; use another --output_dir."
                )
    check_resumable(output_dir, source.config, source.vocab_file)


def _read_task_config(output_dir: str) -> dict | None:
    path = os.path.join(output_dir, TASK_CONFIG_NAME)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise JobArgumentError(f"{path}: unreadable task config ({e}).") from None


def _model_source(model: ModelSource, output_dir, max_seq_length, need_init) -> ResolvedModel:
    """The checked model; without --model_dir and --bert_config_file, the fine-tuned model in `output_dir`."""
    if not (model.model_dir or model.bert_config_file) and checkpoints.latest_checkpoint(output_dir) is not None:
        # An output directory written by an earlier run is itself a model directory.
        model = dataclasses.replace(model, model_dir=output_dir)
    source = model.resolve(max_seq_length, need_checkpoint=need_init)
    if need_init:
        from bert_tf.checkpoints.model_dir import find_checkpoint

        if not source.checkpoint:
            raise JobArgumentError("--do_train needs pretrained weights: --model_dir or --init_checkpoint.")
        try:
            source = dataclasses.replace(source, checkpoint=find_checkpoint(source.checkpoint))
        except FileNotFoundError as e:
            raise JobArgumentError(f"--init_checkpoint/--model_dir: {e}") from None
    return source


def _resolve_labels(task, label_list, saved_task_config, data: FinetuningDataSource, train_examples):
    if task in ("regression", "squad"):
        return None
    if label_list:
        return list(label_list)
    if saved_task_config and saved_task_config.get("label_list"):
        return list(saved_task_config["label_list"])
    if data.tfds_name:
        return list(data.label_names)
    if train_examples is None:
        raise JobArgumentError("No label list: give --label_list, or train in this --output_dir first.")
    if task == "token_classification":
        return finetuning_readers.tag_list_from_examples(train_examples)
    labels = finetuning_readers.label_list_from_examples(train_examples)
    if len(labels) < 2:
        raise DataError(f"The training data has only the label(s) {labels}; classification needs at least two.")
    return labels


def _build_task(task: FinetuningTaskConfig, tokenizer, labels, sentence_pair):
    if task.task_type in ("classification", "sentence_pair_classification", "regression"):
        from bert_tf.tasks.classification import ClassificationTask

        return ClassificationTask(
            tokenizer,
            task.max_seq_length,
            labels,
            sentence_pair=sentence_pair,
            dropout_rate=task.dropout_rate,
            bucket_width=task.bucket_width,
            group_by_length=task.group_by_length,
        )
    if task.task_type == "token_classification":
        from bert_tf.tasks.tagging import TaggingTask

        return TaggingTask(
            tokenizer,
            task.max_seq_length,
            labels,
            dropout_rate=task.dropout_rate,
            bucket_width=task.bucket_width,
            group_by_length=task.group_by_length,
        )
    from bert_tf.tasks.squad import SquadTask

    return SquadTask(
        tokenizer,
        task.max_seq_length,
        doc_stride=task.doc_stride,
        max_query_length=task.max_query_length,
        max_answer_length=task.max_answer_length,
        n_best_size=task.n_best_size,
        version_2_with_negative=task.version_2_with_negative,
        null_score_diff_threshold=task.null_score_diff_threshold,
    )


# --- model, training, prediction --------------------------------------------------


def _build_model(task_object, config):
    from bert_tf.models import BertEncoder

    return task_object.build_model(BertEncoder(config))


def _num_features(features) -> int:
    return len(features["text_a"]) if isinstance(features, dict) else len(features)


def _train(inputs: _Inputs, strategy, schedule: TrainingConfig, data: FinetuningDataConfig, runtime: RuntimeConfig):
    from bert_tf import training
    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.training import train

    task_object, features, source = inputs.task_object, inputs.train_features, inputs.source
    batch_size = data.train_batch_size
    num_features = _num_features(features)
    config = dataclasses.replace(schedule.in_steps(num_features, batch_size), jit_compile=runtime.jit_compile)
    num_train_steps = config.num_train_steps
    logging.info(
        "***** Training: %d examples, %d features, batch size %d, %d steps *****",
        len(inputs.train_examples),
        num_features,
        batch_size,
        num_train_steps,
    )

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(batch_size)
        return task_object.dataset(features, per_replica, training=True, seed=runtime.seed, input_context=input_context)

    def init_fn(model):
        restore(model.encoder, source.checkpoint)
        logging.info("Initialised the encoder from %s.", source.checkpoint)

    eval_fn = None
    if inputs.eval_features is not None and config.eval_every_steps:
        is_chief, eval_strategy = training.is_chief(strategy), _evaluation_strategy(strategy)

        def eval_fn(model):
            # The task's own metrics on its predictions, as the final evaluation computes them.
            if not is_chief:
                return {}
            predictions = _predict(
                task_object,
                model,
                inputs.eval_examples,
                inputs.eval_features,
                data.eval_batch_size,
                eval_strategy,
                runtime.jit_compile,
            )
            return task_object.evaluate(inputs.eval_examples, predictions)

    # The loop checkpoints the task model's own items (Task.checkpoint_items, holding "encoder"), so output_dir
    # is also a model directory for load_encoder().
    result = train(
        strategy,
        lambda: _build_model(task_object, source.config),
        task_object.compute_loss,
        dataset_fn,
        inputs.output_dir,
        config,
        eval_fn=eval_fn,
        init_fn=init_fn,
    )
    return result.model, result.step


def _restore_finetuned(task_object, source: ResolvedModel, strategy, output_dir):
    from bert_tf.checkpoints.model_dir import restore

    latest = checkpoints.latest_checkpoint(output_dir)
    if latest is None:
        raise JobArgumentError(
            f"--output_dir {output_dir} holds no fine-tuned checkpoint to evaluate or predict with; add --do_train."
        )
    with strategy.scope():
        model = _build_model(task_object, source.config)
    try:
        restore(model, latest)
    except ValueError as e:
        raise JobArgumentError(f"{e} (a {task_object.name} model with these settings: labels, config)") from None
    step = int(latest.rsplit("-", 1)[-1]) if latest.rsplit("-", 1)[-1].isdigit() else 0
    logging.info("Restored the fine-tuned model from %s.", latest)
    return model, step


def _predict(task_object, model, examples, features, batch_size, strategy, jit_compile):
    from bert_tf.tasks.inference import predict_outputs

    dataset = task_object.dataset(features, batch_size, training=False)
    outputs = predict_outputs(
        model, dataset, strategy=strategy, jit_compile=jit_compile, num_features=_num_features(features)
    )
    return task_object.postprocess(examples, features, outputs)


def _without_label(example):
    for field in ("label", "labels"):
        if hasattr(example, field):
            return dataclasses.replace(example, **{field: None})
    return example


def _write_model_files(output_dir, source: ResolvedModel, task_object):
    from bert_tf.checkpoints.model_dir import write_model_files

    write_model_files(output_dir, source.config, source.vocab_file)
    file_io.write_json(os.path.join(output_dir, TASK_CONFIG_NAME), task_object.config())
