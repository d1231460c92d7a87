"""Extracts per-token activations of BERT layers, as google-research/bert's `extract_features.py`.

    python -m experiments.extract_features --input_file=input.txt \\
        --output_file=features.jsonl --model_dir=models/bert_base \\
        --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

Sentence embeddings (sentence-transformers' recipe for all-MiniLM-L6-v2: mean
over real tokens of the last layer, then unit length):

    python -m experiments.extract_features --input_file=input.txt \\
        --output_file=embeddings.npy --model_dir=models/minilm \\
        --layers=-1 --pooling=mean --normalize

`--input_file` holds one example per line: a text, or a pair `text_a ||| text_b`.
`--output_file` ends in `.jsonl` (the original format: per token, the values of
each requested layer), `.npy` (float32 [lines, max_seq_length, layers, hidden])
or `.npz` (`layer_<index>` arrays and the packed inputs). See
`bert_tf.jobs.extract_features` for the exact layouts. `--layers` takes
Transformer layer indices, `embeddings` (the embedding layer's output) and
`all`.

A line longer than --max_seq_length is cut as --long_text says (truncate, head_tail, or windows: a document's
vector is the mean of its windows', per-token features take each piece from its max-context window); the log and
`<output_file>.summary.json` say how many lines were cut and by how much. See docs/features.md.
"""

from absl import flags

from bert_tf import cli, errors
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this tool's flags (at run time, so importing the module defines none)."""
    job_flags.define(
        "input_file",
        "output_file",
        notes={
            "input_file": "Text: one `text` or `text_a ||| text_b` per line.",
            "output_file": ".jsonl, .npy or .npz.",
        },
    )
    job_flags.define_model_source_flags()
    flags.DEFINE_list(
        "layers",
        ["-1", "-2", "-3", "-4"],
        "Layers to output: Transformer layer indices (-1 is the last), 'embeddings' (the embedding layer's "
        "output) or 'all' (embeddings and every Transformer layer).",
    )
    flags.DEFINE_enum(
        "pooling",
        None,
        ["cls", "mean", "max", "pooled"],
        "Write one vector per line instead of per token: [CLS], the mean or max over real tokens of each layer, "
        "or the pooler's output (then --layers is not used).",
    )
    flags.DEFINE_boolean("normalize", False, "Scale each pooled vector to unit L2 length (needs --pooling).")
    job_flags.define_packing_flag()
    job_flags.define_long_text_flags(
        window_pooling=False,
        long_text_help="Lines longer than --max_seq_length: truncate (keep the first pieces), head_tail (the first "
        "quarter and the last three quarters, Sun et al. 2019) or windows (every window of a document: a sentence "
        "feature is the mean of the windows' vectors; per token, each piece once, from the window where it has the "
        "most context). Single texts only. Default: truncate. What was cut: the log and <output_file>.summary.json.",
    )
    job_flags.define(
        "bucket_width",
        "max_seq_length",
        "batch_size",
        "jit_compile",
        notes={"bucket_width": "With --nopacking: lines run in batches of similar length (outputs unchanged)."},
    )


@cli.main_function("extract_features")
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.extract_features import FeatureExtractionConfig, run_feature_extraction
    from bert_tf.tasks.long_text import LongTextConfig

    cli.require_flags("input_file", "output_file")
    if FLAGS.pooling == "pooled" and FLAGS["layers"].present:
        raise errors.BadInputError("--layers does not apply to --pooling=pooled (the pooler reads the last layer).")
    config = job_flags.config_from_flags(
        FeatureExtractionConfig,
        model=job_flags.config_from_flags(ModelSource),
        long_text_config=job_flags.config_from_flags(LongTextConfig),
    )
    path = run_feature_extraction(FLAGS.output_file, config, jit_compile=FLAGS.jit_compile)
    print(f"Wrote {path}")


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
