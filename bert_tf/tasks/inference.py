"""Runs a task model over a dataset under a distribution strategy and gathers the outputs.

The forward pass is one `strategy.run` per batch of a (optionally XLA
compiled) function; each replica's outputs come back to the host as numpy
and are put in feature order with the `feature_index` every task dataset
carries, so uneven last batches and replica interleaving do not matter.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert_tf import progress
from bert_tf.data import packed_rows
from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES, EXAMPLE_IDS_KEY
from bert_tf.tasks.base import FEATURE_INDEX_KEY


def iterate_outputs(
    model,
    dataset: tf.data.Dataset,
    strategy: tf.distribute.Strategy | None = None,
    jit_compile: bool = False,
    label: str = "Running the model",
):
    """Yields, per batch of `dataset`, a dict of numpy outputs (plus `feature_index`), rows in feature order.

    `model` is called as `model(inputs, training=False)` on the encoder inputs
    and returns a tensor (named "logits" here) or a dict of tensors. Batches of packed rows
    (`bert_tf.data.packed_rows`: `input_example_ids`, `feature_index` [rows, slots]) give outputs per slot,
    which come back one row per example, as unpacked batches do. A pass longer than
    `bert_tf.progress.INTERVAL_SECONDS` logs `label`, the batches done and an ETA by the clock.
    """
    strategy = strategy or tf.distribute.get_strategy()
    input_names = _input_names(model)

    @tf.function(jit_compile=jit_compile, reduce_retracing=True)
    def forward(inputs):
        outputs = model(inputs, training=False)
        if not isinstance(outputs, dict):
            outputs = {"logits": outputs}
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    # Length-bucketed batches come in a few sequence lengths: one graph for all of them, not a trace each.
    @tf.function(reduce_retracing=True)
    def step(features):
        def replica_step(batch):
            outputs = forward({k: batch[k] for k in input_names if k in batch})
            outputs[FEATURE_INDEX_KEY] = batch[FEATURE_INDEX_KEY]
            if EXAMPLE_IDS_KEY in batch:
                outputs[EXAMPLE_IDS_KEY] = batch[EXAMPLE_IDS_KEY]
            return outputs

        return strategy.run(replica_step, args=(features,))

    distributed = strategy.experimental_distribute_dataset(dataset)
    # One trace for every batch: the dataset's spec leaves the bucketed sequence length unknown.
    step.get_concrete_function(distributed.element_spec)
    total = int(dataset.cardinality())
    tracker = progress.Progress(label, total=total if total >= 0 else None, unit="batches")
    for features in distributed:
        outputs = step(features)
        batch = {
            name: np.concatenate([np.asarray(local) for local in strategy.experimental_local_results(value)])
            for name, value in outputs.items()
        }
        example_ids = batch.pop(EXAMPLE_IDS_KEY, None)
        if example_ids is not None and batch[FEATURE_INDEX_KEY].ndim == 2:
            # Packed rows: [rows, slots or seq, ...] -> one row per example slot. (Packed document windows are
            # pooled in the model: one row per document already.)
            index = batch.pop(FEATURE_INDEX_KEY)
            batch = packed_rows.unpack_outputs(batch, example_ids.astype(np.int64), index.shape[1])
            batch[FEATURE_INDEX_KEY] = index.reshape(-1)
        indices = batch[FEATURE_INDEX_KEY]
        order = np.argsort(indices, kind="stable")
        order = order[indices[order] >= 0]  # drop the rows that pad the last batch
        yield {name: value[order] for name, value in batch.items()}
        tracker.advance()
    if tracker.reported:
        tracker.finish()


def _input_names(model) -> tuple:
    """The model's own input names when it has a dict of inputs (packed document windows add two to the
    encoder's); else the encoder's and `input_example_ids`."""
    try:
        model_input = model.input
    except (AttributeError, ValueError):  # not a functional model
        model_input = None
    return tuple(model_input) if isinstance(model_input, dict) else ENCODER_INPUT_NAMES + (EXAMPLE_IDS_KEY,)


def predict_outputs(
    model,
    dataset: tf.data.Dataset,
    strategy: tf.distribute.Strategy | None = None,
    jit_compile: bool = False,
    num_features: int | None = None,
    label: str = "Predicting",
) -> dict:
    """Model outputs for every element of `dataset`, as numpy arrays in feature order.

    Args:
      model: a task model (outputs a tensor, named "logits" here, or a dict).
      dataset: batches with the encoder inputs and `feature_index`.
      strategy: defaults to the current (possibly default) strategy.
      jit_compile: XLA-compile the forward step.
      num_features: if given, checks that every feature got an output.
      label: what the progress lines of a long pass say it does.

    Returns:
      dict output name -> array [num_features, ...].
    """
    collected = {}
    for batch in iterate_outputs(model, dataset, strategy, jit_compile, label=label):
        for name, value in batch.items():
            collected.setdefault(name, []).append(value)
    if not collected:
        raise ValueError("The prediction dataset is empty.")
    indices = np.concatenate(collected.pop(FEATURE_INDEX_KEY))
    order = np.argsort(indices, kind="stable")
    if num_features is not None and not np.array_equal(indices[order], np.arange(num_features)):
        raise RuntimeError(f"Got outputs for {len(np.unique(indices))} of {num_features} features.")
    return {name: _concatenate(parts)[order] for name, parts in collected.items()}


def _concatenate(parts: list) -> np.ndarray:
    """Concatenates batches; per-position outputs of length-bucketed batches are zero-padded to the longest."""
    if len({part.shape[1:] for part in parts}) > 1 and all(part.ndim >= 2 for part in parts):
        longest = max(part.shape[1] for part in parts)
        parts = [np.pad(part, [(0, 0), (0, longest - part.shape[1])] + [(0, 0)] * (part.ndim - 2)) for part in parts]
    return np.concatenate(parts)
