"""The flags of `bert_tf.training.RuntimeConfig`, shared by the training command lines.

    runtime_flags.define(default_seed=12345)   # in the tool's define_flags()
    runtime = runtime_flags.runtime_config()    # in its main(), after parsing

Entry-point code: only command lines import it (library code never reads flags).
"""

from absl import flags

FLAGS = flags.FLAGS


def define(default_seed: int) -> None:
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


def runtime_config():
    """The `RuntimeConfig` of the parsed flags (it checks them as it is built)."""
    from bert_tf.training.runtime import RuntimeConfig

    return RuntimeConfig(
        distribution_strategy=FLAGS.distribution_strategy,
        num_gpus=FLAGS.num_gpus,
        tpu=FLAGS.tpu,
        jit_compile=FLAGS.jit_compile,
        mixed_precision=FLAGS.mixed_precision,
        deterministic=FLAGS.deterministic,
        seed=FLAGS.seed,
    )
