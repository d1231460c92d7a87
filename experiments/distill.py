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
TinyBERT's hidden-state loss. A teacher fine-tuned with --long_text=windows or head_tail gives soft targets per
document, and the student trains on the same cut (--long_text and its options are the teacher's). Training is
the fine-tuning loop's (strategies; packed rows by default: the teacher's labelling pass, the training and the
evaluations; --nopacking: one example a row in length buckets; --hidden_loss_weight and a teacher's windows take
one example a row, logged); the same command resumes a killed run. --output_dir becomes a fine-tuned model
directory: evaluate it with `experiments.finetune --do_eval --output_dir=...`, export it with
`experiments.export --model_dir=...`.
See docs/distillation.md.
"""

import os

from absl import flags

from bert_tf import cli, errors
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    job_flags.define_runtime_flags()
    job_flags.define(
        "teacher_dir",
        "output_dir",
        notes={"output_dir": "The student's model directory (new or empty; a killed run resumes)."},
    )

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

    # Losses.
    job_flags.define(
        "temperature",
        "alpha",
        "intermediate_num_layers",
        notes={"intermediate_num_layers": "With --student_num_layers."},
    )
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
    job_flags.define(
        *job_flags.PREDICTION_FLAGS,
        "do_eval",
        "bucket_width",
        "dropout_rate",
        notes={"do_eval": "The student's and the teacher's, side by side."},
        defaults={"do_eval": (True, "On by default here: a student is read beside its teacher.")},
    )
    job_flags.define_packing_flag()
    job_flags.define_long_text_flags(
        long_text_help="Default here: the teacher's (its task_config.json), which the student always reads with: "
        "the teacher's soft targets are per document, pooled over windows as it was trained. A value that differs "
        "from the teacher's is refused."
    )


def long_text_config_from_flags():
    """None when no --long_text flag is given (the teacher's); else the teacher's, with the flags given."""
    from bert_tf.checkpoints.model_source import read_task_config

    names = ("long_text", "window_stride", "window_pooling", "max_windows")
    if not any(FLAGS[name].present for name in names):
        return None
    recorded = read_task_config(FLAGS.teacher_dir) if os.path.isdir(FLAGS.teacher_dir) else None
    return job_flags.long_text_config((recorded or {}).get("long_text"))


def define_data_and_schedule_flags():
    """experiments.finetune's data, task and schedule flags (shared with experiments.distill_frontier)."""
    from bert_tf.jobs.finetuning.config import DEFAULT_SCHEDULE

    job_flags.define(
        *job_flags.FINETUNING_DATA_FLAGS,
        "do_lower_case",
        "max_seq_length",
        notes={"eval_batch_size": "Also the batch size of the teacher's labelling pass."},
        defaults={"max_seq_length": (None, "Default here: the teacher's.")},
    )
    job_flags.define(*job_flags.FINETUNING_SCHEDULE_FLAGS, schedule=DEFAULT_SCHEDULE)
    job_flags.define_num_microbatches_flag()
    job_flags.define_adam_flags(DEFAULT_SCHEDULE)


def data_config_from_flags():
    """The `FinetuningDataConfig` of the parsed data flags; --train_file (or --tfds_name) is required."""
    data = job_flags.finetuning_data_config()
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
    config = job_flags.config_from_flags(job.DistillationConfig, long_text_config=long_text_config_from_flags())
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
