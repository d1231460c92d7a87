"""Flags to config objects, shared by the training command lines.

    job_flags.define_runtime_flags()                            # in the tool's define_flags()
    data = job_flags.config_from_flags(PretrainingDataConfig)   # in its main(), after parsing
    schedule = job_flags.config_from_flags(TrainingConfig)      # the fields that have a flag; others: defaults
    runtime = job_flags.config_from_flags(RuntimeConfig)

The jobs' config dataclasses name their fields after the flags, so a config is
built by reading each field's flag. Entry-point code: only command lines import
it (library code never reads flags).
"""

import dataclasses

from absl import flags

from bert_tf import errors

FLAGS = flags.FLAGS


def define_runtime_flags(default_seed: int | None = None) -> None:
    """Defines --distribution_strategy, --num_gpus, --tpu, --jit_compile, --mixed_precision, --deterministic, --seed,
    --preemption_grace_seconds.

    `default_seed` None: the jobs' `bert_tf.jobs.DEFAULT_SEED`.
    """
    from bert_tf.jobs import DEFAULT_SEED
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
    seed = DEFAULT_SEED if default_seed is None else default_seed
    flags.DEFINE_integer("seed", seed, "Seed of initialisation, dropout and data order.")
    flags.DEFINE_float(
        "preemption_grace_seconds",
        30.0,
        "On SIGTERM (a spot VM's or TPU's preemption, Kubernetes' stop), finish the current step, save a "
        "checkpoint there and exit with status 143 within this many seconds; the same command resumes. "
        "0: SIGTERM ends the job at once.",
    )


def define_init_from_flag() -> None:
    """Defines --init_from (`ModelSource.init_from`), which fine-tuning and export take."""
    from bert_tf.checkpoints.model_source import INIT_FROM

    flags.DEFINE_enum(
        "init_from",
        INIT_FROM[0],
        list(INIT_FROM),
        "Where the encoder's weights come from: the pretrained checkpoint, or random (the config's architecture "
        "initialised from --seed, no checkpoint read: the baseline a pretrained encoder is measured against; "
        "needs --bert_config_file and --vocab_file, or --model_dir).",
    )


def define_packing_flag() -> None:
    """Defines --packing (`FinetuningTaskConfig.packing`, `FeatureExtractionConfig.packing`): unset (None) is
    the job's default, packed where it can be."""
    flags.DEFINE_bool(
        "packing",
        None,
        "Fill rows of --max_seq_length tokens with whole examples (in random order when training), each computed "
        "as if alone (a block-diagonal mask, its own positions and [CLS]), instead of one example a row; a "
        "batch holds the batch size in examples on average. The default where the job can (fine-tuning: not "
        "squad, --group_by_length or --num_microbatches>1, which then take one example a row and log why; "
        "giving --packing with them is refused); --nopacking: one example a row, padded to its batch's length.",
    )


def define_num_microbatches_flag() -> None:
    """Defines --num_microbatches (`TrainingConfig.num_microbatches`), which both training jobs take."""
    flags.DEFINE_integer(
        "num_microbatches",
        1,
        "Split each replica's batch into this many pieces, run one after another, whose gradients are summed "
        "for one update: the same batch size in less memory (only one piece's activations are kept), slower.",
    )


def define_adam_flags(schedule: dict) -> None:
    """Defines --adam_epsilon and --adam_bias_correction (`TrainingConfig`) with the job's `DEFAULT_SCHEDULE`'s
    values: fine-tuning's are PyTorch's AdamW, pretraining's the original BERT's."""
    flags.DEFINE_float(
        "adam_epsilon", schedule["adam_epsilon"], "Adam's epsilon (the original BERT: 1e-6; PyTorch's AdamW: 1e-8)."
    )
    flags.DEFINE_bool(
        "adam_bias_correction",
        schedule["adam_bias_correction"],
        "Adam's bias correction of the moments, as PyTorch's and Keras' AdamW have it (the original BERT has none).",
    )


def config_from_flags(config_class, **overrides):
    """`config_class` with each field set from the parsed flag of the same name, or from `overrides`.

    A field without a flag (say, `TrainingConfig.adam_epsilon` for a tool that defines none) keeps its
    default. The config checks the values as it is built, naming the flags.
    """
    values = {
        field.name: FLAGS[field.name].value
        for field in dataclasses.fields(config_class)
        if field.name not in overrides and field.name in FLAGS
    }
    return config_class(**values, **overrides)


def integer_list(name: str) -> tuple:
    """The list flag `name` as integers; otherwise bad input naming the flag."""
    try:
        return tuple(int(value) for value in FLAGS[name].value)
    except ValueError:
        raise errors.BadInputError(f"--{name}: expected integers, got {FLAGS[name].value}.") from None
