"""The model directory: `bert_config.json`, `vocab.txt` and TF2 checkpoints.

`bert_tf.convert` and `experiments.pretrain` write this layout and
`experiments.export`, `experiments.finetune` and `load_encoder` read it. The
checkpoint's top-level objects are `encoder`, `masked_lm` and `next_sentence`
(training checkpoints add `optimizer`, `step` and the input iterator), so an
encoder restores from a pretraining checkpoint and vice versa.
"""

from __future__ import annotations

import os

import tensorflow as tf

from bert_tf import file_io
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer, Task
from bert_tf.models.bert_pretrainer import MASKED_LM_KEY, NEXT_SENTENCE_KEY
from bert_tf.models.task import ENCODER_KEY

CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
CHECKPOINT_PREFIX = "ckpt"


def checkpoint_items(model: BertEncoder | Task) -> dict:
    """The trackable objects under which a model's weights are checkpointed.

    A task model names its own (`Task.checkpoint_items`); a bare encoder is saved
    as the `encoder` item, where every task model's checkpoint also holds it.
    """
    if isinstance(model, Task):
        return model.checkpoint_items
    if isinstance(model, BertEncoder):
        return {ENCODER_KEY: model}
    raise TypeError(f"Expected a BertEncoder or a task model, got {type(model).__name__}.")


def find_checkpoint(path: str) -> str:
    """Resolves a checkpoint prefix, or the latest checkpoint of a directory."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"No TF2 checkpoint found in directory {path}.")
        return latest
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(f"Checkpoint not found: {path} (no {path}.index).")
    return path


def has_pretraining_heads(checkpoint_path: str) -> bool:
    """Whether a checkpoint holds masked-LM and next-sentence weights."""
    names = [name for name, _ in tf.train.list_variables(checkpoint_path)]
    return any(n.startswith(MASKED_LM_KEY + "/") for n in names) and any(
        n.startswith(NEXT_SENTENCE_KEY + "/") for n in names
    )


def restore(model: BertEncoder | Task, checkpoint_path: str) -> None:
    """Restores a model's weights, failing if any of them is not in the checkpoint.

    Extra objects in the checkpoint (an optimizer, unused heads) are allowed.
    """
    checkpoint_path = find_checkpoint(checkpoint_path)
    status = tf.train.Checkpoint(**checkpoint_items(model)).restore(checkpoint_path)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise ValueError(
            f"Checkpoint {checkpoint_path} does not hold every weight of the {type(model).__name__}: {e}"
        ) from None
    status.expect_partial()


def load_config(model_dir: str) -> BertConfig:
    return BertConfig.from_json_file(os.path.join(model_dir, CONFIG_NAME))


def load_encoder(model_dir: str, checkpoint: str | None = None, dtype=None) -> BertEncoder:
    """A `BertEncoder` built from `model_dir/bert_config.json` with restored weights.

    Args:
      model_dir: a directory written by `bert_tf.convert` or `experiments.pretrain`.
      checkpoint: a checkpoint prefix; defaults to the latest one in `model_dir`.
    """
    encoder = BertEncoder(load_config(model_dir), dtype=dtype)
    restore(encoder, checkpoint or model_dir)
    return encoder


def load_pretrainer(model_dir: str, checkpoint: str | None = None, dtype=None) -> BertPretrainer:
    """A `BertPretrainer` (encoder + MLM + NSP heads) with restored weights."""
    checkpoint = find_checkpoint(checkpoint or model_dir)
    if not has_pretraining_heads(checkpoint):
        raise ValueError(f"Checkpoint {checkpoint} has no masked-LM/next-sentence weights; use load_encoder() for it.")
    pretrainer = BertPretrainer(BertEncoder(load_config(model_dir), dtype=dtype))
    restore(pretrainer, checkpoint)
    return pretrainer


def write_model_files(model_dir: str, config: BertConfig, vocab_file: str | None, keep_existing: bool = False) -> None:
    """Writes the files every model directory holds: `bert_config.json` and a copy of `vocab_file`.

    Each file is written atomically. With `keep_existing`, files already in
    `model_dir` (a run being resumed, which its job checked beforehand) are
    left as they are. A `vocab_file` that already is `model_dir`'s is not copied.
    """
    os.makedirs(model_dir, exist_ok=True)
    config_path = os.path.join(model_dir, CONFIG_NAME)
    if not (keep_existing and os.path.exists(config_path)):
        config.to_json_file(config_path)
    vocab_path = os.path.join(model_dir, VOCAB_NAME)
    if not vocab_file or os.path.abspath(vocab_file) == os.path.abspath(vocab_path):
        return
    if not (keep_existing and os.path.exists(vocab_path)):
        file_io.copy_file(vocab_file, vocab_path)


def write_model_dir(output_dir: str, model: BertEncoder | Task, vocab_file: str | None = None) -> str:
    """Writes config, vocab and a checkpoint of `model` to `output_dir` atomically.

    The directory is assembled under a temporary name beside `output_dir` and
    renamed at the end, so an interrupted run never leaves a half-written one.
    Returns the checkpoint path.
    """
    encoder = model.encoder if isinstance(model, Task) else model
    output_dir = os.path.abspath(output_dir)
    if os.path.exists(output_dir) and os.listdir(output_dir):
        raise FileExistsError(f"Output directory {output_dir} exists and is not empty.")
    with file_io.atomic_path(output_dir, directory=True) as tmp_dir:
        write_model_files(tmp_dir, encoder.config, vocab_file)
        checkpoint = tf.train.Checkpoint(**checkpoint_items(model))
        manager = tf.train.CheckpointManager(checkpoint, tmp_dir, max_to_keep=1, checkpoint_name=CHECKPOINT_PREFIX)
        saved = manager.save(checkpoint_number=0)
    # The `checkpoint` index file records relative paths, so the move keeps it valid.
    return os.path.join(output_dir, os.path.basename(saved))
