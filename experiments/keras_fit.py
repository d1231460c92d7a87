"""Fine-tunes a `BertClassifier` with Keras `fit` on any Keras backend (JAX included), without TensorFlow.

    KERAS_BACKEND=jax python -m experiments.keras_fit --model_dir=models/minilm \\
        --train_file=data/fine_foods_train.tsv --eval_file=data/fine_foods_test.tsv --output_dir=runs/jax_fit

`--train_file` and `--eval_file` are TSVs with the columns `text` and `label` (the bundled reviews' format).
Writes `--output_dir`/results.json (backend, steps, seconds, losses, the evaluation accuracy) and
`--output_dir`/model, the fine-tuned classifier's model directory, which `experiments.export` and the
TensorFlow jobs read. Packed rows by default (the same results as one example a row, less padding);
`--nopacking`: one example a row. The recipe and the model: `bert_tf.jobs.keras_fit`. The flags are
`experiments.finetune`'s names for the same things.
"""

from absl import flags

from bert_tf import cli

FLAGS = flags.FLAGS


def define_flags():
    """Defines this tool's flags (at run time, so importing the module defines none)."""
    from experiments import job_flags

    job_flags.define(
        "model_dir",
        "train_file",
        "eval_file",
        "output_dir",
        "max_seq_length",
        "train_batch_size",
        "learning_rate",
        "warmup_proportion",
        "max_train_examples",
        "do_lower_case",
        "seed",
        "num_train_epochs",
        "mixed_precision",
        notes={
            "model_dir": "weights.safetensors on backends other than TensorFlow.",
            "train_file": "A TSV with the columns text and label.",
            "eval_file": "The same format, scored after training.",
            "output_dir": "results.json and model/ (the fine-tuned model directory).",
            "mixed_precision": "Of the model.",
        },
        defaults={
            "warmup_proportion": (0.1, "Default here: 0.1, BERT's fine-tuning warm-up (the schedule's own: none)."),
            "num_train_epochs": (1.0, "Default here: 1, the README's real-weights recipe."),
        },
    )
    job_flags.define_packing_flag(default=True)


@cli.main_function("keras_fit")
def main(argv):
    del argv  # Checked by cli.main_function.
    import json

    from bert_tf.jobs.keras_fit import KerasFitConfig, run_keras_fit
    from experiments import job_flags

    cli.require_flags("model_dir", "train_file", "output_dir")
    config = job_flags.config_from_flags(KerasFitConfig, num_train_epochs=job_flags.whole_number("num_train_epochs"))
    results = run_keras_fit(FLAGS.output_dir, config)
    print(json.dumps({k: v for k, v in results.items() if k != "test_logits_head"}))


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
