"""`run_pretraining`: the BERT pretraining job (masked LM + the records' sentence task) behind `experiments.pretrain`.

The job trains what the records hold (`SENTENCE_TASK_OBJECTIVES`): masked LM + next-sentence prediction
(BERT), masked LM + sentence-order prediction (ALBERT; the same 2-way head), or masked LM alone (RoBERTa's
full sentences: the sentence head is kept but frozen and its output unused).

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
from typing import TYPE_CHECKING

from absl import logging

from bert_tf import training
from bert_tf.checkpoints import model_source
from bert_tf.config import BertConfig
from bert_tf.data.pretraining_schema import MASKING_METHODS, UNIT_FEATURES
from bert_tf.errors import JobArgumentError, check_int
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.pretraining_data.knowledge_units import parse_masking_schedule
from bert_tf.tokenization.vocab import CLS_TOKEN, MASK_TOKEN, SEP_TOKEN
from bert_tf.training.runtime import RuntimeConfig, training_runtime

if TYPE_CHECKING:  # it loads TensorFlow
    from bert_tf.data.dynamic_masking import DynamicMaskingConfig


def resolve_bert_config(
    bert_config_file: str | None = None, preset: str | None = None, vocab_file: str | None = None
) -> BertConfig:
    """The `BertConfig` of `--bert_config_file` or `--preset` (exactly one of them).

    A preset's `vocab_size` is that of an English WordPiece vocabulary; with a `vocab_file`, the preset takes
    the vocabulary's size instead (logged), so a model of one's own vocabulary has no unused embedding rows.
    """
    given = [name for name, value in (("--bert_config_file", bert_config_file), ("--preset", preset)) if value]
    if len(given) != 1:
        raise JobArgumentError(
            f"Give exactly one of --bert_config_file and --preset (got {', '.join(given) or 'neither'})."
        )
    if bert_config_file:
        return model_source.read_config(bert_config_file)
    try:
        config = BertConfig.from_preset(preset)
    except ValueError as e:
        raise JobArgumentError(f"--preset: {e}") from None
    if vocab_file:
        size = len(model_source.read_vocab(vocab_file, required_tokens=()))
        logging.info(
            "--preset=%s: vocab_size=%d from --vocab_file=%s (instead of the preset's %d).",
            preset,
            size,
            vocab_file,
            config.vocab_size,
        )
        config = dataclasses.replace(config, vocab_size=size)
    return config


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
      masking: what dynamic masking masks: "token", "whole_word", "span" (SpanBERT), or
        "phrase"/"entity" (ERNIE; the records carry the units); static records keep the masking
        they were written with.
      masking_schedule: ERNIE's staged masking instead of `masking`, e.g.
        "token:0.3,phrase:0.3,entity:0.4": each mode for its fraction of the training steps.
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
    masking: str = "token"
    masking_schedule: str = ""

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
        if self.masking not in MASKING_METHODS:
            raise JobArgumentError(f"--masking must be one of {', '.join(MASKING_METHODS)}, got {self.masking!r}.")
        if self.masking != "token" and not self.dynamic_masking:
            raise JobArgumentError(
                f"--masking={self.masking} needs --dynamic_masking (static records keep the masking they were "
                "written with: tfrecords_tools.create_pretraining_data --masking)."
            )
        if self.masking_schedule:
            if not self.dynamic_masking or self.masking != "token":
                raise JobArgumentError(
                    "--masking_schedule needs --dynamic_masking and replaces --masking; give one of them."
                )
            try:
                parse_masking_schedule(self.masking_schedule)
            except ValueError as e:
                raise JobArgumentError(str(e)) from None

    @property
    def masking_modes(self) -> tuple:
        """The masking modes dynamic masking uses (`masking`, or those of the schedule)."""
        if not self.masking_schedule:
            return (self.masking,)
        return tuple(dict.fromkeys(mode for mode, _ in parse_masking_schedule(self.masking_schedule)))


# What the job trains for the sentence task of the records (`bert_tf.data.pretraining_features.sentence_task_of`).
SENTENCE_TASK_OBJECTIVES = {
    "nsp": "masked LM + next-sentence prediction (BERT)",
    "sop": "masked LM + sentence-order prediction (ALBERT)",
    "none": "masked LM only (RoBERTa full sentences: no sentence loss, the sentence head frozen)",
}


# The schedule of `run_pretraining(training_config=None)`, and the defaults of experiments.pretrain's flags (a
# `bert_tf.training.TrainingConfig`'s fields; BERT's optimizer: decay 0.01, clipping at norm 1.0, Adam without
# bias correction and epsilon 1e-6, as run_pretraining.py).
DEFAULT_SCHEDULE = dict(
    learning_rate=5e-5,
    adam_bias_correction=False,
    adam_epsilon=1e-6,
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
    bert_config: BertConfig,
    data: PretrainingDataConfig,
    training_config: training.TrainingConfig | None = None,
    runtime: RuntimeConfig | None = None,
    *,
    vocab_file: str | None = None,
    init_checkpoint: str | None = None,
    loop_callback: Callable | None = None,
) -> training.TrainingResult:
    """Pretrains (or resumes pretraining) a BERT in `output_dir`; returns the loop's `TrainingResult` (model,
    step, train and eval metrics, checkpoint). Arguments that cannot work raise `JobArgumentError` (a
    ValueError) naming the flag, before anything is written.

    Args:
      output_dir: checkpoints, summaries, bert_config.json, vocab.txt, eval_results.json; a run there resumes.
      bert_config: the `BertConfig` to train (`resolve_bert_config` reads the flags').
      data: see its class.
      training_config: the `bert_tf.training.TrainingConfig`, in steps (`num_train_steps`); None: `DEFAULT_SCHEDULE`.
      runtime: strategy, precision, seeds; None: `RuntimeConfig(seed=DEFAULT_SEED)`.
      vocab_file: the vocabulary the data was written with; copied into `output_dir`; `dynamic_masking` needs it.
      init_checkpoint: warm start from a TF2 model directory or checkpoint (the encoder, and the pretraining heads
        when it has them); ignored when resuming.
      loop_callback: the loop's `loop_callback(step, metrics)`.
    """
    training_config = _schedule_in_steps(training_config)
    runtime = runtime if runtime is not None else RuntimeConfig(seed=DEFAULT_SEED)
    train_files, eval_files, vocab = _check_arguments(output_dir, bert_config, data, vocab_file, init_checkpoint)
    # TensorFlow state: determinism, precision, then the strategy before any op runs.
    with training_runtime(
        runtime,
        batch_sizes={"train_batch_size": data.train_batch_size, "eval_batch_size": data.eval_batch_size},
        error=JobArgumentError,
    ) as strategy:
        sentence_task = _check_records(data, train_files, eval_files)
        training.check_microbatches(
            training_config.num_microbatches, data.train_batch_size, strategy.num_replicas_in_sync
        )
        init_checkpoint = _find_init_checkpoint(init_checkpoint)
        masking = _dynamic_masking(data, vocab_file, vocab)
        run = _PretrainingRun(
            output_dir,
            bert_config,
            data,
            training_config,
            runtime,
            train_files,
            eval_files,
            masking,
            init_checkpoint,
            sentence_task,
        )
        _log_run(run, strategy)
        if training.is_chief(strategy):
            _prepare_output_dir(output_dir, bert_config, vocab_file)
        result = _train(strategy, run, loop_callback)
        if training.is_chief(strategy):
            _write_final_outputs(run, result)
        return result


def _schedule_in_steps(training_config: training.TrainingConfig | None) -> training.TrainingConfig:
    """`training_config` (None: `DEFAULT_SCHEDULE`), which must give `num_train_steps`."""
    training_config = training_config if training_config is not None else training.TrainingConfig(**DEFAULT_SCHEDULE)
    if training_config.num_train_steps is None:
        raise JobArgumentError("--num_train_steps is required (the TFRecords' epochs are not counted).")
    return training_config


@dataclasses.dataclass(frozen=True)
class _PretrainingRun:
    """What `run_pretraining` checked and resolved, handed to its steps: the files, the masking, the warm start."""

    output_dir: str
    config: BertConfig
    data: PretrainingDataConfig
    training_config: training.TrainingConfig
    runtime: RuntimeConfig
    train_files: list
    eval_files: list | None
    masking: DynamicMaskingConfig | None  # `data.dynamic_masking`'s
    init_checkpoint: str | None
    sentence_task: str


def _log_run(run: _PretrainingRun, strategy) -> None:
    """Logs the objective and how the batch is spread over the replicas."""
    runtime, train_batch_size = run.runtime, run.data.train_batch_size
    logging.info("Training objective: %s.", SENTENCE_TASK_OBJECTIVES[run.sentence_task])
    logging.info(
        "Strategy %s: %d replica(s), %d worker(s); global batch %d (%d per replica).",
        runtime.distribution_strategy,
        strategy.num_replicas_in_sync,
        training.num_workers(strategy),
        train_batch_size,
        train_batch_size // strategy.num_replicas_in_sync,
    )


def _write_final_outputs(run: _PretrainingRun, result: training.TrainingResult) -> None:
    """The chief's last writes: the backend-neutral weights file, and the held-out baselines beside the figures."""
    # The backend-neutral copy of the final weights (bert_tf/checkpoints/weights_file.py).
    from bert_tf.checkpoints import weights_file

    weights_file.write_weights_file(run.output_dir, result.model, checkpoint=result.checkpoint)
    if result.eval_metrics is not None and not run.data.dynamic_masking:
        result.eval_metrics.update(_held_out_baselines(run, result.eval_metrics, result.step))


def evaluate_pretraining(
    output_dir: str,
    data: PretrainingDataConfig,
    runtime: RuntimeConfig | None = None,
    *,
    max_eval_steps: int | None = None,
    bert_config: BertConfig | None = None,
    vocab_file: str | None = None,
) -> training.TrainingResult:
    """Evaluates the latest checkpoint of the pretraining run in `output_dir` on `data.eval_input_file`.

    No schedule is needed: the run is resumed at its latest step and trains no step. The model is the
    directory's `bert_config.json` and `vocab.txt` unless `bert_config` / `vocab_file` are given. The
    result's `eval_metrics` hold the held-out figures and their baselines (see `run_pretraining`).
    """
    import tensorflow as tf

    if not output_dir:
        raise JobArgumentError("--output_dir is required.")
    if not data.eval_input_file:
        raise JobArgumentError("--eval_only needs --eval_input_file (the held-out TFRecords).")
    latest = tf.train.latest_checkpoint(output_dir)
    if latest is None:
        raise JobArgumentError(f"--output_dir: no checkpoint to evaluate in {output_dir}.")
    if bert_config is None:
        bert_config = model_source.read_config(os.path.join(output_dir, model_source.CONFIG_NAME), "output_dir")
    own_vocab = os.path.join(output_dir, model_source.VOCAB_NAME)
    if vocab_file is None and os.path.isfile(own_vocab):
        vocab_file = own_vocab
    step = int(latest.rsplit("-", 1)[-1])
    logging.info("Evaluating %s (step %d) on %s.", latest, step, data.eval_input_file)
    training_config = training.TrainingConfig(
        num_train_steps=step, num_warmup_steps=0, steps_per_loop=1, max_eval_steps=max_eval_steps
    )
    return run_pretraining(output_dir, bert_config, data, training_config, runtime, vocab_file=vocab_file)


# --- checks before TensorFlow runs ----------------------------------------------------


def _check_arguments(output_dir, config: BertConfig, data: PretrainingDataConfig, vocab_file, init_checkpoint=None):
    """The checks that need no TensorFlow state; returns the (train, eval or None) file lists and the vocabulary.

    A new model (no warm start, no run in `output_dir` to resume) has a table of the vocabulary's size, padded
    at most (`model_source.check_new_model_table`).

    The vocabulary (None without `vocab_file`) is read here once; dynamic masking takes its ids from it.
    """
    if not output_dir:
        raise JobArgumentError("--output_dir is required.")
    model_source.check_seq_length(data.max_seq_length, config)
    vocab = None
    if vocab_file:
        # [CLS]/[SEP] frame every record; [MASK] is what masked-LM inputs hold.
        vocab = model_source.read_vocab(vocab_file, required_tokens=(CLS_TOKEN, SEP_TOKEN, MASK_TOKEN))
        resuming = os.path.exists(os.path.join(output_dir, model_source.CONFIG_NAME))
        if init_checkpoint or resuming:
            model_source.check_compatible(config, len(vocab), vocab_file=vocab_file)
        else:
            model_source.check_new_model_table(config, len(vocab), vocab_file=vocab_file)
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


def _check_records(data: PretrainingDataConfig, train_files: list[str], eval_files: list[str] | None) -> str:
    """The first record of every file has the shapes of `data`; neither file set is empty; all files hold one
    sentence task, which is returned."""
    import tensorflow as tf

    from bert_tf.data.pretraining_dataset import check_record_format, detect_compression

    sentence_task, first_path = None, None
    for flag, files in (("input_file", train_files), ("eval_input_file", eval_files or [])):
        for path in files:
            try:
                task = check_record_format(
                    path,
                    detect_compression(path),
                    data.max_seq_length,
                    data.max_predictions_per_seq,
                    need_masked_lm=not data.dynamic_masking,
                    unit_features=[UNIT_FEATURES[m] for m in data.masking_modes if m in UNIT_FEATURES]
                    if data.dynamic_masking
                    else (),
                )
            except ValueError as e:
                raise JobArgumentError(f"--{flag}: {e}") from None
            if task is not None and sentence_task is not None and task != sentence_task:
                raise JobArgumentError(
                    f"--{flag}: {path} holds records of --sentence_task={task} but {first_path} of "
                    f"--sentence_task={sentence_task}; train on one sentence task."
                )
            if task is not None and sentence_task is None:
                sentence_task, first_path = task, path
        # An endless (repeated) dataset of no records would wait forever for its first batch.
        if files and not any(tf.io.gfile.stat(path).length for path in files):  # gs:// paths too
            raise JobArgumentError(f"--{flag}: no records in {', '.join(files)}.")
    return sentence_task or "nsp"


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
        schedule = parse_masking_schedule(data.masking_schedule) if data.masking_schedule else ()
        return DynamicMaskingConfig.from_vocab(
            vocab,
            vocab_file,
            masked_lm_prob=data.masked_lm_prob,
            # Evaluation masks with the schedule's last mode; training follows the schedule (`_scheduled`).
            masking=schedule[-1][0] if schedule else data.masking,
            schedule=schedule,
        )
    except ValueError as e:
        raise JobArgumentError(f"--vocab_file (for --dynamic_masking): {e}") from None


def _scheduled(masking, num_train_steps: int, input_context):
    """`masking` with its schedule counted in the batches one input pipeline yields over training.

    Each pipeline yields one batch per replica it feeds per step, so its stage changes at the same step
    as every other pipeline's.
    """
    if masking is None or not masking.schedule:
        return masking
    per_step = input_context.num_replicas_in_sync // input_context.num_input_pipelines if input_context else 1
    return dataclasses.replace(masking, schedule_batches=num_train_steps * max(per_step, 1))


# --- writing and training ----------------------------------------------------------------


def _prepare_output_dir(output_dir: str, config: BertConfig, vocab_file: str | None) -> None:
    """Writes bert_config.json and vocab.txt unless resuming (after `check_resumable` passed)."""
    from bert_tf.checkpoints.model_dir import write_model_files

    write_model_files(output_dir, config, vocab_file, keep_existing=True)


def _dataset_fns(run: _PretrainingRun):
    """The loop's `(train_dataset_fn, eval_dataset_fn)`; the second is None without held-out files."""
    from bert_tf.data.pretraining_dataset import pretraining_dataset

    data, masking = run.data, run.masking
    shapes = (data.max_seq_length, data.max_predictions_per_seq)

    def train_dataset_fn(input_context):
        return pretraining_dataset(
            run.train_files,
            data.train_batch_size,
            *shapes,
            training=True,
            input_context=input_context,
            shuffle_buffer_size=data.shuffle_buffer_size,
            seed=run.runtime.seed if run.runtime.deterministic else None,
            dynamic_masking=_scheduled(masking, run.training_config.num_train_steps, input_context),
            check_files=False,
            sentence_task=run.sentence_task,
        )

    def eval_dataset_fn(input_context):
        # Evaluation masks (when drawn) use a fixed seed, so evaluations are comparable.
        return pretraining_dataset(
            run.eval_files,
            data.eval_batch_size,
            *shapes,
            training=False,
            input_context=input_context,
            seed=run.runtime.seed,
            dynamic_masking=dataclasses.replace(masking, schedule=()) if masking is not None else None,
            drop_remainder=False,
            check_files=False,
            sentence_task=run.sentence_task,
        )

    return train_dataset_fn, eval_dataset_fn if run.eval_files else None


def _init_fn(init_checkpoint: str | None):
    """The loop's `init_fn`: the warm start from `init_checkpoint` (with its pretraining heads where it has them)."""
    from bert_tf.checkpoints import model_dir as model_dir_lib

    def init_fn(model):
        if not init_checkpoint:
            return
        if model_dir_lib.has_pretraining_heads(init_checkpoint):
            model_dir_lib.restore(model, init_checkpoint)
            logging.info("Initialised the encoder and pretraining heads from %s.", init_checkpoint)
        else:
            model_dir_lib.restore(model.encoder, init_checkpoint)
            logging.info("Initialised the encoder from %s (new pretraining heads).", init_checkpoint)

    return init_fn


def _model_fn(config: BertConfig, sentence_task: str):
    from bert_tf.models import BertEncoder, BertPretrainer

    def model_fn():
        pretrainer = BertPretrainer(BertEncoder(config))
        if sentence_task == "none":
            # No sentence loss: the head gets no gradient; frozen, it is neither decayed nor given optimizer
            # slots, and stays in the checkpoint as initialised, so every loader finds the usual layout.
            pretrainer.next_sentence.trainable = False
        return pretrainer

    return model_fn


def _train(strategy, run: _PretrainingRun, loop_callback):
    """Runs the loop; a corrupt record met while training is a `JobArgumentError` naming the file."""
    import tensorflow as tf

    from bert_tf.checkpoints import model_dir as model_dir_lib
    from bert_tf.models import pretraining_losses

    train_dataset_fn, eval_dataset_fn = _dataset_fns(run)
    try:
        return training.train(
            strategy,
            _model_fn(run.config, run.sentence_task),
            pretraining_losses,
            train_dataset_fn,
            run.output_dir,
            run.training_config,
            eval_dataset_fn=eval_dataset_fn,
            init_fn=_init_fn(run.init_checkpoint),
            loop_callback=loop_callback,
            jit_compile=run.runtime.jit_compile,
            preemption=run.runtime.preemption_watcher(),
        )
    except tf.errors.DataLossError:
        # The first record of every file was checked; a file damaged further on fails here,
        # after the last checkpoint was written, which stays as it was.
        where = _find_corrupt_record(run.train_files + (run.eval_files or []))
        if where is None:
            raise
        latest = model_dir_lib.latest_checkpoint(run.output_dir)
        raise JobArgumentError(
            f"{where}; training stopped, the latest checkpoint ({latest or 'none'}) is kept."
        ) from None


# At most this many training records are counted for the unigram baseline: enough for the frequencies of the
# common tokens (which decide its accuracy), few enough that a large corpus adds seconds, not hours.
BASELINE_TRAIN_RECORDS = 100_000


def _held_out_baselines(run: _PretrainingRun, metrics: dict, step: int) -> dict:
    """The yardsticks of the held-out figures: what a model that ignores its input scores.

    `mlm_unigram_accuracy` / `mlm_unigram_loss`: always predicting the masked tokens' unigram distribution
    counted on (the first `BASELINE_TRAIN_RECORDS` records of) the training TFRecords;
    `nsp_majority_accuracy` / `nsp_prior_loss` (`sop_...` for sentence-order records, none without a sentence
    task): always answering the held-out labels' frequencies. Scored
    on the records the evaluation read (the first `max_eval_steps` batches, or all). Added to
    eval_results.json and logged in one line beside the model's figures.
    """
    from bert_tf import file_io

    try:
        unigram, sentence = _score_baselines(run)
    except ValueError as e:  # e.g. no masked positions in the held-out records
        logging.warning("No held-out baselines: %s", e)
        return {}
    baselines = {"mlm_unigram_accuracy": unigram.accuracy, "mlm_unigram_loss": unigram.loss}
    task = run.sentence_task
    if sentence is not None:
        baselines.update({f"{task}_majority_accuracy": sentence.accuracy, f"{task}_prior_loss": sentence.loss})
    # The loop wrote eval_results.json as `dict(metrics, step=step)`; the baselines join it.
    file_io.write_json(
        os.path.join(run.output_dir, training.EVAL_RESULTS_NAME),
        dict(metrics, **baselines, step=step),
        sort_keys=True,
        allow_nan=True,
    )
    logging.info("%s.", _baselines_line(metrics, unigram, sentence, task))
    return baselines


def _score_baselines(run: _PretrainingRun):
    """`(unigram, sentence)`: the MLM unigram baseline and the sentence task's (None without one)."""
    from bert_tf.data.unigram_baseline import next_sentence_baseline, unigram_baseline

    data, max_eval_steps = run.data, run.training_config.max_eval_steps
    eval_records = max_eval_steps * data.eval_batch_size if max_eval_steps else None
    shapes = (data.max_seq_length, data.max_predictions_per_seq)
    unigram = unigram_baseline(
        run.train_files,
        run.eval_files,
        *shapes,
        run.config.vocab_size,
        max_train_records=BASELINE_TRAIN_RECORDS,
        max_eval_records=eval_records,
        sentence_task=run.sentence_task,
    )
    sentence = None
    if run.sentence_task != "none":
        sentence = next_sentence_baseline(
            run.eval_files, *shapes, max_records=eval_records, sentence_task=run.sentence_task
        )
    return unigram, sentence


def _baselines_line(metrics: dict, unigram, sentence, sentence_task: str) -> str:
    """The log line of the held-out figures beside their baselines."""
    line = (
        f"Held-out: MLM accuracy {metrics.get('mlm_accuracy', float('nan')):.4f} (unigram baseline "
        f"{unigram.accuracy:.4f}), MLM loss {metrics.get('mlm_loss', float('nan')):.4f} (unigram {unigram.loss:.4f})"
    )
    if sentence is not None:
        name = sentence_task.upper()
        line += (
            f"; {name} accuracy {metrics.get(f'{sentence_task}_accuracy', float('nan')):.4f} (majority label "
            f"{sentence.accuracy:.4f}), {name} loss {metrics.get(f'{sentence_task}_loss', float('nan')):.4f} "
            f"(label prior {sentence.loss:.4f})"
        )
    return line


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
