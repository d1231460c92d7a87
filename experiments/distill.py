"""Distills a fine-tuned BERT (the teacher) into a smaller student on the same data.

    # A 3-layer student of the teacher's width, started from 3 of its layers (DistilBERT's way)
    python -m experiments.distill --teacher_dir=runs/sst --student_num_layers=3 \\
        --train_file=train.tsv --eval_file=dev.tsv --text_a_column=sentence --label_column=label \\
        --output_dir=runs/sst_3_layers --learning_rate=1e-4 --num_train_epochs=3

    # The same student through a 4-layer one: layers dropped a few at a time
    python -m experiments.distill --teacher_dir=runs/sst --student_num_layers=3 --intermediate_num_layers=4 \\
        --train_file=train.tsv --eval_file=dev.tsv --text_a_column=sentence --label_column=label \\
        --output_dir=runs/sst_3_layers_via_4 --learning_rate=1e-4 --num_train_epochs=3

    # A smaller pretrained encoder (with the teacher's vocabulary) as the student, plus unlabelled text
    python -m experiments.distill --teacher_dir=runs/sst --student_model_dir=models/small \\
        --train_file=train.tsv --eval_file=dev.tsv --unlabeled_file=more_text.txt --output_dir=runs/sst_small

The teacher is a model directory that `experiments.finetune` wrote (classification, sentence pairs,
regression or tagging); its task, labels, vocabulary and --max_seq_length carry over. The data flags are
`experiments.finetune`'s. The loss is `--alpha` times the KL divergence to the teacher's soft targets at
`--temperature` (times T^2) plus `1 - alpha` times the loss on the labels, plus `--hidden_loss_weight` times
TinyBERT's hidden-state loss. Training is the fine-tuning loop's (strategies, length buckets); the same command
resumes a killed run. --output_dir becomes a fine-tuned model directory: evaluate it with
`experiments.finetune --do_eval --output_dir=...`, export it with `experiments.export --model_dir=...`.
See docs/distillation.md.
"""

from absl import flags

from bert_tf import cli, errors
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    job_flags.define_runtime_flags()

    flags.DEFINE_string("teacher_dir", None, "The teacher: a model directory that experiments.finetune trained.")
    flags.DEFINE_string("output_dir", None, "The student's model directory (new or empty; a killed run resumes).")

    # Student.
    flags.DEFINE_integer(
        "student_num_layers",
        None,
        "A student of the teacher's width with this many layers, initialised from that many of the teacher's "
        "layers, evenly spaced (first and last kept), and its embeddings, pooler and head.",
    )
    flags.DEFINE_string(
        "student_model_dir", None, "A smaller pretrained encoder (model directory with the teacher's vocab.txt)."
    )
    flags.DEFINE_string("student_bert_config_file", None, "bert_config.json of a randomly initialised student.")
    flags.DEFINE_list(
        "intermediate_num_layers",
        [],
        "With --student_num_layers: deeper students distilled first, deepest first, each starting from evenly "
        "spaced layers of the model before it, the student from the last (layers dropped a few at a time).",
    )

    # Losses.
    flags.DEFINE_float("temperature", 2.0, "Temperature of the teacher's soft targets.")
    flags.DEFINE_float("alpha", 0.5, "Weight of the soft-target loss; the hard-label loss has 1 - alpha.")
    flags.DEFINE_float(
        "hidden_loss_weight",
        0.0,
        "Weight of the hidden-state MSE (TinyBERT), student layer i against the teacher layer it maps to; a "
        "student of another width goes through a learned projection (TinyBERT's W_h), not saved with it. 0 = off.",
    )
    flags.DEFINE_string(
        "unlabeled_file",
        None,
        "More text that only the teacher labels: .txt (one text per line) or the training file's format.",
    )
    flags.DEFINE_integer(
        "augmented_copies",
        0,
        "Altered copies of each training text (15% of words dropped, half cropped to a span of at least half) "
        "that only the teacher labels: TinyBERT's augmentation without a second model. 0 = none.",
    )
    define_data_and_schedule_flags()
    flags.DEFINE_string("predict_file", None, "Prediction data (labels optional), same formats.")
    flags.DEFINE_string("tfds_predict_split", None, "TFDS split for prediction.")
    flags.DEFINE_integer("bucket_width", 16, "Pad batches to multiples of this; 0 = every batch at --max_seq_length.")
    flags.DEFINE_float("dropout_rate", None, "Dropout before the output layer (default: hidden_dropout_prob).")
    flags.DEFINE_boolean("do_eval", True, "Evaluate the student and the teacher on --eval_file.")
    flags.DEFINE_boolean("do_predict", False, "Predict on --predict_file.")
    flags.DEFINE_integer("predict_batch_size", None, "Prediction batch size (default: --eval_batch_size).")


def define_data_and_schedule_flags():
    """experiments.finetune's data, task and schedule flags (shared with experiments.distill_frontier)."""
    from bert_tf.data.finetuning_readers import TEXT_FORMATS
    from bert_tf.jobs.finetuning_config import DEFAULT_SCHEDULE

    schedule = DEFAULT_SCHEDULE
    # Data: experiments.finetune's flags.
    flags.DEFINE_string("train_file", None, "Training data: TSV/CSV/JSONL or CoNLL columns.")
    flags.DEFINE_string("eval_file", None, "Evaluation data (labelled), same formats.")
    flags.DEFINE_string("tfds_name", None, "A prepared TFDS text dataset instead of files.")
    flags.DEFINE_string("tfds_data_dir", None, "The TFDS data directory.")
    flags.DEFINE_string("tfds_train_split", "train", "TFDS split for training.")
    flags.DEFINE_string("tfds_eval_split", None, "TFDS split for evaluation.")
    flags.DEFINE_string("text_a_column", None, "First text column (name or 0-based index). Default: text_a.")
    flags.DEFINE_string("text_b_column", None, "Second text column for sentence pairs. Default: text_b.")
    flags.DEFINE_string("label_column", None, "Label column. Default: label.")
    flags.DEFINE_enum("file_format", None, TEXT_FORMATS, "Format of text files (default: from the extension).")
    flags.DEFINE_boolean("has_header", True, "Whether TSV/CSV files start with a header row.")
    flags.DEFINE_integer("conll_word_column", 0, "CoNLL files: the word column.")
    flags.DEFINE_integer("conll_label_column", -1, "CoNLL files: the tag column (-1 = last).")
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case and strip accents (uncased teachers).")
    flags.DEFINE_integer("max_seq_length", None, "Packed sequence length (default: the teacher's).")
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
    flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size (and of the teacher's labelling pass).")

    # Schedule: experiments.finetune's.
    flags.DEFINE_float("learning_rate", schedule["learning_rate"], "Peak learning rate of AdamW.")
    flags.DEFINE_float("num_train_epochs", schedule["num_train_epochs"], "Epochs over the training features.")
    flags.DEFINE_integer("num_train_steps", None, "Training steps; overrides --num_train_epochs.")
    flags.DEFINE_float("warmup_proportion", schedule["warmup_proportion"], "Fraction of steps of warm-up.")
    flags.DEFINE_float("weight_decay_rate", schedule["weight_decay_rate"], "Decoupled weight decay.")
    flags.DEFINE_float("clip_norm", schedule["clip_norm"], "Global gradient-norm clipping (0 = none).")
    flags.DEFINE_integer("steps_per_loop", schedule["steps_per_loop"], "Steps per compiled loop call.")
    job_flags.define_num_microbatches_flag()
    job_flags.define_adam_flags(schedule)
    flags.DEFINE_integer("save_checkpoints_steps", schedule["save_checkpoints_steps"], "Checkpoint interval.")
    flags.DEFINE_integer("keep_checkpoint_max", schedule["keep_checkpoint_max"], "Checkpoints kept.")


def _column(value):
    return int(value) if value is not None and value.lstrip("-").isdigit() else value


def data_config_from_flags():
    """The `FinetuningDataConfig` of the parsed data flags; --train_file (or --tfds_name) is required."""
    from bert_tf.jobs.finetuning_config import FinetuningDataConfig

    columns = ("text_a_column", "text_b_column", "label_column")
    data = job_flags.config_from_flags(FinetuningDataConfig, **{name: _column(FLAGS[name].value) for name in columns})
    if not (data.train_file or data.tfds_name):
        raise errors.BadInputError("--train_file (or --tfds_name) is required.")
    return data


# Bad input (a DataError is a ValueError) is one clear line instead of a traceback.
@cli.main_function("distill", bad_input=(ValueError, FileNotFoundError, FileExistsError))
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.jobs import distillation as job
    from bert_tf.training import RuntimeConfig, TrainingConfig

    cli.require_flags("teacher_dir", "output_dir")
    config = job_flags.config_from_flags(job.DistillationConfig)
    student = job_flags.config_from_flags(
        job.StudentConfig, intermediate_num_layers=job_flags.integer_list("intermediate_num_layers")
    )
    data = data_config_from_flags()
    training_config = job_flags.config_from_flags(TrainingConfig)
    runtime = job_flags.config_from_flags(RuntimeConfig)
    results = job.run_distillation(
        FLAGS.output_dir,
        config,
        student,
        data,
        training_config,
        runtime,
        do_eval=FLAGS.do_eval,
        do_predict=FLAGS.do_predict,
    )
    if results:
        print("***** Eval results: teacher, student *****")
        for key in sorted(results["teacher"]):
            print(f"{key} = {results['teacher'][key]}, {results['student'].get(key)}")


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
