"""Which layer's frozen features should I use? Probes every layer of a BERT model on real data.

    python -m experiments.probe_layers --model_dir=models/minilm --output_dir=runs/probe

With no data flags it uses the bundled Brown part-of-speech tags (token level) and fine-food reviews
(sentence level). Your own data:

    python -m experiments.probe_layers --model_dir=models/bert_base --output_dir=runs/probe_ner \\
        --token_train_file=train.conll --token_test_file=test.conll \\
        --sentence_train_file=train.tsv --sentence_test_file=test.tsv

Token files: `word<TAB>tag` per line, a blank line between sentences. Sentence files: TSV with the header
`text<TAB>label`. Writes `report.md`, `report.json` and `layers.png` to --output_dir (see
`bert_tf.jobs.probe_layers` for the rows, controls and the probe's recipe). `--nofinetune` leaves out the
fine-tuned reference row, `--norandom_control` the randomly initialised twin.
"""

from absl import flags

from bert_tf import cli
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this tool's flags (at run time, so importing the module defines none)."""
    from bert_tf.jobs.probe_layers import TASKS
    from bert_tf.probing.layer_features import WORD_PIECE_MODES

    job_flags.define(
        "output_dir", notes={"output_dir": "report.md, report.json and layers.png go there (new or empty)."}
    )
    job_flags.define_model_source_flags()
    flags.DEFINE_string("token_train_file", None, "word<TAB>tag training file (default: bundled Brown POS tags).")
    flags.DEFINE_string("token_test_file", None, "word<TAB>tag test file (default: bundled Brown POS tags).")
    flags.DEFINE_string("sentence_train_file", None, "text<TAB>label training TSV (default: bundled reviews).")
    flags.DEFINE_string("sentence_test_file", None, "text<TAB>label test TSV (default: bundled reviews).")
    flags.DEFINE_list("tasks", list(TASKS), "Which tasks to probe.")
    job_flags.define("max_seq_length", "batch_size", "bucket_width")
    job_flags.define_packing_flag(default=True)
    flags.DEFINE_enum("word_piece", "first", list(WORD_PIECE_MODES), "A word's WordPiece: the first or the mean.")
    flags.DEFINE_boolean("random_control", True, "Also probe the same architecture randomly initialised.")
    flags.DEFINE_boolean("finetune", True, "Add the fine-tuned reference row (fine-tunes the whole encoder).")
    flags.DEFINE_float("finetune_epochs", 1.0, "Epochs of the fine-tuned reference.")
    flags.DEFINE_float("finetune_learning_rate", 1e-4, "Peak learning rate of the fine-tuned reference.")
    flags.DEFINE_integer("finetune_batch_size", 32, "Batch size of the fine-tuned reference.")
    flags.DEFINE_integer(
        "finetune_min_steps",
        300,
        "The fine-tuned reference trains for at least this many steps (more epochs on a small training file).",
    )
    flags.DEFINE_integer(
        "finetune_microbatches",
        8,
        "The reference's batches run as this many pieces whose gradients are summed (less memory, slower).",
    )
    flags.DEFINE_float("dev_fraction", 0.1, "Share of the training file held out to choose each probe's strength.")
    job_flags.define("seed", notes={"seed": "Here: the split, the random twin, the probes and the fine-tuning."})
    flags.DEFINE_string("cache_dir", None, "Feature cache (default: <output_dir>/feature_cache); reused if present.")


@cli.main_function("probe_layers")
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.probe_layers import ProbeLayersConfig, run_probe_layers

    cli.require_flags("output_dir")
    config = job_flags.config_from_flags(ProbeLayersConfig, model=job_flags.config_from_flags(ModelSource))
    run_probe_layers(FLAGS.output_dir, config)
    print(f"Wrote {FLAGS.output_dir}/report.md, report.json and layers.png")


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
