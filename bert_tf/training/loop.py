"""The distributed custom training loop, with checkpoint/resume, evaluation and summaries.

One loop serves pretraining, fine-tuning and distillation: `train` takes a model factory, a loss function,
dataset functions and hooks, and trains under any `tf.distribute` strategy until `config.num_train_steps`.
Keras' `fit()` is not used because it fails under MultiWorkerMirroredStrategy (keras-team/keras#20585) and
cannot save the input position. A resumed run restores everything that determines its future (weights,
optimizer, step, dropout seeds, loss scale, tf.data iterator), so it ends with an uninterrupted run's weights.
How a step runs, micro-batches and resuming: docs/backends.md, "The training loop".
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Mapping

import keras
import tensorflow as tf
from absl import logging

from bert_tf import progress
from bert_tf.errors import TrainingPreempted
from bert_tf.training import distribution
from bert_tf.training.config import TrainingConfig, check_microbatches
from bert_tf.training.data_position import ITERATOR_ITEM, TrainingInput
from bert_tf.training.evaluation import Evaluator, MetricsFunctionEvaluator
from bert_tf.training.optimizers import create_optimizer
from bert_tf.training.precision import DynamicLossScale, needs_loss_scaling
from bert_tf.training.preemption import PreemptionWatcher
from bert_tf.training.summaries import format_metrics, write_scalars

# Checkpoints are `ckpt-<step>`, as in a model directory (`bert_tf.checkpoints`), which reads them.
CHECKPOINT_PREFIX = "ckpt"
SUMMARIES_DIR = "summaries"
EVAL_RESULTS_NAME = "eval_results.json"
WORKERS_DIR = "workers"
_RESERVED_ITEMS = ("optimizer", "step", "rng", ITERATOR_ITEM, "loss_scale")


@dataclasses.dataclass
class TrainingResult:
    model: keras.Model
    step: int
    train_metrics: dict  # means over the last inner loop; empty if no step ran
    eval_metrics: dict | None  # the last evaluation's metrics, None without eval data
    checkpoint: str | None  # the latest checkpoint of model_dir


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; nothing was saved after it."""


def default_forward(model: keras.Model, batch, training: bool):
    """Calls `model` on a dict batch (or on `batch[0]` for `(features, labels)`), with only its input keys."""
    features = batch[0] if isinstance(batch, tuple) else batch
    if isinstance(features, Mapping) and isinstance(model.input, Mapping):
        features = {name: features[name] for name in model.input}
    return model(features, training=training)


def model_checkpoint_items(model) -> dict:
    """The default `checkpoint_items_fn`: the model names its own (Model Garden's `checkpoint_items`)."""
    return model.checkpoint_items


@dataclasses.dataclass(frozen=True)
class _TrainingSpec:
    """What one `train` call trains: the model, its loss and data, and the caller's hooks (see `train`)."""

    model_fn: Callable[[], keras.Model]
    loss_fn: Callable
    train_dataset_fn: Callable
    eval_dataset_fn: Callable | None
    eval_fn: Callable | None
    checkpoint_items_fn: Callable
    forward_fn: Callable
    init_fn: Callable | None
    loop_callback: Callable | None
    jit_compile: bool


def train(
    strategy: tf.distribute.Strategy,
    model_fn: Callable[[], keras.Model],
    loss_fn: Callable,
    train_dataset_fn: Callable,
    model_dir: str,
    config: TrainingConfig,
    *,
    eval_dataset_fn: Callable | None = None,
    eval_fn: Callable | None = None,
    checkpoint_items_fn: Callable = model_checkpoint_items,
    forward_fn: Callable = default_forward,
    init_fn: Callable | None = None,
    loop_callback: Callable | None = None,
    jit_compile: bool = False,
    preemption: PreemptionWatcher | None = None,
) -> TrainingResult:
    """Trains (or resumes training) in `model_dir` until `config.num_train_steps`.

    Args:
      strategy: a `tf.distribute.Strategy` (`distribution.get_strategy`).
      model_fn: `() -> keras.Model`, called inside `strategy.scope()`.
      loss_fn: `(batch, outputs) -> dict` of float32 scalars: `loss` (minimised) and any metrics, each a mean
        over the replica's batch; the loop averages them over replicas and steps.
      train_dataset_fn: `(input_context) -> tf.data.Dataset`: endless, per-replica batches of a fixed size,
        sharded by `input_context.input_pipeline_id`; deterministic given its seed for exact resumption.
      model_dir: receives `ckpt-<step>` checkpoints, `summaries/{train,eval}` and `eval_results.json`.
      config: the schedule, in steps (`TrainingConfig.in_steps`).
      eval_dataset_fn: per-replica eval batches, read to the end (or `config.max_eval_steps`) at each evaluation.
      eval_fn: `(model) -> dict`, the caller's own evaluation instead of `eval_dataset_fn`, every
        `config.eval_every_steps` steps before the last.
      checkpoint_items_fn: `(model) -> dict` of the trackables holding its weights (default: the model's
        `checkpoint_items`); the loop adds `optimizer`, `step`, `rng`, `train_iterator` and `loss_scale`.
      forward_fn: `(model, batch, training) -> outputs`; default: the model on the batch's input keys.
        `loss_fn` and `forward_fn` are traced without AutoGraph: use `keras.ops`/`tf.cond`, not Python `if`.
      init_fn: `(model)`, called once when `model_dir` holds no checkpoint (not on resume).
      loop_callback: `(step, metrics)` after every host call (after its checkpoint and evaluation).
      jit_compile: XLA-compile the step (and the evaluation step).
      preemption: a `PreemptionWatcher`: a SIGTERM stops after the step in progress, saves a checkpoint and
        raises `bert_tf.errors.TrainingPreempted`.

    Raises:
      NonFiniteLossError: the loss became NaN or infinite (nothing saved after it).
    """
    if config.num_train_steps is None:
        raise ValueError("The loop takes a TrainingConfig in steps: call config.in_steps(num_examples, batch_size).")
    if eval_dataset_fn is not None and eval_fn is not None:
        raise ValueError("Give eval_dataset_fn or eval_fn, not both.")
    spec = _TrainingSpec(
        model_fn=model_fn,
        loss_fn=loss_fn,
        train_dataset_fn=train_dataset_fn,
        eval_dataset_fn=eval_dataset_fn,
        eval_fn=eval_fn,
        checkpoint_items_fn=checkpoint_items_fn,
        forward_fn=forward_fn,
        init_fn=init_fn,
        loop_callback=loop_callback,
        jit_compile=jit_compile,
    )
    with preemption if preemption is not None else contextlib.nullcontext():
        return _Trainer(strategy, spec, model_dir, config, preemption).run()


class _RandomState(tf.Module):
    """The model's dropout seed states (Keras SeedGenerators are not tracked by tf.train.Checkpoint)."""

    def __init__(self, model):
        super().__init__(name="rng")
        self.seed_states = [
            v for v in model.variables if isinstance(v, keras.Variable) and v.path.endswith("seed_generator_state")
        ]


class _Trainer:
    """One run of `train`: the state it checkpoints, the train step and the loop.

    The training data and its saved position are `TrainingInput`'s; evaluation is `Evaluator`'s.
    """

    def __init__(self, strategy, spec: _TrainingSpec, model_dir: str, config: TrainingConfig, preemption):
        self.strategy = strategy
        self.spec = spec
        self.model_dir = model_dir
        self.config = config
        self.preemption = preemption if preemption is not None and preemption.active else None

        self.data = TrainingInput(strategy, spec.train_dataset_fn)
        self.is_chief = distribution.is_chief(strategy)
        self.worker_index = self.data.worker_index
        self.num_replicas = self.data.num_replicas
        self.use_tpu = self.data.use_tpu
        # One XLA computation for the whole step where no mirrored variable is updated inside it.
        self.fused_step = self.use_tpu or (spec.jit_compile and isinstance(strategy, tf.distribute.OneDeviceStrategy))

        with strategy.scope():
            self.model = spec.model_fn()
            self.variables = list(self.model.trainable_variables)
            if not self.variables:
                raise ValueError("The model has no trainable variables.")
            self.optimizer = create_optimizer(
                self.variables,
                config.learning_rate,
                config.num_train_steps,
                config.num_warmup_steps,
                weight_decay_rate=config.weight_decay_rate,
                clip_norm=config.clip_norm,
                epsilon=config.adam_epsilon,
                bias_correction=config.adam_bias_correction,
                optimizer=config.optimizer,
            )
            self.step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="step", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA
            )
            self.loss_scale = DynamicLossScale() if needs_loss_scaling(self.model) else None
        self.rng = _RandomState(self.model)

        items = dict(spec.checkpoint_items_fn(self.model))
        clashes = sorted(set(items) & set(_RESERVED_ITEMS))
        if clashes:
            raise ValueError(f"checkpoint_items_fn returned names the loop reserves: {clashes}.")
        self.state_items = dict(items, optimizer=self.optimizer, step=self.step, rng=self.rng)
        if self.loss_scale is not None:
            self.state_items["loss_scale"] = self.loss_scale

    # --- checkpoints ------------------------------------------------------------

    def _checkpoint_dir(self):
        if self.is_chief:
            return self.model_dir
        return os.path.join(self.model_dir, WORKERS_DIR, f"worker-{self.worker_index}")

    def _restore(self):
        """Restores the latest checkpoint; returns (step, path of this worker's iterator state or None)."""
        latest = tf.train.latest_checkpoint(self.model_dir)
        if latest is None:
            if self.spec.init_fn is not None:
                self.spec.init_fn(self.model)
            return 0, None
        try:
            status = tf.train.Checkpoint(**self.state_items).read(latest)
            status.assert_existing_objects_matched()
        except (AssertionError, ValueError) as e:
            raise ValueError(
                f"Cannot resume from {latest}: it does not match this model and optimizer "
                f"({e}). Use a new output directory, or the same configuration."
            ) from None
        status.expect_partial()
        step = int(self.step.numpy())
        logging.info("Resumed from %s (step %d).", latest, step)
        if self.is_chief:
            own = latest
        else:
            own = os.path.join(self._checkpoint_dir(), f"{CHECKPOINT_PREFIX}-{step}")
            if not tf.io.gfile.exists(own + ".index"):
                own = None
        return step, self.data.saved_position(own, step)

    def _checkpoint_manager(self, iterator):
        return tf.train.CheckpointManager(
            tf.train.Checkpoint(**self.state_items, **self.data.checkpoint_items(iterator)),
            self._checkpoint_dir(),
            max_to_keep=self.config.keep_checkpoint_max,
            checkpoint_name=CHECKPOINT_PREFIX,
        )

    def _save(self, manager, step):
        path = manager.save(checkpoint_number=step)
        logging.info("Saved checkpoint %s.", path)

    # --- steps ------------------------------------------------------------------

    def _gradients(self, batch):
        """This replica's gradients (of the loss divided by the replicas) and metrics for one batch."""
        k = self.config.num_microbatches
        if k == 1:
            return self._piece_gradients(batch, 1.0 / self.num_replicas)
        # [batch, ...] -> [k, batch / k, ...]; checked to divide by `check_microbatches`.
        pieces = tf.nest.map_structure(lambda t: tf.reshape(t, tf.concat([[k, -1], tf.shape(t)[1:]], 0)), batch)
        weight = 1.0 / (self.num_replicas * k)
        metric_names = [name for name in self.metric_names if name != "gradient_norm"]

        def accumulate(i, grad_sums, metric_sums):
            piece = tf.nest.map_structure(lambda t: t[i], pieces)
            grads, metrics = self._piece_gradients(piece, weight, densify=False)
            grad_sums = [_add_gradient(total, grad) for total, grad in zip(grad_sums, grads)]
            metric_sums = {name: metric_sums[name] + metrics[name] for name in metric_names}
            return i + 1, grad_sums, metric_sums

        _, grads, metric_sums = tf.while_loop(
            lambda i, *_: i < k,
            accumulate,
            (
                tf.constant(0),
                [tf.zeros(v.shape, v.dtype) for v in self.variables],
                {name: tf.constant(0.0) for name in metric_names},
            ),
            # One piece at a time: the default 10 would run the pieces' forward passes side by side.
            parallel_iterations=1,
        )
        return grads, {name: total / k for name, total in metric_sums.items()}

    def _piece_gradients(self, batch, weight, densify=True):
        """Gradients of `weight` times the loss on `batch`, and the loss function's metrics (float32).

        `densify=False` keeps sparse gradients (an embedding lookup's `tf.IndexedSlices`) and None as they are."""
        with tf.GradientTape() as tape:
            outputs = self.spec.forward_fn(self.model, batch, True)
            metrics = {name: tf.cast(value, tf.float32) for name, value in self.spec.loss_fn(batch, outputs).items()}
            loss = metrics["loss"] * weight
            if self.loss_scale is not None:
                loss = self.loss_scale.scale_loss(loss)
        grads = tape.gradient(loss, self.variables)
        if densify:
            grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for g, v in zip(grads, self.variables)]
        return grads, metrics

    def _apply(self, grads):
        if self.num_replicas > 1:
            grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
        finite = None
        if self.loss_scale is not None:
            grads, finite = self.loss_scale.unscale(grads)
        grad_norm = self.optimizer.apply_gradients(grads, apply_update=finite)
        if self.loss_scale is not None:
            self.loss_scale.update(finite)
        return grad_norm

    def _build_functions(self):
        jit = self.spec.jit_compile and not self.use_tpu

        def full_step(batch):
            grads, metrics = self._gradients(batch)
            metrics["gradient_norm"] = self._apply(grads)
            return metrics

        if self.fused_step:
            compiled_step = tf.function(full_step, jit_compile=True, autograph=False) if jit else full_step
        else:
            gradients = tf.function(self._gradients, jit_compile=True, autograph=False) if jit else self._gradients

            def compiled_step(batch):
                grads, metrics = gradients(batch)
                metrics["gradient_norm"] = self._apply(grads)
                return metrics

        # AutoGraph is only needed for the outer loop; converting Keras' call stack only adds tracing time.
        @tf.autograph.experimental.do_not_convert
        def replica_step(batch):
            metrics = compiled_step(batch)
            examples = tf.shape(tf.nest.flatten(batch)[0], out_type=tf.int64)[0]
            return metrics, examples

        strategy = self.strategy
        names = self.metric_names
        preemption = self.preemption
        # Not where the loop runs on TPU, nor across workers (who must all run the same steps).
        timed = not self.use_tpu and distribution.num_workers(strategy) == 1

        @tf.function
        def train_loop(iterator, num_steps, seconds):
            # Ends after `seconds` (at a step's end) as well as after `num_steps`: the host logs between calls.
            start = _seconds_now() if timed else None
            sums = {name: tf.constant(0.0) for name in names}
            examples = tf.constant(0, tf.int64)
            steps_run = tf.constant(0, tf.int64)
            bad_step = tf.constant(-1, tf.int64)
            bad_loss = tf.constant(0.0)
            stop = tf.constant(False)
            for _ in tf.range(num_steps):
                metrics, batch_examples = strategy.run(replica_step, args=(self.data.next_batch(iterator),))
                means = {name: strategy.reduce(tf.distribute.ReduceOp.MEAN, metrics[name], axis=None) for name in names}
                self.step.assign_add(1)
                steps_run += 1
                examples += strategy.reduce(tf.distribute.ReduceOp.SUM, batch_examples, axis=None)
                sums = {name: sums[name] + means[name] for name in names}
                if not tf.math.is_finite(means["loss"]):
                    bad_step = self.step.read_value()
                    bad_loss = means["loss"]
                    break
                if preemption is not None:
                    stop = preemption.stop_requested(strategy, self.data.num_workers, self.use_tpu)
                    if stop:
                        break
                if timed and _seconds_now() - start >= seconds:
                    break
            return sums, steps_run, examples, bad_step, bad_loss, stop

        self.train_loop = train_loop

    def _probe_metric_names(self, element_spec):
        """The loss function's output names, from a trace of the model (nothing runs)."""
        if isinstance(element_spec, tf.TensorSpec) or not tf.nest.flatten(element_spec):
            raise TypeError(f"Training batches must be a dict or tuple of tensors, got {element_spec}.")

        def probe(batch):
            return self.spec.loss_fn(batch, self.spec.forward_fn(self.model, batch, False))

        with self.strategy.scope():
            outputs = tf.function(probe, autograph=False).get_concrete_function(element_spec).structured_outputs
        if not isinstance(outputs, Mapping) or "loss" not in outputs:
            raise ValueError(f"loss_fn must return a dict with a 'loss' entry, got {outputs}.")
        return sorted(outputs) + ["gradient_norm"]

    def _check_microbatches(self, element_spec):
        """Checks a static batch size against `num_microbatches` (the jobs check theirs with `check_microbatches`)."""
        sizes = {tensor.shape[0] for tensor in tf.nest.flatten(element_spec)} - {None}
        for size in sizes:
            check_microbatches(self.config.num_microbatches, size)

    # --- the run -------------------------------------------------------------------

    def _make_evaluator(self):
        if self.spec.eval_fn is not None:
            return MetricsFunctionEvaluator(self.model, self.spec.eval_fn, is_chief=self.is_chief)
        if self.spec.eval_dataset_fn is None:
            return None
        return Evaluator(
            self.strategy,
            self.model,
            self.spec.forward_fn,
            self.spec.loss_fn,
            self.spec.eval_dataset_fn,
            [name for name in self.metric_names if name != "gradient_norm"],
            jit_compile=self.spec.jit_compile and not self.use_tpu,
            max_steps=self.config.max_eval_steps,
            results_path=os.path.join(self.model_dir, EVAL_RESULTS_NAME),
            is_chief=self.is_chief,
        )

    def _open_summaries(self, evaluator):
        """The train summary writer (a no-op one except on the chief); opens the evaluator's too."""
        if not self.is_chief:
            return tf.summary.create_noop_writer()
        summaries = os.path.join(self.model_dir, SUMMARIES_DIR)
        train_writer = tf.summary.create_file_writer(os.path.join(summaries, "train"))
        if evaluator is not None:
            evaluator.open_summaries(os.path.join(summaries, "eval"))
        return train_writer

    def run(self) -> TrainingResult:
        if self.is_chief:
            tf.io.gfile.makedirs(self.model_dir)
        step, iterator_checkpoint = self._restore()
        iterator, element_spec = self.data.make_iterator(step, iterator_checkpoint)
        self.metric_names = self._probe_metric_names(element_spec)
        self._check_microbatches(element_spec)
        self._build_functions()
        evaluator = self._make_evaluator()
        manager = self._checkpoint_manager(iterator)
        train_writer = self._open_summaries(evaluator)
        try:
            step, train_metrics, eval_metrics = self._train(step, iterator, manager, train_writer, evaluator)
        except KeyboardInterrupt:
            self._save_at_interrupt(manager)
            raise
        return TrainingResult(
            model=self.model,
            step=step,
            train_metrics=train_metrics,
            eval_metrics=eval_metrics,
            checkpoint=tf.train.latest_checkpoint(self.model_dir),
        )

    def _train(self, step, iterator, manager, train_writer, evaluator):
        """Trains from `step` to the end; returns (step, last train metrics, last eval metrics)."""
        config = self.config
        train_metrics, eval_metrics = {}, None
        last_saved = step  # the checkpoint just restored, or nothing trained yet
        while step < config.num_train_steps:
            num_steps = min(
                config.steps_per_loop,
                config.num_train_steps - step,
                _until_multiple(step, config.save_checkpoints_steps),
            )
            if evaluator is not None and config.eval_every_steps:
                num_steps = min(num_steps, _until_multiple(step, config.eval_every_steps))
            start = time.time()
            sums, steps_run, examples, bad_step, bad_loss, stop = self.train_loop(
                iterator, tf.constant(num_steps, tf.int64), tf.constant(progress.INTERVAL_SECONDS, tf.float64)
            )
            elapsed = time.time() - start
            if int(bad_step) >= 0:
                raise self._non_finite_loss(bad_step, bad_loss, manager)
            steps_run = int(steps_run)
            step += steps_run
            train_metrics = self._train_metrics(sums, steps_run, examples, elapsed)
            self._log_progress(step, train_metrics, elapsed / steps_run)
            write_scalars(train_writer, step, train_metrics)
            if bool(stop):
                self._save(manager, step)
                # The model's checkpoint (the chief's), which every worker names.
                raise TrainingPreempted(step, os.path.join(self.model_dir, f"{CHECKPOINT_PREFIX}-{step}"))
            if step % config.save_checkpoints_steps == 0 or step == config.num_train_steps:
                self._save(manager, step)
                last_saved = step
            if (
                evaluator is not None
                and config.eval_every_steps
                and step % config.eval_every_steps == 0
                and step < config.num_train_steps
            ):
                eval_metrics = evaluator.evaluate_and_record(step)
            if self.spec.loop_callback is not None:
                self.spec.loop_callback(step, dict(train_metrics))

        if last_saved != step:
            self._save(manager, step)
        if evaluator is not None and evaluator.evaluates_at_end:
            eval_metrics = evaluator.evaluate_and_record(step)
        return step, train_metrics, eval_metrics

    def _save_at_interrupt(self, manager):
        """Saves the steps run since the last checkpoint when the user stops the run (Ctrl-C), to resume from.

        The interrupt reaches Python between host calls of the loop, or in a save or an evaluation, when the
        weights, optimizer, data position and step agree. A multi-worker save needs every worker: none there.
        """
        step = int(self.step.numpy())
        latest = manager.latest_checkpoint
        if step == 0 or (latest and latest.endswith(f"-{step}")) or distribution.num_workers(self.strategy) > 1:
            return
        logging.warning("Interrupted at step %d: saving a checkpoint to resume from.", step)
        self._save(manager, step)

    def _non_finite_loss(self, bad_step, bad_loss, manager) -> NonFiniteLossError:
        return NonFiniteLossError(
            f"Non-finite training loss ({float(bad_loss)}) at step {int(bad_step)}; training stopped "
            f"without saving. The last good checkpoint is "
            f"{manager.latest_checkpoint or '(none: no checkpoint was written yet)'}. "
            "Try a lower learning rate, more warm-up, or float32."
        )

    def _train_metrics(self, sums, steps_run, examples, elapsed) -> dict:
        """One inner loop's mean metrics, learning rate, throughput and (float16) loss scale."""
        metrics = {name: float(value) / steps_run for name, value in sums.items()}
        metrics["learning_rate"] = float(self.optimizer.learning_rate_at(tf.maximum(self.optimizer.iterations - 1, 0)))
        metrics["examples_per_second"] = float(examples) / max(elapsed, 1e-9)
        if self.loss_scale is not None:
            metrics["loss_scale"] = float(self.loss_scale.scale.numpy())
        return metrics

    def _log_progress(self, step, metrics, seconds_per_step):
        eta = progress.format_duration((self.config.num_train_steps - step) * seconds_per_step)
        logging.info("step %d/%d | %s | ETA %s", step, self.config.num_train_steps, format_metrics(metrics), eta)


def _add_gradient(total, grad):
    """`total + grad` for a micro-batch's gradient, which may be None or a `tf.IndexedSlices`.

    A sparse gradient (the word embeddings': a few hundred rows of 30k) is added row by row into the running
    sum instead of first being made a dense table-sized tensor of its own."""
    if grad is None:
        return total
    if isinstance(grad, tf.IndexedSlices):
        return tf.tensor_scatter_nd_add(total, tf.expand_dims(grad.indices, -1), grad.values)
    return total + grad


def _seconds_now():
    """The host's clock in seconds, inside a tf.function (`tf.timestamp` is refused under op determinism)."""
    return tf.py_function(time.monotonic, [], tf.float64)


def _until_multiple(step: int, interval: int) -> int:
    return interval - step % interval
