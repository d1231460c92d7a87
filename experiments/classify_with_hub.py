"""Fine-tune a sentiment classifier on exported SavedModels through `hub.KerasLayer`.

This is the TF Hub notebook program, run against our exports: the preprocessing
and encoder SavedModels are loaded with `hub.KerasLayer` into a tf_keras model
and fine-tuned end to end (the encoder's weights are trainable).

    python -m experiments.classify_with_hub --export_dir=runs/demo/export \
        --train_file=data/fine_foods_train.tsv --eval_file=data/fine_foods_test.tsv \
        --label_names=other,great --output_dir=runs/demo/classifier

The data: TSV files with a header; `--text_a_column` and `--label_column` name
the columns (a header name or a 0-based index, as in `experiments.finetune`).
The classifier is binary (a sigmoid, as in TF Hub's tutorial): the training
data has exactly two labels, named as written in the data and sorted (the
second is the positive class, whose probability is the score), or, for labels
written as 0/1, named by `--label_names` in id order. Results name each
baseline for what it is: the training set's majority class scored on the test
set, and the test set's own majority class.

Batches: packed rows by default (whole examples side by side in rows of
`--max_seq_length` tokens, each computed as if alone through the exported
encoder's `input_example_ids` input: the same results as one example a row,
less padding); `--nopacking`: random batches packed to their length bucket
(`--bucket_width`; 0: the notebook's program unchanged). The saved classifier
takes raw strings either way. The job: `bert_tf.jobs.classify_with_hub`.

`hub.KerasLayer` builds on tf_keras (Keras 2), so this job sets
TF_USE_LEGACY_KERAS=1 before TensorFlow is imported.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from absl import flags

from bert_tf import cli

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    from experiments import job_flags

    job_flags.define(
        "export_dir",
        "train_file",
        "eval_file",
        "text_a_column",
        "label_column",
        "output_dir",
        "train_batch_size",
        "learning_rate",
        "warmup_proportion",
        "max_train_examples",
        "seed",
        "num_train_epochs",
        notes={
            "train_file": "A TSV with a header row; two labels (see --label_column).",
            "eval_file": "The held-out TSV in the same format (the tutorial's test set).",
            "output_dir": "The fine-tuned model, TensorBoard logs and results.",
            "train_batch_size": "Also the held-out batches'.",
        },
        defaults={
            "text_a_column": ("text", "Default here: text, the bundled reviews' column."),
            "label_column": ("label", "Default here: label, the bundled reviews' column."),
            "learning_rate": (
                1e-3,
                "Default here: 1e-3, Keras' Adam default, as `optimizer='adam'` in the notebook; pretrained "
                "encoders want BERT's 2e-5 to 1e-4.",
            ),
            "warmup_proportion": (
                0.0,
                "Default here: 0, a constant learning rate as in the notebook; otherwise TF Hub's tutorial "
                "schedule (linear warm-up, then linear decay to 0).",
            ),
            "num_train_epochs": (2.0, "Default here: 2, this program's recipe (`HubClassifierConfig`'s)."),
        },
    )
    flags.DEFINE_list(
        "label_names",
        None,
        "Names of labels written as 0 and 1, in that order (e.g. other,great for the bundled reviews); "
        "default: the labels as written, sorted.",
    )
    job_flags.define_packing_flag(default=True)
    job_flags.define(
        "bucket_width",
        "group_by_length",
        "max_seq_length",
        notes={
            "bucket_width": "Here with --nopacking, and in the saved classifier's preprocessing.",
            "group_by_length": "Here with --nopacking and --bucket_width.",
        },
        defaults={
            "max_seq_length": (0, "Default here: 0, the preprocessing model's default; also the packed rows' length."),
        },
    )
    flags.DEFINE_integer("max_eval_examples", 0, "Use at most this many held-out examples (0: all).")
    flags.DEFINE_list(
        "new_sentences",
        [
            "Absolutely delicious, I will order this again.",
            "The coffee was stale and tasted like cardboard.",
            "My dog loves these treats.",
            "Too sweet and the package arrived damaged.",
        ],
        "Sentences to classify after training.",
    )
    flags.DEFINE_string(
        "task_model_dir",
        None,
        "Also write the fine-tuned classifier here as a fine-tuned model directory (experiments.finetune's "
        "layout, two classes: the labels as written), which experiments.distill --teacher_dir, experiments.export "
        "and load_task_model take.",
    )
    flags.mark_flags_as_required(["export_dir", "train_file", "eval_file", "output_dir"])


@cli.main_function("classify_with_hub", bad_input=(ValueError, OSError))
def main(argv):
    del argv
    from bert_tf.jobs.classify_with_hub import HubClassifierConfig, run_classify_with_hub
    from experiments import job_flags

    config = job_flags.config_from_flags(
        HubClassifierConfig,
        label_names=tuple(FLAGS.label_names) if FLAGS.label_names else None,
        num_train_epochs=job_flags.whole_number("num_train_epochs"),
    )
    results = run_classify_with_hub(FLAGS.output_dir, config, FLAGS.new_sentences, FLAGS.task_model_dir)
    for p in results["predictions"]:
        print(f"{p['score']:.3f}  {p['label']:5s}  {p['text']}")


def run():
    cli.run(main, define_flags)


if __name__ == "__main__":
    run()
