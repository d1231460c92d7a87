"""Choosing a `tf.distribute.Strategy`, and where this process sits in the cluster.

Strategies (names as Model Garden's `--distribution_strategy`):

* `one_device`: one GPU (the first, if any) or the CPU.
* `mirrored`: synchronous data parallelism over this machine's GPUs; without
  GPUs, over its logical CPU devices (one, unless the process configured more
  with `tf.config.set_logical_device_configuration`, as the tests do).
* `multi_worker_mirrored`: synchronous data parallelism over several
  processes/machines described by the `TF_CONFIG` environment variable, each
  using all its local GPUs (restrict them with CUDA_VISIBLE_DEVICES). Without
  TF_CONFIG it runs as a single local worker.
* `tpu`: a Cloud TPU, named by `tpu` (a TPU name, `grpc://host:port`, or
  `local` on a TPU VM).
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


class TPUNotFoundError(RuntimeError):
    """The TPU address resolved, but no TPU system could be initialised there."""


def get_strategy(
    name: str = "one_device", *, num_gpus: int | None = None, tpu: str | None = None
) -> tf.distribute.Strategy:
    """Creates the named strategy.

    Args:
      name: one of `STRATEGIES`.
      num_gpus: how many GPUs to use. None: all visible GPUs (one for
        `one_device`); 0: none, run on CPU. For `multi_worker_mirrored` every
        local GPU is used, so it must be None or the number visible.
      tpu: the TPU address, required for (and only used by) `tpu`.

    Raises:
      ValueError: an unknown name, a `num_gpus` this machine cannot satisfy,
        a malformed TF_CONFIG, or a missing/invalid TPU address.
      TPUNotFoundError: no TPU could be initialised at `tpu`.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown distribution strategy {name!r}; expected one of {', '.join(STRATEGIES)}.")
    if num_gpus is not None and (isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 0):
        raise ValueError(f"num_gpus must be a non-negative integer or None, got {num_gpus!r}.")
    if name != "tpu" and tpu:
        raise ValueError(f"A TPU address ({tpu!r}) was given but the distribution strategy is {name!r}, not 'tpu'.")

    if name == "tpu":
        return _tpu_strategy(tpu)
    if name == "multi_worker_mirrored":
        # Physical, not logical, devices: listing logical ones starts the TF runtime, after which
        # collective ops can no longer be configured.
        gpus = tf.config.list_physical_devices("GPU")
        if num_gpus is not None and num_gpus != len(gpus):
            raise ValueError(
                f"multi_worker_mirrored uses every local GPU ({len(gpus)} visible); num_gpus={num_gpus} "
                "cannot be honoured. Restrict the GPUs with CUDA_VISIBLE_DEVICES instead."
            )
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()

    devices = _local_devices(name, num_gpus, tf.config.list_logical_devices("GPU"))
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0])
    return tf.distribute.MirroredStrategy(devices)


def _local_devices(name: str, num_gpus: int | None, gpus: list) -> list[str]:
    if num_gpus is None:
        num_gpus = len(gpus)
    if num_gpus > len(gpus):
        raise ValueError(f"num_gpus={num_gpus} but this machine has {len(gpus)} visible GPU(s).")
    if name == "one_device":
        if num_gpus > 1:
            raise ValueError(f"The one_device strategy uses one device; got num_gpus={num_gpus}.")
        return [gpus[0].name] if num_gpus else ["/cpu:0"]
    if num_gpus:
        return [gpu.name for gpu in gpus[:num_gpus]]
    return [cpu.name for cpu in tf.config.list_logical_devices("CPU")]


def _check_tf_config() -> None:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"The TF_CONFIG environment variable is not valid JSON: {e}.") from None
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ValueError(
            "TF_CONFIG must hold a 'cluster' dict and a 'task' dict, "
            f"e.g. {{'cluster': {{'worker': ['host:port', ...]}}, 'task': {{'type': 'worker', "
            f"'index': 0}}}}; got {raw!r}."
        )
    task_type, index = task.get("type"), task.get("index")
    if task_type not in cluster or not isinstance(index, int) or not 0 <= index < len(cluster[task_type]):
        raise ValueError(f"TF_CONFIG task {task!r} is not in its cluster {cluster!r}.")


def _tpu_strategy(tpu: str | None) -> tf.distribute.TPUStrategy:
    if not tpu:
        raise ValueError("The tpu strategy needs a TPU address: a TPU name, grpc://host:port, or 'local'.")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    except ValueError as e:
        raise ValueError(f"Invalid TPU address {tpu!r}: {e}") from None
    if tpu != "local":
        tf.config.experimental_connect_to_cluster(resolver)
    try:
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (tf.errors.NotFoundError, tf.errors.UnavailableError, tf.errors.InvalidArgumentError) as e:
        raise TPUNotFoundError(f"No TPU system could be initialised at {tpu!r}: {e.message}") from e
    return tf.distribute.TPUStrategy(resolver)


def is_tpu_strategy(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def _cluster(strategy):
    """(cluster dict, task type, task id) for a multi-worker strategy, else None."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None
    resolver = strategy.cluster_resolver
    if resolver is None or not resolver.cluster_spec().as_dict():
        return None
    return resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """How many processes feed the strategy (1 unless multi-worker)."""
    cluster = _cluster(strategy)
    if cluster is None:
        return 1
    spec = cluster[0]
    return len(spec.get("chief", [])) + len(spec.get("worker", []))


def worker_index(strategy: tf.distribute.Strategy) -> int:
    """This process's input-pipeline index: the chief is 0, then the workers in order."""
    cluster = _cluster(strategy)
    if cluster is None:
        return 0
    spec, task_type, task_id = cluster
    if task_type == "chief":
        return 0
    if task_type == "worker":
        return task_id + len(spec.get("chief", []))
    raise ValueError(f"Task type {task_type!r} does not train (expected 'chief' or 'worker').")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints and summaries."""
    return worker_index(strategy) == 0
