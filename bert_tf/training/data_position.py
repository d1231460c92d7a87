"""The training loop's input: one worker's training iterator, its batches per replica, and its saved position.

See "Resuming, and the position in the data" in `bert_tf.training.loop`. On
CPU/GPU each worker reads its own plain tf.data iterator (distributed
iterators cannot be checkpointed) and saves it under `ITERATOR_ITEM` in its
checkpoint; on TPU the strategy's distributed dataset is used and a resumed
run fast-forwards. A saved position that does not fit the pipeline any more
falls back to fast-forwarding too.
"""

from __future__ import annotations

import tensorflow as tf
from absl import logging

from bert_tf.training import distribution

# The checkpoint item under which a worker's training iterator is saved.
ITERATOR_ITEM = "train_iterator"


class TrainingInput:
    """One worker's training data under `strategy`, from `dataset_fn(input_context)` (see `loop.train`)."""

    def __init__(self, strategy: tf.distribute.Strategy, dataset_fn):
        self.strategy = strategy
        self.dataset_fn = dataset_fn
        self.worker_index = distribution.worker_index(strategy)
        self.num_workers = distribution.num_workers(strategy)
        self.num_replicas = strategy.num_replicas_in_sync
        self.local_replicas = max(1, self.num_replicas // self.num_workers)
        self.use_tpu = distribution.is_tpu_strategy(strategy)

    def input_context(self) -> tf.distribute.InputContext:
        return tf.distribute.InputContext(
            num_input_pipelines=self.num_workers,
            input_pipeline_id=self.worker_index,
            num_replicas_in_sync=self.num_replicas,
        )

    def make_iterator(self, resume_step: int, iterator_checkpoint: str | None):
        """Returns (iterator, element spec) at `resume_step`: restored from `iterator_checkpoint`, or fast-forwarded."""
        element_spec = {}
        if iterator_checkpoint is None:
            return self._make(resume_step, element_spec), element_spec["spec"]
        iterator = self._make(0, element_spec)
        try:
            status = tf.train.Checkpoint(**{ITERATOR_ITEM: iterator}).read(iterator_checkpoint)
            status.assert_existing_objects_matched()
        except (tf.errors.OpError, AssertionError, ValueError) as e:
            logging.warning(
                "Could not restore the training data position from %s (%s): the input pipeline "
                "differs from the one that saved it. Fast-forwarding instead.",
                iterator_checkpoint,
                str(e).splitlines()[0],
            )
            return self._make(resume_step, element_spec), element_spec["spec"]
        status.expect_partial()
        logging.info("Restored the training data position from %s.", iterator_checkpoint)
        return iterator, element_spec["spec"]

    def _make(self, skip_steps: int, element_spec: dict):
        """A new iterator that skips the batches of `skip_steps` steps; stores the element spec in `element_spec`."""

        def dataset_fn(input_context):
            dataset = self.dataset_fn(input_context)
            if not isinstance(dataset, tf.data.Dataset):
                raise TypeError(f"train_dataset_fn must return a tf.data.Dataset, got {type(dataset).__name__}.")
            # UNKNOWN (-2) is what tf.data says of an endless flat_map (the length-bucketed pipelines): no warning.
            if dataset.cardinality() >= 0:
                logging.warning(
                    "The training dataset is finite (cardinality %d); training stops with an "
                    "OutOfRangeError when it runs out. Repeat it.",
                    int(dataset.cardinality()),
                )
            element_spec["spec"] = dataset.element_spec
            # Each step takes one per-replica batch for each replica this pipeline feeds.
            skip = skip_steps * (input_context.num_replicas_in_sync // input_context.num_input_pipelines)
            if skip:
                logging.info("Fast-forwarding the training data by %d per-replica batches (step %d).", skip, skip_steps)
            # Always a skip op, even of 0: a saved iterator state only restores into the same pipeline.
            return dataset.skip(skip)

        if self.use_tpu:
            return iter(self.strategy.distribute_datasets_from_function(dataset_fn))
        return iter(dataset_fn(self.input_context()))

    def next_batch(self, iterator):
        """The next step's batch: per replica, from this worker's iterator (inside the training `tf.function`)."""
        if self.use_tpu:
            return next(iterator)
        batches = [next(iterator) for _ in range(self.local_replicas)]
        if self.num_replicas == 1:
            return batches[0]
        local = self.local_replicas
        return self.strategy.experimental_distribute_values_from_function(
            lambda ctx: batches[ctx.replica_id_in_sync_group % local]
        )

    def checkpoint_items(self, iterator) -> dict:
        """What a checkpoint saves of the data position: the iterator, except on TPU (where it cannot be saved)."""
        return {} if self.use_tpu else {ITERATOR_ITEM: iterator}

    def saved_position(self, checkpoint: str | None, step: int) -> str | None:
        """`checkpoint` (this worker's, at `step`) if it holds an iterator state, else None (fast-forward)."""
        prefix = f"{ITERATOR_ITEM}/"
        if checkpoint is not None and not any(
            name.startswith(prefix) for name, _ in tf.train.list_variables(checkpoint)
        ):
            checkpoint = None
        if checkpoint is None and step > 0 and not self.use_tpu:
            logging.warning("No saved data position for this worker at step %d; fast-forwarding instead.", step)
        return checkpoint
