r"""BERT pretraining (masked LM + next sentence prediction) from TFRecords.

    python -m experiments.pretrain \
      --input_file='runs/data/train-*.tfrecord' --eval_input_file=runs/data/eval.tfrecord \
      --preset=bert_mini --vocab_file=vocab.txt --output_dir=runs/pretrain \
      --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
      --num_train_steps=10000 --num_warmup_steps=1000 --learning_rate=1e-4

Flags are those of google-research/bert's `run_pretraining.py` where one
exists (`--iterations_per_loop` is accepted for `--steps_per_loop`), plus
Model Garden's `--distribution_strategy`, `--num_gpus`, `--tpu` and
`--mixed_precision`, and `--deterministic`/`--seed`, `--jit_compile`,
`--dynamic_masking`/`--masked_lm_prob`, `--eval_every_steps`,
`--shuffle_buffer_size`. `--flagfile` works. Flags are checked before
anything is written; a bad one stops the job with a message naming it. The
input is what `tfrecords_tools.create_pretraining_data` (or the original
script) writes. The optimizer is BERT's: AdamW (decay 0.01, not on LayerNorm
and biases), linear warm-up then linear decay to 0, clipping at norm 1.0.

Multi-worker: start the same command on every worker with its TF_CONFIG and
`--distribution_strategy=multi_worker_mirrored`, all with the same shared
--output_dir.

`--output_dir` receives `bert_config.json`, `vocab.txt`, checkpoints
`ckpt-<step>` (every --save_checkpoints_steps and at the end), TensorBoard
summaries under `summaries/{train,eval}` and `eval_results.json`. It is a
model directory: `bert_tf.load_encoder`, `experiments.export` and
`experiments.finetune` read it. Rerunning the same command resumes from the
latest checkpoint, at the same position in the data; with --deterministic the
resumed run ends with the same weights as an uninterrupted one.

Differences from run_pretraining.py: there is no --do_train/--do_eval (it
trains to --num_train_steps, then evaluates if --eval_input_file is given;
`--num_train_steps` equal to the step of the latest checkpoint only
evaluates), and --init_checkpoint takes a TF2 model directory or checkpoint
(convert google-research checkpoints with `python -m bert_tf.convert`).

Also usable as a library: `run_pretraining(input_file=..., output_dir=..., ...)`
takes the flags as keyword arguments and returns the `TrainingResult`.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from absl import app, flags, logging

from bert_tf import cli, file_io
from bert_tf.config import BertConfig
from bert_tf.training.distribution import STRATEGIES
from bert_tf.training.loop import NonFiniteLossError
from bert_tf.training.precision import PRECISION_POLICIES

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string("input_file", None, "Input TFRecord files: comma-separated globs.")
    flags.DEFINE_string("eval_input_file", None, "Held-out TFRecord files for evaluation (comma-separated globs).")
    flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to train.")
    flags.DEFINE_string("preset", None, "A named BertConfig preset (e.g. bert_mini) instead of --bert_config_file.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt the data was written with; copied into --output_dir.")
    flags.DEFINE_string("init_checkpoint", None, "Warm start: a TF2 model directory or checkpoint prefix. Restores "
                        "the encoder, and the pretraining heads when it has them. Ignored when resuming.")
    flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries, bert_config.json, vocab.txt and "
                        "eval_results.json are written; an existing run there is resumed.")
    flags.DEFINE_bool("deterministic", False, "Seeded, deterministic ops and data order: the same command gives "
                      "the same weights, also across a kill and resume.")
    flags.DEFINE_integer("seed", 12345, "Seed for initialisation, dropout and data order.")
    flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the TFRecords.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked-LM predictions per sequence in the TFRecords.")
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size (over all replicas).")
    flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of AdamW.")
    flags.DEFINE_integer("num_train_steps", 100000, "Training steps.")
    flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warm-up steps.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps.")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints to keep.")
    flags.DEFINE_integer("steps_per_loop", 1000, "Steps per compiled loop call (and per progress line).")
    flags.DEFINE_integer("iterations_per_loop", None, "Alias of --steps_per_loop (run_pretraining.py's name).")
    flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches (0: the whole eval set).")
    flags.DEFINE_integer("eval_every_steps", 0, "Also evaluate every this many steps (0: only at the end).")
    flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES, "tf.distribute strategy.")
    flags.DEFINE_string("tpu", None, "TPU name, grpc://host:port or 'local' (with --distribution_strategy=tpu).")
    flags.DEFINE_integer("num_gpus", None, "GPUs to use (default: all visible; 0: CPU).")
    flags.DEFINE_bool("jit_compile", False, "XLA-compile the training step.")
    flags.DEFINE_enum("mixed_precision", "float32", PRECISION_POLICIES, "Keras dtype policy.")
    flags.DEFINE_bool("dynamic_masking", False, "Re-mask each batch as it is read (needs --vocab_file).")
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masking rate of --dynamic_masking.")
    flags.DEFINE_integer("shuffle_buffer_size", 10000, "Records in the training shuffle buffer.")


class PretrainingArgumentError(cli.BadInputError):
    """A run_pretraining argument (= flag) that cannot work; the message names the flag."""


def _resolve_files(flag: str, patterns: str) -> list[str]:
    from bert_tf.data.pretraining_dataset import resolve_input_files
    try:
        return list(resolve_input_files(patterns))
    except ValueError as e:
        raise PretrainingArgumentError(f"--{flag}={patterns!r}: {e}") from None


def _positive(name: str, value, allow_zero: bool = False):
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PretrainingArgumentError(f"--{name} must be an integer >= {low}, got {value!r}.")


def _bert_config(bert_config_file, preset, bert_config) -> BertConfig:
    given = [name for name, value in (("--bert_config_file", bert_config_file), ("--preset", preset),
                                      ("bert_config", bert_config)) if value]
    if len(given) != 1:
        raise PretrainingArgumentError(
            f"Give exactly one of --bert_config_file and --preset (got {', '.join(given) or 'neither'}).")
    try:
        if bert_config is not None:
            return bert_config
        if preset:
            return BertConfig.from_preset(preset)
        return BertConfig.from_json_file(bert_config_file)
    except (ValueError, FileNotFoundError) as e:
        flag = "--preset" if preset else "--bert_config_file"
        raise PretrainingArgumentError(f"{flag}: {e}") from None


def _check_vocab(vocab_file: str, config: BertConfig) -> None:
    """The vocabulary must be readable, hold the special tokens and match the config's vocab_size."""
    from bert_tf.tokenization.vocab import CLS_TOKEN, MASK_TOKEN, SEP_TOKEN, special_token_ids
    try:
        vocab = cli.load_vocab(vocab_file, "vocab_file")
        # [CLS]/[SEP] frame every record; [MASK] is what masked-LM inputs hold.
        special_token_ids(vocab, vocab_file, required=(CLS_TOKEN, SEP_TOKEN, MASK_TOKEN))
    except ValueError as e:
        raise PretrainingArgumentError(f"--vocab_file: {e}") from None
    if len(vocab) != config.vocab_size:
        raise PretrainingArgumentError(
            f"--vocab_file={vocab_file} has {len(vocab)} tokens but the BERT config has vocab_size="
            f"{config.vocab_size}.")


def _check_output_dir(output_dir: str, config: BertConfig, vocab_file: str | None) -> None:
    """Refuses to resume a run of another model or vocabulary; writes nothing."""
    from bert_tf.checkpoints.model_dir import CONFIG_NAME, VOCAB_NAME
    config_path = os.path.join(output_dir, CONFIG_NAME)
    if os.path.exists(config_path):
        try:
            existing = BertConfig.from_json_file(config_path)
        except ValueError as e:
            raise PretrainingArgumentError(f"--output_dir: {e}") from None
        if existing != config:
            raise PretrainingArgumentError(
                f"--output_dir={output_dir} holds a run of another model ({config_path} differs from the "
                "requested config); use a new --output_dir or the same config to resume.")
    vocab_path = os.path.join(output_dir, VOCAB_NAME)
    if vocab_file and os.path.exists(vocab_path) and not _same_bytes(vocab_file, vocab_path):
        raise PretrainingArgumentError(
            f"--vocab_file={vocab_file} differs from {vocab_path} of the run being resumed; use a new "
            "--output_dir or the same vocabulary.")


def _same_bytes(path_a: str, path_b: str) -> bool:
    with open(path_a, "rb") as a, open(path_b, "rb") as b:
        return a.read() == b.read()


def _prepare_output_dir(output_dir: str, config: BertConfig, vocab_file: str | None) -> None:
    """Writes bert_config.json and vocab.txt (after `_check_output_dir` passed)."""
    from bert_tf.checkpoints.model_dir import CONFIG_NAME, VOCAB_NAME
    os.makedirs(output_dir, exist_ok=True)
    config_path = os.path.join(output_dir, CONFIG_NAME)
    if not os.path.exists(config_path):
        file_io.write_text(config_path, config.to_json_string())
    vocab_path = os.path.join(output_dir, VOCAB_NAME)
    if vocab_file and not os.path.exists(vocab_path):
        file_io.copy_file(vocab_file, vocab_path)


def _find_corrupt_record(files: list[str]) -> str | None:
    """"<file>: ..." for the first file that does not read to its end, or None.

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


def run_pretraining(input_file: str, output_dir: str, *, bert_config_file: str | None = None,
                    preset: str | None = None, bert_config: BertConfig | None = None,
                    vocab_file: str | None = None, eval_input_file: str | None = None,
                    init_checkpoint: str | None = None, deterministic: bool = False, seed: int = 12345,
                    max_seq_length: int = 128, max_predictions_per_seq: int = 20, train_batch_size: int = 32,
                    eval_batch_size: int = 8, learning_rate: float = 5e-5, num_train_steps: int = 100000,
                    num_warmup_steps: int = 10000, save_checkpoints_steps: int = 1000, keep_checkpoint_max: int = 5,
                    steps_per_loop: int = 1000, max_eval_steps: int = 100, eval_every_steps: int = 0,
                    distribution_strategy: str = "one_device", tpu: str | None = None, num_gpus: int | None = None,
                    jit_compile: bool = False, mixed_precision: str = "float32", dynamic_masking: bool = False,
                    masked_lm_prob: float = 0.15, shuffle_buffer_size: int = 10000,
                    loop_callback: Callable | None = None):
    """Pretrains (or resumes pretraining) a BERT; arguments are the flags of the same names.

    `bert_config` (a `BertConfig`) may replace `bert_config_file`/`preset`.
    `max_eval_steps=0` reads the whole eval set. Returns the loop's
    `TrainingResult` (model, step, train and eval metrics, checkpoint).

    Raises:
      PretrainingArgumentError (a ValueError) naming the flag, before
      anything is written, for arguments that cannot work.
    """
    # --- checks that need no TensorFlow state --------------------------------------
    config = _bert_config(bert_config_file, preset, bert_config)
    if not input_file:
        raise PretrainingArgumentError("--input_file is required.")
    if not output_dir:
        raise PretrainingArgumentError("--output_dir is required.")
    for name, value in (("max_seq_length", max_seq_length), ("max_predictions_per_seq", max_predictions_per_seq),
                        ("train_batch_size", train_batch_size), ("eval_batch_size", eval_batch_size),
                        ("num_train_steps", num_train_steps), ("save_checkpoints_steps", save_checkpoints_steps),
                        ("keep_checkpoint_max", keep_checkpoint_max), ("steps_per_loop", steps_per_loop)):
        _positive(name, value)
    for name, value in (("num_warmup_steps", num_warmup_steps), ("max_eval_steps", max_eval_steps),
                        ("eval_every_steps", eval_every_steps)):
        _positive(name, value, allow_zero=True)
    if num_warmup_steps > num_train_steps:
        raise PretrainingArgumentError(
            f"--num_warmup_steps={num_warmup_steps} exceeds --num_train_steps={num_train_steps}.")
    if not learning_rate > 0:
        raise PretrainingArgumentError(f"--learning_rate must be positive, got {learning_rate}.")
    if max_seq_length > config.max_position_embeddings:
        raise PretrainingArgumentError(
            f"--max_seq_length={max_seq_length} exceeds the model's max_position_embeddings="
            f"{config.max_position_embeddings}.")
    if max_predictions_per_seq > max_seq_length:
        raise PretrainingArgumentError(
            f"--max_predictions_per_seq={max_predictions_per_seq} exceeds --max_seq_length={max_seq_length}.")
    if distribution_strategy not in STRATEGIES:
        raise PretrainingArgumentError(
            f"--distribution_strategy={distribution_strategy!r}: expected one of {', '.join(STRATEGIES)}.")
    if distribution_strategy == "tpu" and not tpu:
        raise PretrainingArgumentError("--distribution_strategy=tpu needs --tpu (a TPU name, grpc://host:port "
                                       "or 'local').")
    if tpu and distribution_strategy != "tpu":
        raise PretrainingArgumentError(f"--tpu={tpu!r} is only used with --distribution_strategy=tpu.")
    if mixed_precision not in PRECISION_POLICIES:
        raise PretrainingArgumentError(
            f"--mixed_precision={mixed_precision!r}: expected one of {', '.join(PRECISION_POLICIES)}.")
    if vocab_file:
        _check_vocab(vocab_file, config)
    if dynamic_masking and not vocab_file:
        raise PretrainingArgumentError("--dynamic_masking needs --vocab_file (for the [MASK] and special ids).")
    if not 0.0 < masked_lm_prob < 1.0:
        raise PretrainingArgumentError(f"--masked_lm_prob must be in (0, 1), got {masked_lm_prob}.")
    train_files = _resolve_files("input_file", input_file)
    eval_files = _resolve_files("eval_input_file", eval_input_file) if eval_input_file else None
    _check_output_dir(output_dir, config, vocab_file)

    import keras
    import tensorflow as tf

    from bert_tf import training
    from bert_tf.checkpoints import model_dir as model_dir_lib
    from bert_tf.data import DynamicMaskingConfig, pretraining_dataset
    from bert_tf.data.pretraining_dataset import check_record_format, detect_compression
    from bert_tf.models import BertEncoder, BertPretrainer, pretraining_losses

    # --- TensorFlow state: determinism, precision, then the strategy before any op runs -------
    # (a multi-worker strategy must configure collective ops before TensorFlow executes anything).
    if deterministic:
        training.enable_determinism(seed)
    previous_policy = keras.mixed_precision.global_policy()
    training.set_precision_policy(mixed_precision)
    try:
        try:
            strategy = training.get_strategy(distribution_strategy, num_gpus=num_gpus, tpu=tpu)
        except ValueError as e:
            raise PretrainingArgumentError(f"--distribution_strategy={distribution_strategy}: {e}") from None
        replicas = strategy.num_replicas_in_sync
        for name, value in (("train_batch_size", train_batch_size), ("eval_batch_size", eval_batch_size)):
            if value % replicas:
                raise PretrainingArgumentError(
                    f"--{name}={value} is not divisible by the {replicas} replicas of the "
                    f"{distribution_strategy} strategy.")

        # --- checks that read files with TensorFlow -------------------------------------------------
        for flag, files in (("input_file", train_files), ("eval_input_file", eval_files or [])):
            for path in files:
                try:
                    check_record_format(path, detect_compression(path), max_seq_length, max_predictions_per_seq,
                                        need_masked_lm=not dynamic_masking)
                except ValueError as e:
                    raise PretrainingArgumentError(f"--{flag}: {e}") from None
            # An endless (repeated) dataset of no records would wait forever for its first batch.
            if files and not any(os.path.getsize(path) for path in files):
                raise PretrainingArgumentError(f"--{flag}: no records in {', '.join(files)}.")
        if init_checkpoint:
            try:
                init_checkpoint = model_dir_lib.find_checkpoint(init_checkpoint)
            except FileNotFoundError as e:
                raise PretrainingArgumentError(f"--init_checkpoint: {e}") from None
        masking = None
        if dynamic_masking:
            try:
                masking = DynamicMaskingConfig.from_vocab_file(vocab_file, masked_lm_prob=masked_lm_prob)
            except ValueError as e:
                raise PretrainingArgumentError(f"--vocab_file (for --dynamic_masking): {e}") from None

        logging.info("Strategy %s: %d replica(s), %d worker(s); global batch %d (%d per replica).",
                     distribution_strategy, replicas, training.num_workers(strategy), train_batch_size,
                     train_batch_size // replicas)
        if training.is_chief(strategy):
            _prepare_output_dir(output_dir, config, vocab_file)

        data_seed = seed if deterministic else None

        def train_dataset_fn(input_context):
            return pretraining_dataset(train_files, train_batch_size, max_seq_length, max_predictions_per_seq,
                                       is_training=True, input_context=input_context,
                                       shuffle_buffer_size=shuffle_buffer_size, seed=data_seed,
                                       dynamic_masking=masking, check_files=False)

        def eval_dataset_fn(input_context):
            # Evaluation masks (when drawn) use a fixed seed, so evaluations are comparable.
            return pretraining_dataset(eval_files, eval_batch_size, max_seq_length, max_predictions_per_seq,
                                       is_training=False, input_context=input_context, seed=seed,
                                       dynamic_masking=masking, drop_remainder=False, check_files=False)

        def init_fn(model):
            if not init_checkpoint:
                return
            if model_dir_lib.has_pretraining_heads(init_checkpoint):
                model_dir_lib.restore(model, init_checkpoint)
                logging.info("Initialised the encoder and pretraining heads from %s.", init_checkpoint)
            else:
                model_dir_lib.restore(model.encoder, init_checkpoint)
                logging.info("Initialised the encoder from %s (new pretraining heads).", init_checkpoint)

        loop_config = training.TrainingConfig(
            num_train_steps=num_train_steps, learning_rate=learning_rate, num_warmup_steps=num_warmup_steps,
            steps_per_loop=steps_per_loop, save_checkpoints_steps=save_checkpoints_steps,
            keep_checkpoint_max=keep_checkpoint_max, eval_every_steps=eval_every_steps or None,
            max_eval_steps=max_eval_steps or None, jit_compile=jit_compile)
        try:
            return training.train(
                strategy, lambda: BertPretrainer(BertEncoder(config)), pretraining_losses, train_dataset_fn,
                output_dir, loop_config, eval_dataset_fn=eval_dataset_fn if eval_files else None,
                init_fn=init_fn, loop_callback=loop_callback)
        except tf.errors.DataLossError:
            # The first record of every file was checked; a file damaged further on fails here,
            # after the last checkpoint was written, which stays as it was.
            where = _find_corrupt_record(train_files + (eval_files or []))
            if where is None:
                raise
            latest = tf.train.latest_checkpoint(output_dir)
            raise PretrainingArgumentError(
                f"{where}; training stopped, the latest checkpoint ({latest or 'none'}) is kept.") from None
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


@cli.main_function("pretrain")
def main(argv):
    del argv  # Checked by cli.main_function.
    steps_per_loop = FLAGS.steps_per_loop
    if FLAGS.iterations_per_loop is not None:
        if FLAGS["steps_per_loop"].present and FLAGS.steps_per_loop != FLAGS.iterations_per_loop:
            raise app.UsageError(f"--iterations_per_loop={FLAGS.iterations_per_loop} and --steps_per_loop="
                                 f"{FLAGS.steps_per_loop} disagree; give one.")
        steps_per_loop = FLAGS.iterations_per_loop
    try:
        result = run_pretraining(
            input_file=FLAGS.input_file, output_dir=FLAGS.output_dir, bert_config_file=FLAGS.bert_config_file,
            preset=FLAGS.preset, vocab_file=FLAGS.vocab_file, eval_input_file=FLAGS.eval_input_file,
            init_checkpoint=FLAGS.init_checkpoint, deterministic=FLAGS.deterministic, seed=FLAGS.seed,
            max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
            learning_rate=FLAGS.learning_rate, num_train_steps=FLAGS.num_train_steps,
            num_warmup_steps=FLAGS.num_warmup_steps, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
            keep_checkpoint_max=FLAGS.keep_checkpoint_max, steps_per_loop=steps_per_loop,
            max_eval_steps=FLAGS.max_eval_steps, eval_every_steps=FLAGS.eval_every_steps,
            distribution_strategy=FLAGS.distribution_strategy, tpu=FLAGS.tpu, num_gpus=FLAGS.num_gpus,
            jit_compile=FLAGS.jit_compile, mixed_precision=FLAGS.mixed_precision,
            dynamic_masking=FLAGS.dynamic_masking, masked_lm_prob=FLAGS.masked_lm_prob,
            shuffle_buffer_size=FLAGS.shuffle_buffer_size)
    except NonFiniteLossError as e:
        # A failed run, not bad input: status 1.
        sys.exit(f"pretrain: error: {cli.one_line(e)}")
    logging.info("Done at step %d; latest checkpoint %s; eval %s.", result.step, result.checkpoint,
                 result.eval_metrics)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
