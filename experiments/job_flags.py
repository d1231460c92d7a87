"""Flags to config objects, shared by the training command lines.

    job_flags.define_runtime_flags()                            # in the tool's define_flags()
    data = job_flags.config_from_flags(PretrainingDataConfig)   # in its main(), after parsing
    schedule = job_flags.config_from_flags(TrainingConfig)      # the fields that have a flag; others: defaults
    runtime = job_flags.config_from_flags(RuntimeConfig)

The jobs' config dataclasses name their fields after the flags, so a config is
built by reading each field's flag. Entry-point code: only command lines import
it (library code never reads flags).

A flag that several programs take is defined once, in `SHARED_FLAGS` (or in one of the `define_*` functions
below): its help beside the config field whose default it reads. A program names the shared flags it takes
(`define("max_seq_length", "output_dir", notes={"output_dir": "..."})`); `notes` add what the flag does in that
program, and a program whose default differs gives it with its reason (`defaults={"do_eval": (True, "why")}`).
tests/test_code_style.py checks that no flag name is defined twice.
"""

import dataclasses
import importlib
from typing import Any, NamedTuple

from absl import flags

from bert_tf import errors

FLAGS = flags.FLAGS


class SharedFlag(NamedTuple):
    """One shared flag: `flags.DEFINE_<kind>`, its help, and where its default comes from.

    `default_from` is "module:Class" (a dataclass: the default of its field of the flag's name) or
    "module:NAME" (a constant); without it, `default`. `choices`: an enum's values, or "module:NAME" of them.
    """

    kind: str
    help: str
    default_from: str | None = None
    default: Any = None
    choices: tuple | str | None = None


_MODEL = "bert_tf.checkpoints.model_source:ModelSource"
_DATA = "bert_tf.jobs.finetuning.config:FinetuningDataConfig"
_TASK = "bert_tf.tasks.task_config:FinetuningTaskConfig"
_SCHEDULE = "bert_tf.training.config:TrainingConfig"  # the job's DEFAULT_SCHEDULE wins (`define(schedule=...)`)
_INSTANCES = "bert_tf.pretraining_data.instances:InstanceConfig"

#: Every flag more than one program takes, by name. Programs define these only through `define`.
SHARED_FLAGS = {
    # Files in and out: the program's note says what they hold.
    "input_file": SharedFlag("string", "Input files: comma-separated paths or glob patterns."),
    "output_file": SharedFlag("string", "Output file."),
    "output_dir": SharedFlag("string", "Output directory."),
    "export_dir": SharedFlag("string", "A directory of SavedModels: encoder/ and preprocess/."),
    "overwrite": SharedFlag("bool", "Replace existing outputs.", default=False),
    # The compressions the TFRecord writers write (`bert_tf.pretraining_data.writer`).
    "compression": SharedFlag("enum", "TFRecord compression.", default="NONE", choices=("NONE", "GZIP")),
    # The model: `ModelSource`'s fields.
    "model_dir": SharedFlag(
        "string",
        "A model directory (bert_config.json, vocab.txt, a TF2 checkpoint), as experiments.convert, "
        "experiments.pretrain or experiments.finetune write it.",
        _MODEL,
    ),
    "init_checkpoint": SharedFlag(
        "string",
        "The TF2 checkpoint (a prefix, or a model directory's latest) whose weights initialise the encoder; in the "
        "jobs that read --model_dir, instead of its latest checkpoint.",
        _MODEL,
    ),
    "bert_config_file": SharedFlag("string", "bert_config.json: the encoder's architecture.", _MODEL),
    "vocab_file": SharedFlag("string", "vocab.txt: the WordPiece vocabulary.", _MODEL),
    "do_lower_case": SharedFlag(
        "bool", "Lower-case and strip accents (uncased models; --nodo_lower_case for cased ones).", _MODEL
    ),
    "seed": SharedFlag(
        "integer",
        "Seed of what is random: initialisation, dropout, data order and splits.",
        "bert_tf.jobs:DEFAULT_SEED",
    ),
    "distribution_strategy": SharedFlag(
        "enum", "tf.distribute strategy.", default="one_device", choices="bert_tf.training.distribution:STRATEGIES"
    ),
    "mixed_precision": SharedFlag(
        "enum",
        "Keras dtype policy (mixed_float16 scales the loss).",
        default="float32",
        choices="bert_tf.training.config:PRECISION_POLICIES",
    ),
    "jit_compile": SharedFlag(
        "bool",
        "XLA-compile the model's steps (training, evaluation, prediction, feature extraction).",
        default=False,  # `RuntimeConfig`'s, whose module loads TensorFlow
    ),
    # Sequences and batches.
    "max_seq_length": SharedFlag(
        "integer", "Sequence length in WordPieces, [CLS] and [SEP] included; longer inputs are truncated.", _TASK
    ),
    "bucket_width": SharedFlag(
        "integer",
        "Pad each batch to the smallest multiple of this that holds its longest sequence (at most "
        "max_seq_length / bucket_width compiled shapes); 0 = off, every batch at --max_seq_length.",
        _TASK,
    ),
    "batch_size": SharedFlag(
        "integer", "Batch size of the forward passes.", "bert_tf.jobs.probe_layers.config:ProbeLayersConfig"
    ),
    "train_batch_size": SharedFlag("integer", "Global training batch size (over all replicas).", _DATA),
    "eval_batch_size": SharedFlag("integer", "Global evaluation batch size (over all replicas).", _DATA),
    "predict_batch_size": SharedFlag("integer", "Prediction batch size (default: --eval_batch_size).", _DATA),
    "group_by_length": SharedFlag(
        "bool",
        "Training batches of near-equal lengths (sorted inside chunks of 50 batches, as HuggingFace's "
        "group_by_length) instead of random ones: less padding, but slower learning on small data.",
        _TASK,
    ),
    "dropout_rate": SharedFlag("float", "Dropout before the output layer (default: hidden_dropout_prob).", _TASK),
    # Pretraining data.
    "vocab_size": SharedFlag("integer", "WordPiece vocabulary size, special tokens included.", default=30522),
    "dupe_factor": SharedFlag(
        "integer", "Times the corpus is written, each time with different masks (create_pretraining_data).", default=10
    ),
    "max_predictions_per_seq": SharedFlag("integer", "Masked-LM predictions per sequence at most.", _INSTANCES),
    "masked_lm_prob": SharedFlag("float", "Share of the WordPieces masked.", _INSTANCES),
    "masking": SharedFlag(
        "enum",
        "What is masked: token (WordPieces independently, BERT), whole_word (a word and its ## pieces together), "
        "span (SpanBERT: whole-word spans of geometric length, p=0.2, at most 10 words), or phrase/entity "
        "(ERNIE: whole phrases or named entities as units beside whole words).",
        _INSTANCES,
        choices="bert_tf.pretraining_data.instances:MASKING_METHODS",
    ),
    # Fine-tuning data: `FinetuningDataConfig`'s fields.
    "train_file": SharedFlag("string", "Training data: TSV/CSV/JSONL, CoNLL columns or SQuAD JSON.", _DATA),
    "eval_file": SharedFlag("string", "Evaluation data (labelled), same formats.", _DATA),
    "predict_file": SharedFlag("string", "Prediction data (labels optional), same formats.", _DATA),
    "tfds_name": SharedFlag(
        "string",
        "A TFDS text dataset instead of files, e.g. glue/mrpc, glue/stsb, imdb_reviews. Must already be prepared in "
        "--tfds_data_dir.",
        _DATA,
    ),
    "tfds_data_dir": SharedFlag("string", "The TFDS data directory (default: TFDS's own default).", _DATA),
    "tfds_train_split": SharedFlag("string", "TFDS split for training.", _DATA),
    "tfds_eval_split": SharedFlag(
        "string", "TFDS split for evaluation (default: validation; validation_matched for MNLI; test for IMDb).", _DATA
    ),
    "tfds_predict_split": SharedFlag("string", "TFDS split for prediction (default: test).", _DATA),
    "text_a_column": SharedFlag(
        "string",
        "First text column: a header name or 0-based index (TSV/CSV), a key (JSONL) or a TFDS feature. Default: "
        "text_a, or the TFDS dataset's own.",
        _DATA,
    ),
    "text_b_column": SharedFlag(
        "string", "Second text column for sentence pairs. Default: text_b, or the TFDS dataset's own.", _DATA
    ),
    "label_column": SharedFlag("string", "Label column. Default: label.", _DATA),
    "file_format": SharedFlag(
        "enum",
        "Format of text files (default: from the extension).",
        _DATA,
        choices="bert_tf.data.finetuning_readers:TEXT_FORMATS",
    ),
    "has_header": SharedFlag("bool", "Whether TSV/CSV files start with a header row.", _DATA),
    "conll_word_column": SharedFlag("integer", "CoNLL files: the word column.", _DATA),
    "conll_label_column": SharedFlag("integer", "CoNLL files: the tag column (-1 = last).", _DATA),
    "max_train_examples": SharedFlag("integer", "Use only the first this many training examples (0: all).", default=0),
    "do_eval": SharedFlag("bool", "Evaluate on the evaluation data.", default=False),
    "do_predict": SharedFlag("bool", "Predict on the prediction data.", default=False),
    # The schedule: `TrainingConfig`'s fields, defaults from the job's DEFAULT_SCHEDULE.
    "learning_rate": SharedFlag("float", "Peak learning rate of the optimizer.", _SCHEDULE),
    "num_train_epochs": SharedFlag(
        "float", "Epochs over the training features (whole epochs in the Keras `fit` programs).", _SCHEDULE
    ),
    "num_train_steps": SharedFlag(
        "integer", "Training steps (overrides --num_train_epochs where a job has it).", _SCHEDULE
    ),
    "warmup_proportion": SharedFlag("float", "Fraction of the steps with linear learning-rate warm-up.", _SCHEDULE),
    "weight_decay_rate": SharedFlag("float", "Decoupled weight decay (not on LayerNorm and biases).", _SCHEDULE),
    "clip_norm": SharedFlag("float", "Global gradient-norm clipping (0 = none).", _SCHEDULE),
    "steps_per_loop": SharedFlag("integer", "Steps per compiled loop call (and per progress line).", _SCHEDULE),
    "save_checkpoints_steps": SharedFlag("integer", "Checkpoint every this many steps.", _SCHEDULE),
    "keep_checkpoint_max": SharedFlag("integer", "Checkpoints kept.", _SCHEDULE),
    "eval_every_steps": SharedFlag(
        "integer",
        "Also evaluate every this many training steps (in TensorBoard's summaries/eval); 0: only at the end.",
        default=0,
    ),
    # Distillation: `experiments.distill`'s and `experiments.distill_frontier`'s.
    "teacher_dir": SharedFlag("string", "The teacher: a model directory that experiments.finetune trained."),
    "temperature": SharedFlag("float", "Temperature of the teacher's soft targets.", default=2.0),
    "alpha": SharedFlag("float", "Weight of the soft-target loss; the hard-label loss has 1 - alpha.", default=0.5),
    "intermediate_num_layers": SharedFlag(
        "list",
        "Deeper students distilled first, deepest first, each starting from evenly spaced layers of the model "
        "before it, the student from the last (layers dropped a few at a time).",
        default=[],
    ),
}

#: `ModelSource`'s flags: the programs that read a model (fine-tuning, export, features, probes).
MODEL_SOURCE_FLAGS = ("model_dir", "init_checkpoint", "bert_config_file", "vocab_file", "do_lower_case")
#: `FinetuningDataConfig`'s training and evaluation data flags (fine-tuning and distillation).
FINETUNING_DATA_FLAGS = (
    "train_file",
    "eval_file",
    "tfds_name",
    "tfds_data_dir",
    "tfds_train_split",
    "tfds_eval_split",
    "text_a_column",
    "text_b_column",
    "label_column",
    "file_format",
    "has_header",
    "conll_word_column",
    "conll_label_column",
    "train_batch_size",
    "eval_batch_size",
)
#: The prediction phase's flags (fine-tuning and distillation).
PREDICTION_FLAGS = ("do_predict", "predict_file", "tfds_predict_split", "predict_batch_size")
#: The fine-tuning schedule's flags (`TrainingConfig`; with `define_num_microbatches_flag` and `define_adam_flags`).
FINETUNING_SCHEDULE_FLAGS = (
    "learning_rate",
    "num_train_epochs",
    "num_train_steps",
    "warmup_proportion",
    "weight_decay_rate",
    "clip_norm",
    "steps_per_loop",
    "save_checkpoints_steps",
    "keep_checkpoint_max",
)


def define_model_source_flags(notes: dict | None = None) -> None:
    """Defines `ModelSource`'s flags (`MODEL_SOURCE_FLAGS`): the programs that read a model take them all."""
    in_model_dir = "Default: the one in --model_dir."
    notes = dict(notes or {})
    for name in ("bert_config_file", "vocab_file"):
        notes[name] = " ".join(filter(None, (in_model_dir, notes.get(name))))
    define(*MODEL_SOURCE_FLAGS, notes=notes)


def _resolve(reference: str):
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def _default(spec: SharedFlag, name: str, schedule: dict | None):
    if spec.default_from == _SCHEDULE and schedule and name in schedule:
        return schedule[name]
    if spec.default_from is None:
        return spec.default
    source = _resolve(spec.default_from)
    if not dataclasses.is_dataclass(source):
        return source
    field = {field.name: field for field in dataclasses.fields(source)}[name]
    return field.default if field.default is not dataclasses.MISSING else field.default_factory()


def define(
    *names: str,
    notes: dict | None = None,
    defaults: dict | None = None,
    schedule: dict | None = None,
    flag_values: flags.FlagValues = FLAGS,
) -> None:
    """Defines the shared flags `names` (keys of `SHARED_FLAGS`) for one program.

    Args:
      notes: {name: text} added to the help: what the flag does in this program.
      defaults: {name: (default, reason)} where this program's default differs from the table's; the reason,
        a sentence, joins the help.
      schedule: the job's `DEFAULT_SCHEDULE`, the defaults of the `TrainingConfig` flags.
      flag_values: where the flags are defined (absl's global `FLAGS`).
    """
    notes, defaults = notes or {}, defaults or {}
    for name in (*notes, *defaults):
        if name not in names:
            raise ValueError(f"A note or default for --{name}, which is not among the flags defined.")
    for name in names:
        spec = SHARED_FLAGS[name]
        help_text = " ".join(filter(None, (spec.help, notes.get(name))))
        if name in defaults:
            default, reason = defaults[name]
            help_text = " ".join(filter(None, (help_text, reason)))
        else:
            default = _default(spec, name, schedule)
        if spec.kind == "enum":
            choices = _resolve(spec.choices) if isinstance(spec.choices, str) else spec.choices
            flags.DEFINE_enum(name, default, list(choices), help_text, flag_values=flag_values)
        else:
            getattr(flags, f"DEFINE_{spec.kind}")(name, default, help_text, flag_values=flag_values)


def define_runtime_flags() -> None:
    """Defines `RuntimeConfig`'s flags: --distribution_strategy, --num_gpus, --tpu, --jit_compile,
    --mixed_precision, --deterministic, --seed, --preemption_grace_seconds."""
    define("distribution_strategy")
    flags.DEFINE_integer("num_gpus", None, "GPUs to use (default: all visible; 0: CPU).")
    flags.DEFINE_string("tpu", None, "TPU name, grpc://host:port or 'local' (with --distribution_strategy=tpu).")
    define("mixed_precision")
    flags.DEFINE_bool(
        "deterministic",
        False,
        "Seeded, deterministic ops and data order: the same command gives the same weights, also across a kill "
        "and resume (slower; some GPU ops have no deterministic kernel).",
    )
    define("jit_compile", "seed")
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


def define_packing_flag(default: bool | None = None) -> None:
    """Defines --packing (`FinetuningTaskConfig.packing`, `FeatureExtractionConfig.packing`,
    `HubClassifierConfig.packing`, `bert_tf.jobs.keras_fit`'s, `DistillationConfig.packing`,
    `ProbeLayersConfig.packing`). `default`: the program's; None (unset) lets the job pack where it can."""
    flags.DEFINE_bool(
        "packing",
        default,
        "Fill rows of --max_seq_length tokens with whole examples (in random order when training), each computed "
        "as if alone (a block-diagonal mask, its own positions and [CLS]), instead of one example a row; a "
        "batch holds the batch size in examples on average (squad: windows, each scored over its own tokens). "
        "Fine-tuning and distillation pack by default where they can (not --group_by_length, --num_microbatches>1, "
        "--hidden_loss_weight or a teacher's --long_text=windows, which then take one example a row and log why; "
        "giving --packing with them is refused); --nopacking: one example a row, padded to its batch's length.",
    )


def define_long_text_flags(window_pooling: bool = True, long_text_help: str | None = None) -> None:
    """Defines --long_text, --window_stride, --window_pooling and --max_windows (`LongTextConfig`'s fields, with
    its defaults and `FLAG_HELP`). `window_pooling`: False for a job without window logits (extract_features,
    which averages its windows' vectors); `long_text_help`: the job's own help of --long_text."""
    from bert_tf.tasks.long_text import FLAG_HELP, LONG_TEXT_MODES, WINDOW_POOLINGS, LongTextConfig

    default = LongTextConfig()
    flags.DEFINE_enum("long_text", default.long_text, list(LONG_TEXT_MODES), long_text_help or FLAG_HELP["long_text"])
    flags.DEFINE_integer("window_stride", default.window_stride, FLAG_HELP["window_stride"])
    if window_pooling:
        flags.DEFINE_enum("window_pooling", default.window_pooling, list(WINDOW_POOLINGS), FLAG_HELP["window_pooling"])
    flags.DEFINE_integer("max_windows", default.max_windows, FLAG_HELP["max_windows"])


def long_text_config(recorded: dict | None = None):
    """The `LongTextConfig` of the parsed flags; a flag not given takes `recorded`'s value (an earlier run's)."""
    from bert_tf.tasks.long_text import LongTextConfig

    recorded = recorded or {}
    values = {
        field.name: recorded[field.name]
        for field in dataclasses.fields(LongTextConfig)
        if field.name in recorded and not FLAGS[field.name].present
    }
    return config_from_flags(LongTextConfig, **values)


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


def column(value):
    """A data-column flag's value: an integer for a 0-based index ("0", "-1"), else the name itself."""
    return int(value) if value is not None and value.lstrip("-").isdigit() else value


def finetuning_data_config(**overrides):
    """The `FinetuningDataConfig` of the parsed data flags (columns as `column` reads them), or `overrides`."""
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig

    values = {name: column(FLAGS[name].value) for name in ("text_a_column", "text_b_column", "label_column")}
    return config_from_flags(FinetuningDataConfig, **{**values, **overrides})


def integer_list(name: str) -> tuple:
    """The list flag `name` as integers; otherwise bad input naming the flag."""
    try:
        return tuple(int(value) for value in FLAGS[name].value)
    except ValueError:
        raise errors.BadInputError(f"--{name}: expected integers, got {FLAGS[name].value}.") from None


def whole_number(name: str) -> int:
    """The float flag `name` as an integer (Keras `fit`'s epochs); otherwise bad input naming the flag."""
    value = FLAGS[name].value
    if value is None or not float(value).is_integer():
        raise errors.BadInputError(f"--{name}: expected a whole number, got {value}.")
    return int(value)
