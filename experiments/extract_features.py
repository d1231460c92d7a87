"""Extracts per-token activations of BERT layers, as google-research/bert's `extract_features.py`.

    python -m experiments.extract_features --input_file=input.txt \\
        --output_file=features.jsonl --model_dir=models/bert_base \\
        --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

`--input_file` holds one example per line: a text, or a pair `text_a ||| text_b`.
`--output_file` ends in `.jsonl` (the original format: per token, the values of
each requested layer), `.npy` (float32 [lines, max_seq_length, layers, hidden])
or `.npz` (`layer_<index>` arrays and the packed inputs). See
`bert_tf.tasks.feature_extraction` for the exact layouts.
"""

from absl import flags

from bert_tf import cli

FLAGS = flags.FLAGS


def define_flags():
    """Defines this tool's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string("input_file", None, "Text file: one `text` or `text_a ||| text_b` per line.")
    flags.DEFINE_string("output_file", None, "Output: .jsonl, .npy or .npz.")
    flags.DEFINE_string("model_dir", None, "A model directory (bert_config.json, vocab.txt, checkpoint).")
    flags.DEFINE_string("init_checkpoint", None, "TF2 checkpoint of the encoder (prefix or directory).")
    flags.DEFINE_string("bert_config_file", None, "bert_config.json (default: the one in --model_dir).")
    flags.DEFINE_string("vocab_file", None, "vocab.txt (default: the one in --model_dir).")
    flags.DEFINE_list("layers", ["-1", "-2", "-3", "-4"], "Layers to output; -1 is the last Transformer layer.")
    flags.DEFINE_integer("max_seq_length", 128, "Packed sequence length; longer inputs are truncated.")
    flags.DEFINE_integer("batch_size", 32, "Batch size for the forward passes.")
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case and strip accents (uncased models).")
    flags.DEFINE_boolean("jit_compile", False, "XLA-compile the forward pass.")


# Bad input (a DataError is a ValueError) is one clear line instead of a traceback.
@cli.main_function("extract_features", bad_input=(ValueError, FileNotFoundError))
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.tasks.feature_extraction import extract_features

    cli.require_flags("input_file", "output_file")
    try:
        layers = [int(layer) for layer in FLAGS.layers]
    except ValueError:
        raise cli.BadInputError(f"--layers must be integers, got {FLAGS.layers}.") from None
    path = extract_features(
        FLAGS.input_file,
        FLAGS.output_file,
        model_dir=FLAGS.model_dir,
        init_checkpoint=FLAGS.init_checkpoint,
        bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file,
        layers=layers,
        max_seq_length=FLAGS.max_seq_length,
        batch_size=FLAGS.batch_size,
        do_lower_case=FLAGS.do_lower_case,
        jit_compile=FLAGS.jit_compile,
    )
    print(f"Wrote {path}")


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
