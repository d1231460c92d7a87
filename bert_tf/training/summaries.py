"""What the training loop reports: metric log lines and TensorBoard scalars."""

from __future__ import annotations

import tensorflow as tf


def format_metrics(metrics: dict) -> str:
    parts = []
    for name, value in metrics.items():
        if name == "examples_per_second":
            parts.append(f"{value:.1f} examples/s")
        elif name == "learning_rate":
            parts.append(f"lr {value:.3e}")
        elif isinstance(value, int):
            parts.append(f"{name} {value}")
        else:
            parts.append(f"{name} {value:.4f}")
    return " | ".join(parts)


def write_scalars(writer, step: int, values: dict) -> None:
    """TensorBoard scalars via `tf.summary.write`: unlike `tf.summary.scalar`, it needs no tensorboard package."""
    metadata = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))
    with writer.as_default(step=step):
        for name, value in values.items():
            tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata)
    writer.flush()
