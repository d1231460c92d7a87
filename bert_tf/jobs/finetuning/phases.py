"""The phases of a fine-tuning job once its inputs are read: train, restore, evaluate and predict.

    from bert_tf.jobs.finetuning.phases import predict
    predictions = predict(task, model, examples, features, batch_size=32, strategy=None, jit_compile=False)

Shared by `bert_tf.jobs.finetuning.job` and the distillation jobs; every function takes the `FinetuningTask` plug-in
(or the `FinetuningInputs` holding it), so none names a task. Loads TensorFlow when called.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from absl import logging

from bert_tf import checkpoints, file_io
from bert_tf.checkpoints.model_source import ResolvedModel
from bert_tf.errors import JobArgumentError, NonFiniteMetricError
from bert_tf.jobs.finetuning.inputs import FinetuningInputs

if TYPE_CHECKING:  # bert_tf.training loads TensorFlow; this module does not, until a job runs.
    from bert_tf.training import RuntimeConfig, TrainingConfig


def build_model(task_object, config):
    """The task's Keras model on a new `BertEncoder` of `config` (a `BertConfig`)."""
    from bert_tf.models import BertEncoder

    return task_object.build_model(BertEncoder(config))


def evaluation_strategy(strategy):
    """Multi-worker runs evaluate on the chief alone, outside the collective strategy."""
    import tensorflow as tf

    from bert_tf import training

    return strategy if training.num_workers(strategy) == 1 else tf.distribute.get_strategy()


def training_summary(num_examples: int, num_features: int, batch_size: int, config: TrainingConfig) -> str:
    """The training run in words whose numbers add up: its steps as epochs of the batches one epoch has.

    An epoch is the full batches of the shuffled features (`bert_tf.data.length_buckets`); the features past
    its last full batch sit that epoch out, so a run of ceil(epochs * features / batch) steps can be an
    epoch's batches and a few of the next.
    """
    # One input pipeline's epoch, as `training_batch_indices` cuts it (features repeated if under one batch).
    slots = num_features * max(1, -(-batch_size // max(num_features, 1)))
    per_epoch = max(1, slots // batch_size)
    steps = config.num_train_steps
    return (
        f"{num_examples} examples, {num_features} features, batch size {batch_size}, {steps} steps "
        f"= {steps / per_epoch:.2f} epochs of {per_epoch} batch{'es' if per_epoch != 1 else ''} (each epoch leaves out "
        f"{slots - per_epoch * batch_size} random features)"
    )


def train_task(
    inputs: FinetuningInputs,
    strategy,
    training_config: TrainingConfig,
    train_batch_size: int,
    eval_batch_size: int,
    runtime: RuntimeConfig,
):
    """Fine-tunes `inputs.task_object`'s model from the pretrained encoder; returns (model, global step).

    The loop checkpoints into `inputs.output_dir` and resumes from it; with `training_config.eval_every_steps`
    and evaluation features, it also evaluates with the task's own metrics every so many steps.
    """
    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.training import train

    task_object, features, source = inputs.task_object, inputs.train_features, inputs.source
    size = task_object.num_features(features)
    config = training_config.in_steps(size, train_batch_size)
    logging.info(
        "***** Training: %s *****", training_summary(len(inputs.train_examples), size, train_batch_size, config)
    )

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(train_batch_size)
        return task_object.dataset(features, per_replica, training=True, seed=runtime.seed, input_context=input_context)

    def init_fn(model):
        if source.checkpoint is None:  # --init_from=random
            logging.info("The encoder is randomly initialised (--init_from=random, --seed=%d).", runtime.seed)
            return
        restore(model.encoder, source.checkpoint)
        logging.info("Initialised the encoder from %s.", source.checkpoint)

    eval_fn = None
    if inputs.eval_features is not None and config.eval_every_steps:
        eval_fn = _periodic_eval_fn(inputs, strategy, eval_batch_size, runtime)
    # The loop checkpoints the task model's own items (TaskModel.checkpoint_items, holding "encoder"), so output_dir
    # is also a model directory for load_encoder().
    result = train(
        strategy,
        lambda: build_model(task_object, source.config),
        task_object.compute_loss,
        dataset_fn,
        inputs.output_dir,
        config,
        eval_fn=eval_fn,
        init_fn=init_fn,
        jit_compile=runtime.jit_compile,
        preemption=runtime.preemption_watcher(),
    )
    return result.model, result.step


def _periodic_eval_fn(inputs: FinetuningInputs, strategy, eval_batch_size: int, runtime: RuntimeConfig):
    """The loop's `eval_fn`: the task's own metrics on its predictions, as the final evaluation computes them
    (the chief's; the other workers return no metrics)."""
    from bert_tf import training

    is_chief, eval_strategy = training.is_chief(strategy), evaluation_strategy(strategy)

    def eval_fn(model):
        if not is_chief:
            return {}
        predictions = predict(
            inputs.task_object,
            model,
            inputs.eval_examples,
            inputs.eval_features,
            eval_batch_size,
            eval_strategy,
            runtime.jit_compile,
        )
        return inputs.task_object.evaluate(inputs.eval_examples, predictions)

    return eval_fn


def _settings(task_object) -> str:
    """What a fine-tuned model's weights depend on, for the message of a checkpoint that lacks some."""
    if getattr(task_object, "pools_by_attention", False):  # classification's and regression's windows
        return "labels, config, --window_pooling=attention: weights fine-tuned with it"
    return "labels, config"


def restore_finetuned(task_object, source: ResolvedModel, strategy, output_dir: str):
    """The fine-tuned model of `output_dir`'s latest checkpoint; returns (model, its step)."""
    from bert_tf.checkpoints.model_dir import restore

    latest = checkpoints.latest_checkpoint(output_dir)
    if latest is None:
        raise JobArgumentError(
            f"--output_dir {output_dir} holds no fine-tuned checkpoint to evaluate or predict with; add --do_train."
        )
    with strategy.scope():
        model = build_model(task_object, source.config)
    try:
        restore(model, latest)
    except ValueError as e:
        raise JobArgumentError(
            f"{e} (a {task_object.name} model with these settings: {_settings(task_object)})"
        ) from None
    step = int(latest.rsplit("-", 1)[-1]) if latest.rsplit("-", 1)[-1].isdigit() else 0
    logging.info("Restored the fine-tuned model from %s.", latest)
    return model, step


def predict(task_object, model, examples, features, batch_size: int, strategy, jit_compile: bool):
    """The task's predictions of `model` for `examples` (featurized as `features`), in example order."""
    from bert_tf.tasks.inference import predict_outputs

    dataset = task_object.dataset(features, batch_size, training=False)
    outputs = predict_outputs(
        model, dataset, strategy=strategy, jit_compile=jit_compile, num_features=task_object.num_features(features)
    )
    return task_object.postprocess(examples, features, outputs)


def evaluate(inputs: FinetuningInputs, model, step: int, batch_size: int, strategy, jit_compile: bool) -> dict:
    """Evaluates, writes eval_predictions.* and eval_results.json; a non-finite metric fails the run.

    Raises:
      NonFiniteMetricError: a metric is NaN or infinite (written as null and listed in eval_results.json).
    """
    from bert_tf.training import EVAL_RESULTS_NAME

    task_object, examples = inputs.task_object, inputs.eval_examples
    predictions = predict(task_object, model, examples, inputs.eval_features, batch_size, strategy, jit_compile)
    results = task_object.evaluate(examples, predictions)
    results.update(num_examples=len(examples), global_step=step)
    # What the model did not read of the evaluation texts (bert_tf.tasks.long_text), whatever --long_text is.
    results.update(task_object.cut_report(inputs.eval_features))
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


def predict_and_write(inputs: FinetuningInputs, model, batch_size: int, strategy, jit_compile: bool) -> list:
    """Predicts on the prediction features and writes `predictions.*` into `inputs.output_dir`; returns the paths."""
    task_object, examples = inputs.task_object, inputs.predict_examples
    predictions = predict(task_object, model, examples, inputs.predict_features, batch_size, strategy, jit_compile)
    paths = task_object.write_predictions(examples, predictions, inputs.output_dir, prefix="")
    logging.info("Wrote predictions for %d examples to %s.", len(examples), ", ".join(paths))
    return paths
