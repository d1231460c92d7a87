"""Flags to config objects, shared by the training command lines.

    job_flags.define_runtime_flags(default_seed=12345)          # in the tool's define_flags()
    data = job_flags.config_from_flags(PretrainingDataConfig)   # in its main(), after parsing
    runtime = job_flags.config_from_flags(RuntimeConfig)

The jobs' config dataclasses name their fields after the flags, so a config is
built by reading each field's flag. Entry-point code: only command lines import
it (library code never reads flags).
"""

import dataclasses

from absl import flags

FLAGS = flags.FLAGS


def define_runtime_flags(default_seed: int) -> None:
    """Defines --distribution_strategy, --num_gpus, --tpu, --jit_compile, --mixed_precision, --deterministic, --seed."""
    from bert_tf.training.distribution import STRATEGIES
    from bert_tf.training.precision import PRECISION_POLICIES

    flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES, "tf.distribute strategy.")
    flags.DEFINE_integer("num_gpus", None, "GPUs to use (default: all visible; 0: CPU).")
    flags.DEFINE_string("tpu", None, "TPU name, grpc://host:port or 'local' (with --distribution_strategy=tpu).")
    flags.DEFINE_bool("jit_compile", False, "XLA-compile the training step (and the evaluation and prediction steps).")
    flags.DEFINE_enum(
        "mixed_precision", "float32", PRECISION_POLICIES, "Keras dtype policy (mixed_float16 scales the loss)."
    )
    flags.DEFINE_bool(
        "deterministic",
        False,
        "Seeded, deterministic ops and data order: the same command gives the same weights, also across a kill "
        "and resume (slower; some GPU ops have no deterministic kernel).",
    )
    flags.DEFINE_integer("seed", default_seed, "Seed of initialisation, dropout and data order.")


def config_from_flags(config_class, **overrides):
    """`config_class` with each field set from the parsed flag of the same name, or from `overrides`.

    The config checks the values as it is built, naming the flags.
    """
    values = {
        field.name: FLAGS[field.name].value for field in dataclasses.fields(config_class) if field.name not in overrides
    }
    return config_class(**values, **overrides)
