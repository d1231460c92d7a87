"""The frontier's timing: every exported encoder over the same batches, interleaved in one process.

Each round runs every SavedModel (in a rotated order) over the same length-bucketed batches; a model's figure is
its median round, so a slow moment of a shared machine costs every model alike instead of one.
"""

from __future__ import annotations

import os
import statistics
import time

from bert_tf import cpu_features


def speed_batches(task_object, features, num_examples, batch_size) -> list:
    """Length-bucketed batches (encoder inputs, numpy) of the first `num_examples` evaluation features."""
    from bert_tf.models import ENCODER_INPUT_NAMES

    subset = task_object.first_features(features, num_examples)
    batches = []
    for batch in task_object.dataset(subset, batch_size, training=False):
        keep = batch["feature_index"].numpy() >= 0  # the rows that fill up the last batch are not timed
        batches.append({k: batch[k].numpy()[keep] for k in ENCODER_INPUT_NAMES})
    return batches


def interleaved_speeds(exports: dict, batches: list, rounds: int) -> dict:
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


def machine() -> dict:
    """The CPU, its instruction-set level, the CPU count, the load average and the time of the measurement."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu": cpu_features.cpu_name(),
        "instruction_set": cpu_features.instruction_set_level(),
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in load] if load else None,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
