"""`run_pretraining`: the BERT pretraining job (masked LM + next sentence prediction) behind `experiments.pretrain`.

    from bert_tf import BertConfig
    from bert_tf.jobs.pretrain import PretrainingDataConfig, run_pretraining
    from bert_tf.training import RuntimeConfig, TrainingConfig

    result = run_pretraining(
        "runs/pretrain", BertConfig.from_preset("bert_mini"),
        PretrainingDataConfig(input_file="runs/data/train-*.tfrecord", eval_input_file="runs/data/eval.tfrecord"),
        TrainingConfig(learning_rate=1e-4, num_train_steps=10000, num_warmup_steps=1000),
        RuntimeConfig(deterministic=True, seed=42), vocab_file="vocab.txt")

The config objects hold the flags of `experiments.pretrain` (which documents
them and the outputs) and check them when they are built; `run_pretraining`
checks the rest (files, the model) before it writes anything, with the
model-source rules of `bert_tf.checkpoints.model_source` (vocabulary against
config, sequence length, a resumable output directory). Every error is a
`JobArgumentError` (`bert_tf.errors`) naming the flag.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from absl import logging

from bert_tf import training
from bert_tf.checkpoints import model_source
from bert_tf.config import BertConfig
from bert_tf.errors import JobArgumentError, check_int
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.tokenization.vocab import CLS_TOKEN, MASK_TOKEN, SEP_TOKEN
from bert_tf.training.runtime import RuntimeConfig, training_runtime


def resolve_bert_config(bert_config_file: str | None = None, preset: str | None = None) -> BertConfig:
    """The `BertConfig` of `--bert_config_file` or `--preset` (exactly one of them)."""
    given = [name for name, value in (("--bert_config_file", bert_config_file), ("--preset", preset)) if value]
    if len(given) != 1:
        raise JobArgumentError(
            f"Give exactly one of --bert_config_file and --preset (got {', '.join(given) or 'neither'})."
        )
    if bert_config_file:
        return model_source.read_config(bert_config_file)
    try:
        return BertConfig.from_preset(preset)
    except ValueError as e:
        raise JobArgumentError(f"--preset: {e}") from None


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """The TFRecords and how they are batched and masked (the flags of the same names).

    Attributes:
      input_file: training TFRecords, comma-separated globs.
      eval_input_file: held-out TFRecords (comma-separated globs), or None.
      max_seq_length, max_predictions_per_seq: the records' shapes.
      train_batch_size, eval_batch_size: global batch sizes (over all replicas).
      shuffle_buffer_size: records in the training shuffle buffer.
      dynamic_masking: re-mask each batch as it is read (needs a vocab_file).
      masked_lm_prob: the masking rate of dynamic masking.
    """

    input_file: str
    eval_input_file: str | None = None
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    train_batch_size: int = 32
    eval_batch_size: int = 8
    shuffle_buffer_size: int = 10000
    dynamic_masking: bool = False
    masked_lm_prob: float = 0.15

    def __post_init__(self):
        if not self.input_file:
            raise JobArgumentError("--input_file is required.")
        for name in ("max_seq_length", "max_predictions_per_seq", "train_batch_size", "eval_batch_size"):
            check_int(name, getattr(self, name))
        if self.max_predictions_per_seq > self.max_seq_length:
            raise JobArgumentError(
                f"--max_predictions_per_seq={self.max_predictions_per_seq} exceeds "
                f"--max_seq_length={self.max_seq_length}."
            )
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise JobArgumentError(f"--masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}.")


# The schedule of `run_pretraining(schedule=None)`, and the defaults of experiments.pretrain's flags (a
# `bert_tf.training.TrainingConfig`'s fields; BERT's optimizer: decay 0.01, clipping at norm 1.0).
DEFAULT_SCHEDULE = dict(
    learning_rate=5e-5,
    num_train_steps=100000,
    num_warmup_steps=10000,
    save_checkpoints_steps=1000,
    keep_checkpoint_max=5,
    steps_per_loop=1000,
    eval_every_steps=None,
    max_eval_steps=100,
)


def run_pretraining(
    output_dir: str,
    model: BertConfig,
    data: PretrainingDataConfig,
    schedule: training.TrainingConfig | None = None,
    runtime: RuntimeConfig | None = None,
    *,
    vocab_file: str | None = None,
    init_checkpoint: str | None = None,
    loop_callback: Callable | None = None,
) -> training.TrainingResult:
    """Pretrains (or resumes pretraining) a BERT in `output_dir`.

    Args:
      output_dir: checkpoints, summaries, bert_config.json, vocab.txt and
        eval_results.json; an existing run there is resumed.
      model: the `BertConfig` to train (`resolve_bert_config` reads the flags').
      data: see its class.
      schedule: the `bert_tf.training.TrainingConfig`, in steps (`num_train_steps`); None: `DEFAULT_SCHEDULE`.
      runtime: strategy, precision, seeds; None: `RuntimeConfig(seed=DEFAULT_SEED)`.
      vocab_file: the vocabulary the data was written with; copied into
        `output_dir`; needed by `data.dynamic_masking`.
      init_checkpoint: warm start from a TF2 model directory or checkpoint
        (the encoder, and the pretraining heads when it has them); ignored
        when resuming.
      loop_callback: the loop's `loop_callback(step, metrics)`.

    Returns:
      The loop's `TrainingResult` (model, step, train and eval metrics, checkpoint).

    Raises:
      JobArgumentError (a ValueError) naming the flag, before
      anything is written, for arguments that cannot work.
    """
    schedule = schedule if schedule is not None else training.TrainingConfig(**DEFAULT_SCHEDULE)
    if schedule.num_train_steps is None:
        raise JobArgumentError("--num_train_steps is required (the TFRecords' epochs are not counted).")
    runtime = runtime if runtime is not None else RuntimeConfig(seed=DEFAULT_SEED)
    train_files, eval_files, vocab = _check_arguments(output_dir, model, data, vocab_file)
    # TensorFlow state: determinism, precision, then the strategy before any op runs.
    with training_runtime(
        runtime,
        batch_sizes={"train_batch_size": data.train_batch_size, "eval_batch_size": data.eval_batch_size},
        error=JobArgumentError,
    ) as strategy:
        _check_records(data, train_files, eval_files)
        training.check_microbatches(schedule.num_microbatches, data.train_batch_size, strategy.num_replicas_in_sync)
        init_checkpoint = _find_init_checkpoint(init_checkpoint)
        masking = _dynamic_masking(data, vocab_file, vocab)
        logging.info(
            "Strategy %s: %d replica(s), %d worker(s); global batch %d (%d per replica).",
            runtime.distribution_strategy,
            strategy.num_replicas_in_sync,
            training.num_workers(strategy),
            data.train_batch_size,
            data.train_batch_size // strategy.num_replicas_in_sync,
        )
        if training.is_chief(strategy):
            _prepare_output_dir(output_dir, model, vocab_file)
        result = _train(
            strategy,
            output_dir,
            model,
            data,
            schedule,
            runtime,
            train_files,
            eval_files,
            masking,
            init_checkpoint,
            loop_callback,
        )
        if training.is_chief(strategy):
            # The backend-neutral copy of the final weights (bert_tf/checkpoints/weights_file.py).
            from bert_tf.checkpoints import weights_file

            weights_file.write_weights_file(output_dir, result.model, checkpoint=result.checkpoint)
        return result


# --- checks before TensorFlow runs ----------------------------------------------------


def _check_arguments(output_dir, config: BertConfig, data: PretrainingDataConfig, vocab_file):
    """The checks that need no TensorFlow state; returns the (train, eval or None) file lists and the vocabulary.

    The vocabulary (None without `vocab_file`) is read here once; dynamic masking takes its ids from it.
    """
    if not output_dir:
        raise JobArgumentError("--output_dir is required.")
    model_source.check_seq_length(data.max_seq_length, config)
    vocab = None
    if vocab_file:
        # [CLS]/[SEP] frame every record; [MASK] is what masked-LM inputs hold.
        vocab = model_source.read_vocab(vocab_file, required_tokens=(CLS_TOKEN, SEP_TOKEN, MASK_TOKEN))
        model_source.check_compatible(config, len(vocab), vocab_file=vocab_file)
    if data.dynamic_masking and not vocab_file:
        raise JobArgumentError("--dynamic_masking needs --vocab_file (for the [MASK] and special ids).")
    train_files = _resolve_files("input_file", data.input_file)
    eval_files = _resolve_files("eval_input_file", data.eval_input_file) if data.eval_input_file else None
    model_source.check_resumable(output_dir, config, vocab_file)
    return train_files, eval_files, vocab


def _resolve_files(flag: str, patterns: str) -> list[str]:
    from bert_tf.data.pretraining_dataset import resolve_input_files

    try:
        return list(resolve_input_files(patterns))
    except ValueError as e:
        raise JobArgumentError(f"--{flag}={patterns!r}: {e}") from None


# --- checks with TensorFlow, inside the strategy's set-up --------------------------------


def _check_records(data: PretrainingDataConfig, train_files: list[str], eval_files: list[str] | None) -> None:
    """The first record of every file has the shapes of `data`; neither file set is empty."""
    from bert_tf.data.pretraining_dataset import check_record_format, detect_compression

    for flag, files in (("input_file", train_files), ("eval_input_file", eval_files or [])):
        for path in files:
            try:
                check_record_format(
                    path,
                    detect_compression(path),
                    data.max_seq_length,
                    data.max_predictions_per_seq,
                    need_masked_lm=not data.dynamic_masking,
                )
            except ValueError as e:
                raise JobArgumentError(f"--{flag}: {e}") from None
        # An endless (repeated) dataset of no records would wait forever for its first batch.
        if files and not any(os.path.getsize(path) for path in files):
            raise JobArgumentError(f"--{flag}: no records in {', '.join(files)}.")


def _find_init_checkpoint(init_checkpoint: str | None) -> str | None:
    if not init_checkpoint:
        return init_checkpoint
    from bert_tf.checkpoints import model_dir as model_dir_lib

    try:
        return model_dir_lib.find_checkpoint(init_checkpoint)
    except FileNotFoundError as e:
        raise JobArgumentError(f"--init_checkpoint: {e}") from None


def _dynamic_masking(data: PretrainingDataConfig, vocab_file: str | None, vocab: list | None):
    """The `DynamicMaskingConfig` of `data.dynamic_masking`, or None."""
    if not data.dynamic_masking:
        return None
    from bert_tf.data.dynamic_masking import DynamicMaskingConfig

    try:
        return DynamicMaskingConfig.from_vocab(vocab, vocab_file, masked_lm_prob=data.masked_lm_prob)
    except ValueError as e:
        raise JobArgumentError(f"--vocab_file (for --dynamic_masking): {e}") from None


# --- writing and training ----------------------------------------------------------------


def _prepare_output_dir(output_dir: str, config: BertConfig, vocab_file: str | None) -> None:
    """Writes bert_config.json and vocab.txt unless resuming (after `check_resumable` passed)."""
    from bert_tf.checkpoints.model_dir import write_model_files

    write_model_files(output_dir, config, vocab_file, keep_existing=True)


def _train(
    strategy,
    output_dir,
    config: BertConfig,
    data: PretrainingDataConfig,
    schedule: training.TrainingConfig,
    runtime: RuntimeConfig,
    train_files,
    eval_files,
    masking,
    init_checkpoint,
    loop_callback,
):
    """Runs the loop; a corrupt record met while training is a `JobArgumentError` naming the file."""
    import tensorflow as tf

    from bert_tf.checkpoints import model_dir as model_dir_lib
    from bert_tf.data.pretraining_dataset import pretraining_dataset
    from bert_tf.models import BertEncoder, BertPretrainer, pretraining_losses

    seed = runtime.seed
    data_seed = seed if runtime.deterministic else None

    def train_dataset_fn(input_context):
        return pretraining_dataset(
            train_files,
            data.train_batch_size,
            data.max_seq_length,
            data.max_predictions_per_seq,
            is_training=True,
            input_context=input_context,
            shuffle_buffer_size=data.shuffle_buffer_size,
            seed=data_seed,
            dynamic_masking=masking,
            check_files=False,
        )

    def eval_dataset_fn(input_context):
        # Evaluation masks (when drawn) use a fixed seed, so evaluations are comparable.
        return pretraining_dataset(
            eval_files,
            data.eval_batch_size,
            data.max_seq_length,
            data.max_predictions_per_seq,
            is_training=False,
            input_context=input_context,
            seed=seed,
            dynamic_masking=masking,
            drop_remainder=False,
            check_files=False,
        )

    def init_fn(model):
        if not init_checkpoint:
            return
        if model_dir_lib.has_pretraining_heads(init_checkpoint):
            model_dir_lib.restore(model, init_checkpoint)
            logging.info("Initialised the encoder and pretraining heads from %s.", init_checkpoint)
        else:
            model_dir_lib.restore(model.encoder, init_checkpoint)
            logging.info("Initialised the encoder from %s (new pretraining heads).", init_checkpoint)

    try:
        return training.train(
            strategy,
            lambda: BertPretrainer(BertEncoder(config)),
            pretraining_losses,
            train_dataset_fn,
            output_dir,
            dataclasses.replace(schedule, jit_compile=runtime.jit_compile),
            eval_dataset_fn=eval_dataset_fn if eval_files else None,
            init_fn=init_fn,
            loop_callback=loop_callback,
        )
    except tf.errors.DataLossError:
        # The first record of every file was checked; a file damaged further on fails here,
        # after the last checkpoint was written, which stays as it was.
        where = _find_corrupt_record(train_files + (eval_files or []))
        if where is None:
            raise
        latest = model_dir_lib.latest_checkpoint(output_dir)
        raise JobArgumentError(
            f"{where}; training stopped, the latest checkpoint ({latest or 'none'}) is kept."
        ) from None


def _find_corrupt_record(files: list[str]) -> str | None:
    """ "<file>: ..." for the first file that does not read to its end, or None.

    Only called after training failed on a DataLossError, whose message names
    no file.
    """
    import tensorflow as tf

    from bert_tf.data.pretraining_dataset import detect_compression

    for path in files:
        count = 0
        try:
            for _ in tf.data.TFRecordDataset(path, compression_type=detect_compression(path)):
                count += 1
        except tf.errors.OpError as e:
            return f"{path}: corrupt or truncated after record {count} ({e.message})"
    return None
