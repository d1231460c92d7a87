r"""BERT pretraining (masked LM + the records' sentence task) from TFRecords.

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
script) writes; the job trains the sentence task the records hold (their
`--sentence_task`: next-sentence prediction, ALBERT's sentence order, or none
for RoBERTa's full sentences) and logs which. The optimizer is BERT's: AdamW
(decay 0.01, not on LayerNorm and biases), linear warm-up then linear decay to
0, clipping at norm 1.0; `--optimizer=lamb` gives LAMB with the same schedule.
`--dynamic_masking --masking=whole_word|span|phrase|entity` re-masks whole words,
SpanBERT spans or ERNIE's phrases and entities; `--masking_schedule` stages them.
docs/pretraining_objectives.md describes each choice.

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

`--preset` with `--vocab_file` takes vocab_size from the vocabulary (one log
line says so); a --bert_config_file whose vocab_size exceeds a new model's
vocabulary padded to a multiple of 128 is refused, naming both numbers.

The evaluation reports, beside the model's held-out MLM and NSP figures, what
a model that ignores its input scores: the unigram baseline of the masked
tokens (fitted on the training TFRecords) and the majority next-sentence
label (one log line, and `mlm_unigram_accuracy`, `mlm_unigram_loss`,
`nsp_majority_accuracy`, `nsp_prior_loss` in eval_results.json).

Evaluate only (the latest checkpoint of --output_dir; no schedule flags, the
model and vocabulary are the directory's):

    python -m experiments.pretrain --eval_only --output_dir=runs/pretrain \
      --input_file='runs/data/train-*.tfrecord' --eval_input_file=runs/data/eval.tfrecord

Differences from run_pretraining.py: there is no --do_train/--do_eval (it
trains to --num_train_steps, then evaluates if --eval_input_file is given;
--eval_only only evaluates), and --init_checkpoint takes a TF2 checkpoint or
model directory (convert google-research checkpoints with
`python -m experiments.convert`).

docs/pretraining.md walks the whole way: corpus, vocabulary, TFRecords,
pretraining on TPUs or several GPUs or hosts, evaluation, export, fine-tuning.

Also usable as a library: `bert_tf.jobs.pretrain.run_pretraining` takes
the flags grouped into config objects and returns the `TrainingResult`.
"""

from __future__ import annotations

import sys

from absl import app, flags, logging

from bert_tf import cli
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    # The job's modules load TensorFlow: imported here, after `cli.run` has quieted its start-up.
    from bert_tf.jobs import pretrain as pretraining
    from bert_tf.training.config import OPTIMIZERS

    job_flags.define_runtime_flags()
    schedule = pretraining.DEFAULT_SCHEDULE
    job_flags.define(
        "input_file",
        "output_dir",
        "bert_config_file",
        "vocab_file",
        "max_seq_length",
        "max_predictions_per_seq",
        "train_batch_size",
        "eval_batch_size",
        notes={
            "input_file": "The training TFRecords (run_pretraining.py's flag).",
            "output_dir": "Checkpoints, summaries, bert_config.json, vocab.txt and eval_results.json are written "
            "there; an existing run there is resumed.",
            "bert_config_file": "The model to train.",
            "vocab_file": "The one the data was written with; copied into --output_dir.",
            "max_seq_length": "The TFRecords' length.",
            "max_predictions_per_seq": "The TFRecords' number.",
        },
    )
    flags.DEFINE_string("eval_input_file", None, "Held-out TFRecord files for evaluation (comma-separated globs).")
    flags.DEFINE_string("preset", None, "A named BertConfig preset (e.g. bert_mini) instead of --bert_config_file.")
    job_flags.define(
        "init_checkpoint",
        notes={
            "init_checkpoint": "Here a warm start, as run_pretraining.py's: the encoder, and the pretraining heads "
            "when it has them, with a new schedule. Ignored when resuming."
        },
    )
    job_flags.define(
        "learning_rate",
        "num_train_steps",
        "save_checkpoints_steps",
        "keep_checkpoint_max",
        "steps_per_loop",
        "eval_every_steps",
        schedule=schedule,
    )
    flags.DEFINE_integer("num_warmup_steps", schedule["num_warmup_steps"], "Linear warm-up steps.")
    job_flags.define_num_microbatches_flag()
    job_flags.define_adam_flags(schedule)
    flags.DEFINE_integer("iterations_per_loop", None, "Alias of --steps_per_loop (run_pretraining.py's name).")
    flags.DEFINE_integer("max_eval_steps", schedule["max_eval_steps"], "Evaluation batches (0: the whole eval set).")
    flags.DEFINE_bool("dynamic_masking", False, "Re-mask each batch as it is read (needs --vocab_file).")
    job_flags.define(
        "masked_lm_prob",
        "masking",
        notes={
            "masked_lm_prob": "With --dynamic_masking.",
            "masking": "With --dynamic_masking (static records keep the masking they were written with); for "
            "phrase/entity the records carry the units: create_pretraining_data --masking=phrase|entity "
            "--nodo_masking.",
        },
    )
    flags.DEFINE_string(
        "masking_schedule",
        "",
        "ERNIE's staged masking with --dynamic_masking, instead of --masking: MODE:FRACTION,... over the "
        "training steps, e.g. token:0.3,phrase:0.3,entity:0.4 (resumes at the same stage).",
    )
    flags.DEFINE_integer("shuffle_buffer_size", 10000, "Records in the training shuffle buffer.")
    flags.DEFINE_bool(
        "eval_only",
        False,
        "Only evaluate the latest checkpoint of --output_dir on --eval_input_file (with the baselines); "
        "schedule flags are ignored, the model and vocabulary default to the directory's.",
    )
    flags.DEFINE_enum(
        "optimizer",
        "adamw",
        OPTIMIZERS,
        "adamw: BERT's AdamW; lamb: LAMB (You et al., 2019), AdamW's moments with a layer-wise trust ratio, for "
        "large batches (docs/pretraining_objectives.md has the recipe).",
    )


def _steps_per_loop() -> int:
    """--steps_per_loop, or its alias --iterations_per_loop (run_pretraining.py's name)."""
    if FLAGS.iterations_per_loop is None:
        return FLAGS.steps_per_loop
    if FLAGS["steps_per_loop"].present and FLAGS.steps_per_loop != FLAGS.iterations_per_loop:
        raise app.UsageError(
            f"--iterations_per_loop={FLAGS.iterations_per_loop} and --steps_per_loop="
            f"{FLAGS.steps_per_loop} disagree; give one."
        )
    return FLAGS.iterations_per_loop


@cli.main_function("pretrain")
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.jobs import pretrain as pretraining
    from bert_tf.training import NonFiniteLossError, RuntimeConfig, TrainingConfig

    if FLAGS.eval_only:
        _evaluate_only()
        return
    steps_per_loop = _steps_per_loop()
    # Each config checks its flags as it is built; run_pretraining checks the files and the model.
    bert_config = pretraining.resolve_bert_config(FLAGS.bert_config_file, FLAGS.preset, FLAGS.vocab_file)
    data = job_flags.config_from_flags(pretraining.PretrainingDataConfig)
    training_config = job_flags.config_from_flags(TrainingConfig, steps_per_loop=steps_per_loop)
    runtime = job_flags.config_from_flags(RuntimeConfig)
    try:
        result = pretraining.run_pretraining(
            FLAGS.output_dir,
            bert_config,
            data,
            training_config,
            runtime,
            vocab_file=FLAGS.vocab_file,
            init_checkpoint=FLAGS.init_checkpoint,
        )
    except NonFiniteLossError as e:
        # A failed run, not bad input: status 1.
        sys.exit(f"pretrain: error: {cli.one_line(e)}")
    logging.info("Done at step %d; latest checkpoint %s; eval %s.", result.step, result.checkpoint, result.eval_metrics)


def _evaluate_only():
    """--eval_only: the latest checkpoint of --output_dir on --eval_input_file; no schedule flag is read."""
    from bert_tf.jobs import pretrain as pretraining
    from bert_tf.training import RuntimeConfig

    bert_config = None
    if FLAGS.bert_config_file or FLAGS.preset:
        bert_config = pretraining.resolve_bert_config(FLAGS.bert_config_file, FLAGS.preset, FLAGS.vocab_file)
    result = pretraining.evaluate_pretraining(
        FLAGS.output_dir,
        job_flags.config_from_flags(pretraining.PretrainingDataConfig),
        job_flags.config_from_flags(RuntimeConfig),
        max_eval_steps=FLAGS.max_eval_steps,
        bert_config=bert_config,
        vocab_file=FLAGS.vocab_file,
    )
    logging.info("Evaluated step %d: %s.", result.step, result.eval_metrics)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
