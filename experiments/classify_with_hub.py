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

    flags.DEFINE_string("export_dir", None, "Directory with the `encoder` and `preprocess` SavedModels.")
    flags.DEFINE_string("train_file", None, "TSV with a header row; two labels (see --label_column).")
    flags.DEFINE_string("eval_file", None, "Held-out TSV in the same format (the tutorial's test set).")
    flags.DEFINE_string("text_a_column", "text", "The text column: a header name or 0-based index.")
    flags.DEFINE_string("label_column", "label", "The label column: a header name or 0-based index.")
    flags.DEFINE_list(
        "label_names",
        None,
        "Names of labels written as 0 and 1, in that order (e.g. other,great for the bundled reviews); "
        "default: the labels as written, sorted.",
    )
    flags.DEFINE_string("output_dir", None, "Where the fine-tuned model, TensorBoard logs and results go.")
    flags.DEFINE_integer("num_train_epochs", 2, "Training epochs.")
    flags.DEFINE_integer("train_batch_size", 32, "Training batch size (also the held-out batches').")
    flags.DEFINE_float(
        "learning_rate",
        1e-3,
        "Adam learning rate (1e-3: Keras' default, as `optimizer='adam'` in the "
        "notebook; pretrained encoders want BERT's 2e-5 to 1e-4).",
    )
    flags.DEFINE_float(
        "warmup_proportion",
        0.0,
        "0: a constant learning rate. Otherwise BERT's schedule, as in TF Hub's "
        "tutorial: linear warm-up over this fraction of the steps, then linear decay to 0.",
    )
    job_flags.define_packing_flag(default=True)
    flags.DEFINE_integer(
        "bucket_width",
        16,
        "With --nopacking, and for the saved classifier's preprocessing: pack each batch to the smallest "
        "multiple of this that holds its longest text (at most --max_seq_length); 0: the notebook's program "
        "(every batch at the exported length).",
    )
    flags.DEFINE_boolean(
        "group_by_length",
        False,
        "With --nopacking and --bucket_width: training batches of near-equal lengths instead of random ones "
        "(less padding, slower learning on small data).",
    )
    flags.DEFINE_integer(
        "max_seq_length",
        0,
        "The packed rows' length, and the longest bucket (0: the preprocessing model's default).",
    )
    flags.DEFINE_integer("max_train_examples", 0, "Use at most this many training examples (0: all).")
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
    job_flags.define("seed")
    flags.mark_flags_as_required(["export_dir", "train_file", "eval_file", "output_dir"])


@cli.main_function("classify_with_hub", bad_input=(ValueError, OSError))
def main(argv):
    del argv
    from bert_tf.jobs.classify_with_hub import HubClassifierConfig, run_classify_with_hub
    from experiments import job_flags

    config = job_flags.config_from_flags(
        HubClassifierConfig, label_names=tuple(FLAGS.label_names) if FLAGS.label_names else None
    )
    results = run_classify_with_hub(FLAGS.output_dir, config, FLAGS.new_sentences, FLAGS.task_model_dir)
    for p in results["predictions"]:
        print(f"{p['score']:.3f}  {p['label']:5s}  {p['text']}")


def run():
    cli.run(main, define_flags)


if __name__ == "__main__":
    run()
