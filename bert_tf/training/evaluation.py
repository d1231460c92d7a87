"""The training loop's evaluation: the distributed eval step, the weighted metric means, and their records.

Each evaluation reads the eval data to the end (or `max_eval_steps` batches),
sums every metric weighted by its batch's examples over replicas and batches,
and divides by the examples read. The chief writes the results to TensorBoard
(`summaries/eval`) and to `eval_results.json`; every worker logs them.
"""

from __future__ import annotations

import warnings

import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.training.summaries import format_metrics, write_scalars


class _RecordedEvaluation:
    """Where evaluation metrics go: the log, TensorBoard (`open_summaries`) and, on the chief, a results JSON."""

    #: whether the loop evaluates once more after its last step.
    evaluates_at_end = True
    writer = None
    results_path: str | None = None
    is_chief = True

    def evaluate(self) -> dict:
        raise NotImplementedError

    def open_summaries(self, directory: str) -> None:
        """Writes the eval scalars to a TensorBoard log in `directory` from now on."""
        self.writer = tf.summary.create_file_writer(directory)

    def record(self, step: int, metrics: dict) -> None:
        """Logs `metrics`; on the chief, writes them as TensorBoard scalars and to the eval results JSON."""
        logging.info("eval at step %d: %s", step, format_metrics(metrics))
        if not self.is_chief:
            return
        scalars = {k: v for k, v in metrics.items() if k != "num_examples" and isinstance(v, (int, float))}
        write_scalars(self.writer or tf.summary.create_noop_writer(), step, scalars)
        if self.results_path:
            # Sorted keys, and a non-finite metric written as NaN/Infinity (as json.dumps does by default).
            file_io.write_json(self.results_path, dict(metrics, step=step), sort_keys=True, allow_nan=True)

    def evaluate_and_record(self, step: int) -> dict:
        metrics = self.evaluate()
        self.record(step, metrics)
        return metrics


class MetricsFunctionEvaluator(_RecordedEvaluation):
    """The caller's evaluation along the way: `metrics_fn(model) -> dict` of numbers (see `loop.train`'s
    `eval_fn`), e.g. a fine-tuning task's metrics on its predictions. The loop does not call it after the last
    step: the caller evaluates the final model itself (and writes its own results)."""

    evaluates_at_end = False

    def __init__(self, model, metrics_fn, *, is_chief: bool):
        self.model = model
        self.metrics_fn = metrics_fn
        self.is_chief = is_chief

    def evaluate(self) -> dict:
        return {k: v for k, v in self.metrics_fn(self.model).items() if isinstance(v, (int, float))}


class Evaluator(_RecordedEvaluation):
    """Evaluates `model` on `dataset_fn`'s data with `loss_fn`'s metrics `metric_names` (see `loop.train`)."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        model,
        forward_fn,
        loss_fn,
        dataset_fn,
        metric_names: list,
        *,
        jit_compile: bool,
        max_steps: int | None,
        results_path: str,
        is_chief: bool,
    ):
        self.strategy = strategy
        self.model = model
        self.forward_fn = forward_fn
        self.loss_fn = loss_fn
        self.results_path = results_path
        self.is_chief = is_chief
        self._evaluate_all = self._build(dataset_fn, metric_names, jit_compile, max_steps)

    def _build(self, eval_dataset_fn, names, jit, max_steps):
        """The `tf.function` that runs one whole evaluation; returns (metric sums, examples)."""

        def forward_metrics(batch):
            outputs = self.forward_fn(self.model, batch, False)
            return {name: tf.cast(value, tf.float32) for name, value in self.loss_fn(batch, outputs).items()}

        forward = tf.function(forward_metrics, jit_compile=True, autograph=False) if jit else forward_metrics

        @tf.autograph.experimental.do_not_convert
        def replica_eval(batch):
            examples = tf.shape(tf.nest.flatten(batch)[0])[0]
            metrics = forward(batch)
            weight = tf.cast(examples, tf.float32)
            # A replica can get an empty final batch; its NaN means must not poison the sums.
            sums = {name: tf.where(examples > 0, value * weight, 0.0) for name, value in metrics.items()}
            return sums, weight

        strategy = self.strategy

        def dataset_fn(input_context):
            dataset = eval_dataset_fn(input_context)
            if max_steps is not None:
                # Each step takes one per-replica batch for each of this pipeline's replicas.
                per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
                dataset = dataset.take(max_steps * per_pipeline)
            elif dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
                raise ValueError("The evaluation dataset is infinite; set max_eval_steps.")
            return dataset

        eval_dataset = strategy.distribute_datasets_from_function(dataset_fn)

        @tf.function
        def evaluate_all():
            totals = {name: tf.constant(0.0) for name in names}
            weight = tf.constant(0.0)
            for batch in eval_dataset:
                sums, batch_weight = strategy.run(replica_eval, args=(batch,))
                totals = {
                    name: totals[name] + strategy.reduce(tf.distribute.ReduceOp.SUM, sums[name], axis=None)
                    for name in names
                }
                weight += strategy.reduce(tf.distribute.ReduceOp.SUM, batch_weight, axis=None)
            return totals, weight

        return evaluate_all

    def evaluate(self) -> dict:
        """Runs one evaluation; returns the metrics' means over the examples, and `num_examples`."""
        with warnings.catch_warnings():
            # Iterating a distributed dataset inside tf.function reads its options in graph mode; harmless.
            warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data options")
            totals, weight = self._evaluate_all()
        weight = float(weight)
        if not weight:
            raise ValueError("The evaluation dataset yielded no examples.")
        metrics = {name: float(value) / weight for name, value in totals.items()}
        metrics["num_examples"] = int(round(weight))
        return metrics
