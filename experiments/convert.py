"""`python -m experiments.convert` (`bert_tf_convert`): TF1 or HuggingFace BERT weights -> a model directory.

    python -m experiments.convert --from=tf1 --input=uncased_L-12_H-768_A-12/bert_model.ckpt \\
        --output_dir=models/bert_base
    python -m experiments.convert --from=hf --input=path/to/hf_bert_dir --output_dir=models/minilm

The output directory holds `bert_config.json`, `vocab.txt` and a TF2
checkpoint: a `BertPretrainer` one when the source has the masked-LM and
next-sentence heads, else a `BertEncoder` one. Read it back with
`bert_tf.load_encoder(OUT)` / `bert_tf.load_pretrainer(OUT)`. The library half is
`bert_tf.checkpoints.conversion.convert`.
"""

from __future__ import annotations

from absl import flags

from bert_tf import cli
from bert_tf.checkpoints.conversion import SOURCE_FORMATS, convert
from experiments import job_flags


def define_flags() -> None:
    """Defines this tool's flags; `run()` calls it, so importing `convert()` adds no flags."""
    flags.DEFINE_enum(
        "from",
        None,
        list(SOURCE_FORMATS),
        "Source format: tf1 (google-research bert_model.ckpt) or hf (HuggingFace directory "
        "with config.json and model.safetensors).",
    )
    flags.DEFINE_string("input", None, "TF1 checkpoint prefix (e.g. DIR/bert_model.ckpt) or HF model directory.")
    job_flags.define(
        "output_dir",
        "bert_config_file",
        "vocab_file",
        notes={
            "output_dir": "The model directory to write (must not exist or be empty).",
            "bert_config_file": "TF1 only; default: beside the checkpoint.",
            "vocab_file": "Default: beside the checkpoint / in the HF directory.",
        },
    )
    flags.DEFINE_enum(
        "heads",
        "auto",
        ["auto", "pretraining", "none"],
        "auto: write a BertPretrainer when the source has both the masked-LM and next-sentence "
        "heads, else a BertEncoder; pretraining: require both heads; none: encoder only.",
    )
    flags.DEFINE_bool(
        "allow_missing_pooler",
        False,
        "Convert a source without pooler weights, keeping the pooler's random initial values.",
    )


@cli.main_function("convert", bad_input=(ValueError, FileNotFoundError, FileExistsError))
def main(argv):
    del argv  # Checked by cli.main_function.
    cli.require_flags("from", "input", "output_dir")
    FLAGS = flags.FLAGS
    checkpoint = convert(
        FLAGS["from"].value,
        FLAGS.input,
        FLAGS.output_dir,
        bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file,
        heads=FLAGS.heads,
        allow_missing_pooler=FLAGS.allow_missing_pooler,
    )
    from bert_tf.checkpoints import has_pretraining_heads

    kind = (
        "BertPretrainer (encoder + masked-LM + next-sentence)" if has_pretraining_heads(checkpoint) else "BertEncoder"
    )
    print(f"Wrote {kind} checkpoint {checkpoint}")
    return 0


def run(argv=None):
    """Console-script entry point (`bert_tf_convert`)."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
