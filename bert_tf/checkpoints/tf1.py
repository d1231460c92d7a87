"""Reading google-research/bert TF1 checkpoints (`bert_model.ckpt`).

These are name-based checkpoints written by `tf.compat.v1.train.Saver`:
variables such as `bert/encoder/layer_3/attention/self/query/kernel`, plus
the pretraining heads under `cls/` and, in checkpoints saved mid-training,
Adam slots and `global_step`. The name table is in `weight_mapping.py`.
"""

from __future__ import annotations

import os

import tensorflow as tf

from bert_tf.checkpoints.model_dir import CONFIG_NAME, VOCAB_NAME, find_checkpoint
from bert_tf.checkpoints.weight_mapping import SourceTensors, convert_weights
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer

# Optimizer state and the step counter: saved beside the weights, never model weights.
_OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v")
_NON_WEIGHT_NAMES = ("global_step",)
# The checkpoint prefix of google-research/bert's downloads.
TF1_CHECKPOINT_NAME = "bert_model.ckpt"


def resolve_tf1_checkpoint(path: str) -> str:
    """The checkpoint prefix for `path`: a prefix, one of its files, or a directory holding one."""
    return find_checkpoint(path, kind="TF1", default_name=TF1_CHECKPOINT_NAME)


def is_non_weight(name: str) -> bool:
    """Whether a TF1 variable is optimizer or training state rather than a model weight."""
    return name in _NON_WEIGHT_NAMES or name.endswith(_OPTIMIZER_SLOT_SUFFIXES)


def read_tf1_checkpoint(checkpoint_path: str) -> SourceTensors:
    """The variables of a TF1 checkpoint, with optimizer slots and `global_step` set aside."""
    prefix = resolve_tf1_checkpoint(checkpoint_path)
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as e:
        raise ValueError(f"Cannot read TF1 checkpoint {prefix}: {e}") from None
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes:
        raise ValueError(
            f"{prefix} is an object-based TF2 checkpoint, not a google-research TF1 one; "
            "a bert_tf model directory is read with bert_tf.load_encoder()."
        )

    def read(name):
        try:
            return reader.get_tensor(name)
        except tf.errors.OpError as e:
            raise ValueError(f"Cannot read variable {name} of TF1 checkpoint {prefix}: {e}") from None

    weights = {name: shape for name, shape in shapes.items() if not is_non_weight(name)}
    ignored = [name for name in shapes if is_non_weight(name)]
    return SourceTensors(weights, read, description=f"TF1 checkpoint {prefix}", ignored=ignored)


def tf1_companion_files(checkpoint_path: str) -> tuple[str, str]:
    """`bert_config.json` and `vocab.txt` in the checkpoint's directory, as google-research ships them."""
    prefix = resolve_tf1_checkpoint(checkpoint_path)
    directory = os.path.dirname(prefix)
    return os.path.join(directory, CONFIG_NAME), os.path.join(directory, VOCAB_NAME)


def convert_tf1_checkpoint(
    checkpoint_path: str,
    bert_config: BertConfig | str | None = None,
    heads: str = "auto",
    allow_missing_pooler: bool = False,
) -> BertEncoder | BertPretrainer:
    """A `BertPretrainer` or `BertEncoder` holding the weights of a TF1 BERT checkpoint.

    Args:
      checkpoint_path: the checkpoint prefix (`.../bert_model.ckpt`), one of its
        files, or its directory.
      bert_config: a `BertConfig`, the path of a `bert_config.json`, or None
        for the `bert_config.json` beside the checkpoint.
      heads: "auto", "pretraining" or "none"; see `weight_mapping.convert_weights`.
      allow_missing_pooler: keep an initialised pooler when the checkpoint has none.

    Returns:
      A `BertPretrainer` when the checkpoint holds the `cls/predictions` and
      `cls/seq_relationship` heads (and `heads` allows them), else a `BertEncoder`.
    """
    source = read_tf1_checkpoint(checkpoint_path)
    if bert_config is None:
        bert_config = tf1_companion_files(checkpoint_path)[0]
    if isinstance(bert_config, str):
        config_description = bert_config
        bert_config = BertConfig.from_json_file(bert_config)
    else:
        config_description = "the given BertConfig"
    return convert_weights(
        bert_config,
        source,
        "tf1",
        heads=heads,
        allow_missing_pooler=allow_missing_pooler,
        config_description=config_description,
    )
