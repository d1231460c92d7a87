"""TF1 or HuggingFace BERT weights -> a bert_tf model directory (the library half of `experiments.convert`).

    from bert_tf.checkpoints.conversion import convert
    convert("hf", "path/to/hf_bert_dir", "models/minilm")

The output directory holds `bert_config.json`, `vocab.txt`, a TF2 checkpoint and `weights.safetensors`: a
`BertPretrainer` when the source has the masked-LM and next-sentence heads, else a `BertEncoder`. The
vocabulary is checked against the config by the jobs' one rule (`model_source.check_compatible`: at most
`vocab_size` tokens; fewer is a padded embedding table).
"""

from __future__ import annotations

import os

from bert_tf.checkpoints import model_source
from bert_tf.config import BertConfig

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
