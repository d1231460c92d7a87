"""The model directory: `bert_config.json`, `vocab.txt`, TF2 checkpoints and `weights.safetensors`.

`experiments.convert` and `experiments.pretrain` write this layout and
`experiments.export`, `experiments.finetune` and `load_encoder` read it. The
checkpoint's top-level objects are `encoder`, `masked_lm` and `next_sentence`
(training checkpoints add `optimizer`, `step` and the input iterator), so an
encoder restores from a pretraining checkpoint and vice versa.

Beside the checkpoints, `weights.safetensors` (`weights_file.py`) holds the
same weights for every Keras backend: `load_encoder` and `load_pretrainer`
read it when the backend is not TensorFlow or TensorFlow cannot be imported
(and on TensorFlow when the directory has no checkpoint). TensorFlow is
imported only by the functions that read or write checkpoints.
"""

from __future__ import annotations

import importlib.util
import os

from bert_tf import file_io
from bert_tf.checkpoints import weights_file
from bert_tf.checkpoints.model_source import CONFIG_NAME, VOCAB_NAME
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer, TaskModel
from bert_tf.models.bert_pretrainer import MASKED_LM_KEY, NEXT_SENTENCE_KEY
from bert_tf.models.task_model import ENCODER_KEY

CHECKPOINT_PREFIX = "ckpt"
# The files of one checkpoint prefix; a path to one of them names the checkpoint.
CHECKPOINT_SUFFIXES = (".index", ".meta", ".data-00000-of-00001")


def checkpoint_items(model: BertEncoder | TaskModel) -> dict:
    """The trackable objects under which a model's weights are checkpointed.

    A task model names its own (`TaskModel.checkpoint_items`); a bare encoder is saved
    as the `encoder` item, where every task model's checkpoint also holds it.
    """
    if isinstance(model, TaskModel):
        return model.checkpoint_items
    if isinstance(model, BertEncoder):
        return {ENCODER_KEY: model}
    raise TypeError(f"Expected a BertEncoder or a task model, got {type(model).__name__}.")


def latest_checkpoint(directory: str) -> str | None:
    """The prefix of the checkpoint that `directory/checkpoint` names last (TF1 or TF2), or None."""
    import tensorflow as tf

    return tf.train.latest_checkpoint(directory)


def find_checkpoint(path: str, *, kind: str = "TF2", default_name: str | None = None) -> str:
    """Resolves a checkpoint prefix, one of its files, or a directory's checkpoint, to the prefix.

    Args:
      path: a prefix (`runs/ckpt-100`), one of its files (`runs/ckpt-100.index`) or a directory.
      kind: what the error messages call the checkpoint ("TF2", "TF1").
      default_name: the prefix a directory's checkpoint has when its directory has no `checkpoint` file
        (google-research/bert's downloads ship `bert_model.ckpt` without one); preferred when present.

    Raises:
      FileNotFoundError: naming the path, when no checkpoint is there.
    """
    import tensorflow as tf

    for suffix in CHECKPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    if tf.io.gfile.isdir(path):
        if default_name and tf.io.gfile.exists(os.path.join(path, default_name + ".index")):
            return os.path.join(path, default_name)
        latest = latest_checkpoint(path)
        if latest is None:
            either = f" ({default_name}.index or a 'checkpoint' file)" if default_name else ""
            raise FileNotFoundError(f"No {kind} checkpoint{either} found in directory {path}.")
        return latest
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(f"Checkpoint not found: {path} (no {path}.index).")
    return path


def has_pretraining_heads(checkpoint_path: str) -> bool:
    """Whether a checkpoint holds masked-LM and next-sentence weights."""
    import tensorflow as tf

    names = [name for name, _ in tf.train.list_variables(checkpoint_path)]
    return any(n.startswith(MASKED_LM_KEY + "/") for n in names) and any(
        n.startswith(NEXT_SENTENCE_KEY + "/") for n in names
    )


def restore(model: BertEncoder | TaskModel, checkpoint_path: str) -> None:
    """Restores a model's weights, failing if any of them is not in the checkpoint.

    Extra objects in the checkpoint (an optimizer, unused heads) are allowed.
    """
    import tensorflow as tf

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


def tensorflow_checkpoints_usable() -> bool:
    """Whether TF2 checkpoints can be read here: the Keras backend is TensorFlow and TensorFlow imports."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return False
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def uses_weights_file(model_dir: str, checkpoint: str | None) -> bool:
    """Whether to read `weights.safetensors` rather than a TF2 checkpoint (see the module docstring)."""
    if checkpoint:
        return False
    if not tensorflow_checkpoints_usable():
        return True
    return (
        os.path.exists(weights_file.weights_path(model_dir)) and weights_file.latest_checkpoint_name(model_dir) is None
    )


def restore_from_model_dir(model: BertEncoder | TaskModel, model_dir: str, checkpoint: str | None = None) -> None:
    """Sets `model`'s weights from `checkpoint`, or from `model_dir` by the rule of the module docstring."""
    if uses_weights_file(model_dir, checkpoint):
        weights_file.load_weights_file(model, model_dir)
    else:
        restore(model, checkpoint or model_dir)


def load_encoder(model_dir: str, checkpoint: str | None = None, dtype=None) -> BertEncoder:
    """A `BertEncoder` built from `model_dir/bert_config.json` with restored weights.

    Args:
      model_dir: a directory written by `experiments.convert`, `experiments.pretrain` or `experiments.finetune`.
      checkpoint: a TF2 checkpoint prefix; defaults to the latest one in `model_dir` on TensorFlow, and to
        `weights.safetensors` on other backends or without TensorFlow.
    """
    encoder = BertEncoder(load_config(model_dir), dtype=dtype)
    restore_from_model_dir(encoder, model_dir, checkpoint)
    return encoder


def load_pretrainer(model_dir: str, checkpoint: str | None = None, dtype=None) -> BertPretrainer:
    """A `BertPretrainer` (encoder + MLM + NSP heads) with restored weights."""
    if uses_weights_file(model_dir, checkpoint):
        if not weights_file.has_pretraining_heads(model_dir):
            raise ValueError(
                f"{weights_file.weights_path(model_dir)} has no masked-LM/next-sentence weights; use load_encoder()."
            )
        pretrainer = BertPretrainer(BertEncoder(load_config(model_dir), dtype=dtype))
        weights_file.load_weights_file(pretrainer, model_dir)
        return pretrainer
    checkpoint = find_checkpoint(checkpoint or model_dir)
    if not has_pretraining_heads(checkpoint):
        raise ValueError(f"Checkpoint {checkpoint} has no masked-LM/next-sentence weights; use load_encoder() for it.")
    pretrainer = BertPretrainer(BertEncoder(load_config(model_dir), dtype=dtype))
    restore(pretrainer, checkpoint)
    return pretrainer


def load_task_model(model_dir: str, build, checkpoint: str | None = None, dtype=None) -> TaskModel:
    """A task model `build(encoder)` (say, `lambda e: BertClassifier(e, num_classes=2)`) with restored weights.

    Reads a fine-tuned model directory (`experiments.finetune`, `experiments.keras_fit`) by the rule of
    `load_encoder`: the TF2 checkpoint's `task_model` on TensorFlow, `weights.safetensors` elsewhere.
    """
    model = build(BertEncoder(load_config(model_dir), dtype=dtype))
    restore_from_model_dir(model, model_dir, checkpoint)
    return model


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


def write_model_dir(output_dir: str, model: BertEncoder | TaskModel, vocab_file: str | None = None) -> str:
    """Writes config, vocab, a checkpoint of `model` and `weights.safetensors` to `output_dir` atomically.

    The directory is assembled under a temporary name beside `output_dir` and
    renamed at the end, so an interrupted run never leaves a half-written one.
    Where TF2 checkpoints cannot be written (another Keras backend, or no
    TensorFlow), the directory holds the weights file alone, which every loader
    reads, TensorFlow's included. Returns the checkpoint path (or the weights
    file's, without a checkpoint).
    """
    encoder = model.encoder if isinstance(model, TaskModel) else model
    output_dir = os.path.abspath(output_dir)
    if os.path.exists(output_dir) and os.listdir(output_dir):
        raise FileExistsError(f"Output directory {output_dir} exists and is not empty.")
    with file_io.atomic_path(output_dir, directory=True) as tmp_dir:
        write_model_files(tmp_dir, encoder.config, vocab_file)
        if not tensorflow_checkpoints_usable():
            weights_file.write_weights_file(tmp_dir, model)
            return weights_file.weights_path(output_dir)
        import tensorflow as tf

        checkpoint = tf.train.Checkpoint(**checkpoint_items(model))
        manager = tf.train.CheckpointManager(checkpoint, tmp_dir, max_to_keep=1, checkpoint_name=CHECKPOINT_PREFIX)
        saved = manager.save(checkpoint_number=0)
        weights_file.write_weights_file(tmp_dir, model, checkpoint=saved)
    # The `checkpoint` index file records relative paths, so the move keeps it valid.
    return os.path.join(output_dir, os.path.basename(saved))


def rewrite_weights_file(model_dir: str) -> str:
    """(Re)writes `model_dir`'s weights file from its latest TF2 checkpoint (TensorFlow backend); returns its path."""
    checkpoint = find_checkpoint(model_dir)
    if has_pretraining_heads(checkpoint):
        model = load_pretrainer(model_dir, checkpoint)
    else:
        model = load_encoder(model_dir, checkpoint)
    return weights_file.write_weights_file(model_dir, model, checkpoint)
