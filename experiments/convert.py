"""`python -m bert_tf.convert`: TF1 or HuggingFace BERT weights -> a bert_tf model directory.

    python -m bert_tf.convert --from=tf1 --input=uncased_L-12_H-768_A-12/bert_model.ckpt \\
        --output_dir=models/bert_base
    python -m bert_tf.convert --from=hf --input=path/to/hf_bert_dir --output_dir=models/minilm

The output directory holds `bert_config.json`, `vocab.txt` and a TF2
checkpoint: a `BertPretrainer` one when the source has the masked-LM and
next-sentence heads, else a `BertEncoder` one. Read it back with
`bert_tf.load_encoder(OUT)` / `bert_tf.load_pretrainer(OUT)`.
"""

from __future__ import annotations

import os

from absl import flags

from bert_tf import cli
from bert_tf.config import BertConfig
from bert_tf.checkpoints import model_source

SOURCE_FORMATS = ("tf1", "hf")


def convert(
    source_format: str,
    input_path: str,
    output_dir: str,
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
    heads: str = "auto",
    allow_missing_pooler: bool = False,
) -> str:
    """Converts a checkpoint into a model directory; returns the written checkpoint path.

    Args:
      source_format: "tf1" (google-research `bert_model.ckpt`) or "hf"
        (a HuggingFace directory with `config.json` and `model.safetensors`).
      input_path: the TF1 checkpoint prefix (or its directory), or the HF directory.
      output_dir: where to write; must not exist or be empty.
      bert_config_file: TF1 only; defaults to `bert_config.json` beside the checkpoint.
      vocab_file: defaults to `vocab.txt` beside the checkpoint / in the HF directory.
      heads, allow_missing_pooler: see `bert_tf.checkpoints.weight_mapping.convert_weights`.
    """
    from bert_tf.checkpoints import huggingface, model_dir, tf1

    if source_format not in SOURCE_FORMATS:
        raise ValueError(f"source format must be one of {SOURCE_FORMATS}, got {source_format!r}.")
    # Fail on the cheap checks before reading any weights.
    output_dir = os.path.abspath(output_dir)
    if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or os.listdir(output_dir)):
        raise FileExistsError(f"Output directory {output_dir} exists and is not empty.")
    if source_format == "tf1":
        default_config, default_vocab = tf1.tf1_companion_files(input_path)
        config_file = bert_config_file or default_config
    else:
        if bert_config_file:
            raise ValueError(
                "bert_config_file applies to TF1 checkpoints only; a HuggingFace directory "
                f"carries its own {huggingface.HF_CONFIG_NAME}."
            )
        default_config, default_vocab = huggingface.hf_companion_files(input_path)
        config_file = default_config
    try:
        config = (
            BertConfig.from_json_file(config_file) if source_format == "tf1" else huggingface.hf_bert_config(input_path)
        )
    except ValueError as e:
        raise ValueError(f"{config_file}: {e}") from None
    vocab_file = vocab_file or default_vocab
    # The jobs' rule (bert_tf.checkpoints.model_source): at most vocab_size tokens; a padded table is fine.
    vocab = model_source.read_vocab(vocab_file, required_tokens=())
    model_source.check_compatible(config, len(vocab), vocab_file=vocab_file, config_file=config_file)

    import tensorflow as tf

    try:
        if source_format == "tf1":
            model = tf1.convert_tf1_checkpoint(
                input_path, config_file, heads=heads, allow_missing_pooler=allow_missing_pooler
            )
        else:
            model = huggingface.convert_hf_directory(input_path, heads=heads, allow_missing_pooler=allow_missing_pooler)
    except tf.errors.OpError as e:
        # A file that is not a checkpoint (or is damaged) fails in TensorFlow's reader.
        raise ValueError(f"--input={input_path}: cannot read the {source_format} checkpoint: {e.message}") from None
    return model_dir.write_model_dir(output_dir, model, vocab_file=vocab_file)


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
    flags.DEFINE_string("output_dir", None, "Model directory to write (must not exist or be empty).")
    flags.DEFINE_string("bert_config_file", None, "TF1 only: bert_config.json; default: beside the checkpoint.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt; default: beside the checkpoint / in the HF directory.")
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


@cli.main_function("bert_tf.convert", bad_input=(ValueError, FileNotFoundError, FileExistsError))
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
