"""`run_finetuning`: the fine-tuning job (train, evaluate, predict) behind `experiments.finetune`.

    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.finetuning.job import run_finetuning
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    from bert_tf.tasks import FinetuningTaskConfig
    from bert_tf.training import TrainingConfig

    results = run_finetuning(
        "runs/sst",
        FinetuningTaskConfig("classification", max_seq_length=128),
        ModelSource(model_dir="models/bert_base"),
        FinetuningDataConfig(train_file="train.tsv", eval_file="dev.tsv", text_a_column="sentence"),
        TrainingConfig(learning_rate=2e-5, num_train_epochs=3.0, warmup_proportion=0.1),
        do_train=True, do_eval=True)

The job is the same for every task: the task config's `task` names a plug-in of `bert_tf.tasks` (its registry:
classification, sentence pairs, regression, tagging, SQuAD, or a plug-in of the user's), which reads the
examples, resolves the labels and featurizes; SQuAD's options are on its `bert_tf.tasks.SquadConfig`. The
config objects hold the flags of `experiments.finetune` (which documents them) and check them when they are
built; the runtime (strategy, precision, seeds) is a `bert_tf.training.RuntimeConfig`.

The model comes from a model directory (`bert_config.json`, `vocab.txt`, checkpoint; written by
`experiments.convert` or `experiments.pretrain`) or from an explicit checkpoint, config and vocabulary.
Training runs the project's distributed loop (`bert_tf.training.train`) with `output_dir` as its model
directory, so an interrupted job resumes where it stopped. `output_dir` then also holds `bert_config.json`,
`vocab.txt` and `task_config.json` (labels, lengths): it is itself a model directory, and a later run with only
`do_eval`/`do_predict` restores the fine-tuned model from it.

Outputs: `eval_results.json` (also logged and returned), `eval_predictions.*` for the evaluation data and
`predictions.*` for the prediction data (TSV for classification, CoNLL text for tagging, JSON for SQuAD).
The pieces live by concern in this package: `config` (data config, default schedule), `inputs` (model,
plug-in and data, read before TensorFlow starts), `phases` (train, evaluate, predict) and `files` (the model
directory's files).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from absl import logging

from bert_tf import checkpoints
from bert_tf.checkpoints.model_source import ModelSource
from bert_tf.errors import JobArgumentError
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.jobs.finetuning import files as finetuning_files
from bert_tf.jobs.finetuning import phases as finetuning_phases
from bert_tf.jobs.finetuning.config import DEFAULT_SCHEDULE, FinetuningDataConfig, check_data_sources
from bert_tf.jobs.finetuning.inputs import read_inputs
from bert_tf.tasks.task_config import FinetuningTaskConfig

if TYPE_CHECKING:  # bert_tf.training loads TensorFlow; this module does not, until a job runs.
    from bert_tf.training import RuntimeConfig, TrainingConfig


def run_finetuning(
    output_dir: str,
    task: FinetuningTaskConfig,
    model: ModelSource,
    data: FinetuningDataConfig,
    training_config: TrainingConfig | None = None,
    runtime: RuntimeConfig | None = None,
    *,
    do_train: bool = False,
    do_eval: bool = False,
    do_predict: bool = False,
    overwrite_predictions: bool = False,
) -> dict:
    """Fine-tunes, evaluates and/or predicts; returns the evaluation metrics (empty without `do_eval`).

    Args:
      output_dir: checkpoints, summaries, results and predictions.
      task: a `FinetuningTaskConfig`, or its registered plug-in's subclass (`bert_tf.tasks.SquadConfig` for SQuAD).
      model, data: see their classes.
      training_config: the `bert_tf.training.TrainingConfig` (`num_train_steps`, or `num_train_epochs` over
        the training features; `warmup_proportion` of the steps); None: `DEFAULT_SCHEDULE`.
      runtime: strategy, precision and seeds; None: `RuntimeConfig(seed=DEFAULT_SEED)`. Its seed seeds
        initialisation, dropout and shuffling; `deterministic` also makes TensorFlow's ops deterministic
        (process-wide; a GPU op without a deterministic kernel then raises).
      do_train, do_eval, do_predict: the phases to run (at least one).
      overwrite_predictions: replace an earlier `do_predict`'s `predictions.*` in `output_dir` (else: refused).

    Raises:
      DataError: bad input data, naming the file and line or record.
      JobArgumentError (a ValueError): inconsistent arguments, naming the flag.
      NonFiniteMetricError: the evaluation gave a NaN or infinite metric (a failed run, not bad input).
    """
    from bert_tf import training

    training_config = training_config if training_config is not None else training.TrainingConfig(**DEFAULT_SCHEDULE)
    runtime = runtime if runtime is not None else training.RuntimeConfig(seed=DEFAULT_SEED)
    _check_phases(training_config, do_train, do_eval, do_predict)
    # Packed rows unless the task or an option rules them out (logged); an explicit --packing there is refused.
    num_microbatches = training_config.num_microbatches if do_train else 1
    packing_note = task.packing_note(num_microbatches)
    task = task.resolve_packing(num_microbatches)
    check_data_sources(data, do_train, do_eval, do_predict)
    if do_predict and not overwrite_predictions:
        finetuning_files.check_no_earlier_predictions(output_dir)
    batch_sizes = {"train_batch_size": data.train_batch_size} if do_train else {}
    # The strategy first: a multi-worker one must configure collective ops before any op runs (reading does).
    with training.training_runtime(runtime, batch_sizes=batch_sizes, always_seed=True) as strategy:
        # Nothing is written to output_dir before every check passed.
        inputs = read_inputs(os.path.abspath(output_dir), task, model, data, do_train, do_eval, do_predict)
        _fit_to_strategy(inputs, strategy, training_config, data, do_train)
        logging.info("%s %s", packing_note, _precision_note(runtime, strategy))
        if do_train:
            trained, step = _train(inputs, strategy, training_config, data, runtime)
        else:
            trained, step = finetuning_phases.restore_finetuned(
                inputs.task_object, inputs.source, strategy, inputs.output_dir
            )
        if not training.is_chief(strategy):
            return {}
        return _evaluate_and_predict(inputs, trained, step, strategy, data, runtime, do_eval, do_predict)


def _check_phases(training_config: TrainingConfig, do_train: bool, do_eval: bool, do_predict: bool) -> None:
    if not (do_train or do_eval or do_predict):
        raise JobArgumentError("At least one of --do_train, --do_eval and --do_predict must be set.")
    if training_config.eval_every_steps and not (do_train and do_eval):
        raise JobArgumentError("--eval_every_steps needs --do_train and --do_eval (with --eval_file or --tfds_name).")


def _fit_to_strategy(inputs, strategy, training_config: TrainingConfig, data: FinetuningDataConfig, do_train):
    """TPUs take static shapes only (no length buckets); micro-batches must split each replica's batch."""
    from bert_tf import training
    from bert_tf.training import distribution

    if getattr(inputs.task_object, "bucket_width", 0) and distribution.is_tpu_strategy(strategy):
        logging.info("--bucket_width is off on TPU: every batch is padded to --max_seq_length.")
        inputs.task_object.bucket_width = 0
    if do_train:
        training.check_microbatches(
            training_config.num_microbatches, data.train_batch_size, strategy.num_replicas_in_sync
        )


def _precision_note(runtime: RuntimeConfig, strategy) -> str:
    """The precision and whether this device computes it natively; logged once every check passed (bad input
    is one line on stderr and nothing else)."""
    import tensorflow as tf

    from bert_tf.training import distribution, precision

    on_cpu = not (tf.config.list_logical_devices("GPU") or distribution.is_tpu_strategy(strategy))
    return precision.precision_note(runtime.mixed_precision, on_cpu=on_cpu)


def _train(inputs, strategy, training_config: TrainingConfig, data: FinetuningDataConfig, runtime: RuntimeConfig):
    """Trains (or resumes); the chief writes the model files first, so a stopped run can be evaluated or resumed,
    and the backend-neutral weights file last."""
    from bert_tf import training
    from bert_tf.checkpoints import weights_file

    is_chief = training.is_chief(strategy)
    if is_chief:
        finetuning_files.write_finetuned_model_files(
            inputs.output_dir, inputs.source, inputs.task_object, dataclasses.replace(data, **inputs.columns_used)
        )
    trained, step = finetuning_phases.train_task(
        inputs, strategy, training_config, data.train_batch_size, data.eval_batch_size, runtime
    )
    if is_chief:
        weights_file.write_weights_file(
            inputs.output_dir, trained, checkpoint=checkpoints.latest_checkpoint(inputs.output_dir)
        )
    return trained, step


def _evaluate_and_predict(inputs, trained, step, strategy, data, runtime, do_eval, do_predict) -> dict:
    """The chief's evaluation metrics (empty without `do_eval`) and, with `do_predict`, the written predictions."""
    eval_strategy = finetuning_phases.evaluation_strategy(strategy)
    results = {}
    if do_eval:
        results = finetuning_phases.evaluate(
            inputs, trained, step, data.eval_batch_size, eval_strategy, runtime.jit_compile
        )
    if do_predict:
        finetuning_phases.predict_and_write(
            inputs, trained, data.predict_batch_size or data.eval_batch_size, eval_strategy, runtime.jit_compile
        )
    return results
