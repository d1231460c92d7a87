"""The speed-accuracy frontier of a fine-tuned model on your data: students of several depths, int8, bfloat16.

    python -m experiments.distill_frontier --teacher_dir=runs/sst --output_dir=runs/frontier \\
        --train_file=train.tsv --eval_file=dev.tsv --text_a_column=sentence --label_column=label \\
        --student_layers=1,2,3 --forms=float32,bfloat16,int8 --num_train_epochs=3 --learning_rate=1e-4

Distils a student of each depth in --student_layers from the teacher, once per seed of --seeds
(`experiments.distill`'s job, into <output_dir>/students/layers_<n>/seed_<s>; rerunning resumes what is unfinished),
converts the teacher and every student to each inference form of --forms, measures the held-out metric, exports each
encoder as a SavedModel and times all of them interleaved in one process (--speed_rounds rounds over the first
--speed_examples evaluation texts). Writes report.md, report.json and frontier.png (metric against sequences per
second) to --output_dir. The data, task and schedule flags are experiments.distill's (and experiments.finetune's).
See docs/distillation.md.
"""

from absl import flags

from bert_tf import cli
from experiments import distill, job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this tool's flags (at run time, so importing the module defines none)."""
    from bert_tf.distillation.inference import INFERENCE_FORMS

    job_flags.define_runtime_flags()
    job_flags.define("teacher_dir", "output_dir", notes={"output_dir": "The students, exports and report go there."})
    flags.DEFINE_list("student_layers", ["1", "2", "3"], "Depths of the students (each below the teacher's).")
    flags.DEFINE_list("forms", list(INFERENCE_FORMS), "Inference forms measured for every model.")
    flags.DEFINE_list(
        "seeds",
        [],
        "Distil each student once per seed and report the mean metric, each seed's beside it (a claim that one "
        "student beats another needs three); empty: --seed alone.",
    )
    job_flags.define(
        "temperature",
        "alpha",
        "intermediate_num_layers",
        notes={"intermediate_num_layers": "Each student goes through those above its depth."},
    )
    flags.DEFINE_integer("speed_examples", 512, "Evaluation texts timed per model and round.")
    flags.DEFINE_integer("speed_batch_size", 32, "Batch size of the timed batches.")
    flags.DEFINE_integer("speed_rounds", 3, "Interleaved timing rounds; the median is reported.")
    job_flags.define_packing_flag()
    distill.define_data_and_schedule_flags()


@cli.main_function("distill_frontier", bad_input=(ValueError, FileNotFoundError, FileExistsError))
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.jobs.distillation import REPORT_MD, FrontierConfig, run_frontier
    from bert_tf.training import RuntimeConfig, TrainingConfig

    cli.require_flags("teacher_dir", "output_dir", "eval_file")
    config = job_flags.config_from_flags(
        FrontierConfig,
        student_layers=job_flags.integer_list("student_layers"),
        forms=tuple(FLAGS.forms),
        seeds=job_flags.integer_list("seeds"),
        intermediate_num_layers=job_flags.integer_list("intermediate_num_layers"),
    )
    data = distill.data_config_from_flags()
    training_config = job_flags.config_from_flags(TrainingConfig)
    runtime = job_flags.config_from_flags(RuntimeConfig)
    run_frontier(FLAGS.output_dir, config, data, training_config, runtime)
    with open(f"{FLAGS.output_dir}/{REPORT_MD}", encoding="utf-8") as f:
        print(f.read())


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
