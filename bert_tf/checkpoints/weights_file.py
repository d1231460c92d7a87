"""The backend-neutral weights file of a model directory: `weights.safetensors`.

Every writer of a model directory (`write_model_dir`, so `experiments.convert`;
`experiments.pretrain` and `experiments.finetune` at the end of training) puts
this file beside the TF2 checkpoints, and `load_encoder`, `load_pretrainer` and
the task-model loaders read it on any Keras backend, without TensorFlow. The
TF2 checkpoint stays the training and resume format (it also holds the
optimizer, the step and the input position).

Why safetensors keyed by Keras variable paths, not Keras' `.weights.h5`: a
`.weights.h5` file is laid out by the saved model's object graph
(`layers/<attribute>/vars/<index>`), so an encoder cannot be read out of a
fine-tuned classifier's file without rebuilding the classifier, and a reader
outside Keras cannot tell which array is which. Here each tensor is named by
its model part and the variable's Keras path, e.g.
`encoder/transformer_layer_0/attention/query/kernel` or
`heads/masked_lm/output_bias`, which are the same on every backend; any model
holding an encoder (a bare encoder, the pretrainer, every task model) reads the
`encoder/` tensors, extra tensors (heads it lacks) are ignored, and a weight
missing from the file or of another shape is an error. safetensors is already
a dependency (HuggingFace conversion), needs no pickle, and is read by numpy,
PyTorch and JAX alike. Values are stored in float32 whatever the dtype policy
(the variables of bf16 and mixed policies are cast on load); dropout seed
states are not stored (they are training state, in the TF2 checkpoint).

The file's metadata names the TF2 checkpoint it was written with
(`checkpoint`, or empty), so a loader can tell a file older than the latest
checkpoint of its directory. Standard library, numpy, safetensors and keras
only: no TensorFlow.

    python -m experiments.write_weights_file --model_dir=DIR   # (re)writes it from the latest checkpoint (TensorFlow)
"""

from __future__ import annotations

import os
import re

import numpy as np

from bert_tf import file_io

WEIGHTS_NAME = "weights.safetensors"
FORMAT = "bert_tf.weights.v1"
ENCODER_PREFIX = "encoder/"
HEADS_PREFIX = "heads/"


def weights_path(model_dir: str) -> str:
    return os.path.join(model_dir, WEIGHTS_NAME)


def _encoder_of(model):
    from bert_tf.models import BertEncoder

    if isinstance(model, BertEncoder):
        return model
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"Expected a BertEncoder or a task model, got {type(model).__name__}.")
    return encoder


def named_weights(model) -> dict:
    """{file key: keras variable} for every weight of `model` (a `BertEncoder` or a task model)."""
    encoder = _encoder_of(model)
    encoder_ids = {id(v) for v in encoder.weights}
    named = {}
    for variable in model.weights:
        key = (ENCODER_PREFIX if id(variable) in encoder_ids else HEADS_PREFIX) + variable.path
        if key in named:
            raise ValueError(f"Two weights of the {type(model).__name__} share the path {key!r}.")
        named[key] = variable
    return named


def write_weights_file(model_dir: str, model, checkpoint: str | None = None) -> str:
    """Writes `model_dir/weights.safetensors` atomically; returns its path.

    Args:
      model_dir: an existing directory.
      model: a `BertEncoder` or a task model (`BertPretrainer`, `BertClassifier`, ...).
      checkpoint: the TF2 checkpoint holding the same weights, recorded in the metadata (its base name).
    """
    import keras
    from safetensors.numpy import save_file

    tensors = {
        key: np.ascontiguousarray(keras.ops.convert_to_numpy(variable.value).astype(np.float32))
        for key, variable in named_weights(model).items()
    }
    metadata = {
        "format": FORMAT,
        "model": type(model).__name__,
        "checkpoint": os.path.basename(checkpoint) if checkpoint else "",
        "keras_version": keras.__version__,
    }
    path = weights_path(model_dir)
    with file_io.atomic_path(path) as tmp:
        save_file(tensors, tmp, metadata=metadata)
        # safetensors writes a new file (mode 0600); give it an ordinary file's mode, as file_io does.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    return path


def read_weights_file(path: str) -> tuple[dict, dict]:
    """(tensors by key, metadata) of a weights file or of a model directory's."""
    from safetensors import safe_open

    if os.path.isdir(path):
        path = weights_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No {WEIGHTS_NAME} in {os.path.dirname(path)}.")
    with safe_open(path, framework="numpy") as f:
        metadata = dict(f.metadata() or {})
        if metadata.get("format") != FORMAT:
            raise ValueError(f"{path} is not a bert_tf weights file (format {metadata.get('format')!r}).")
        return {key: f.get_tensor(key) for key in f.keys()}, metadata


def latest_checkpoint_name(model_dir: str) -> str | None:
    """The latest TF2 checkpoint's base name from `model_dir/checkpoint`, read without TensorFlow."""
    state = os.path.join(model_dir, "checkpoint")
    if not os.path.exists(state):
        return None
    with open(state, encoding="utf-8") as f:
        match = re.search(r'^model_checkpoint_path:\s*"(.*)"', f.read(), re.MULTILINE)
    return os.path.basename(match.group(1)) if match else None


def has_pretraining_heads(path: str) -> bool:
    """Whether a weights file (or a model directory's) holds masked-LM and next-sentence weights."""
    from safetensors import safe_open

    if os.path.isdir(path):
        path = weights_path(path)
    with safe_open(path, framework="numpy") as f:
        heads = {key.split("/")[1] for key in f.keys() if key.startswith(HEADS_PREFIX)}
    return {"masked_lm", "next_sentence"} <= heads


def check_current(model_dir: str) -> None:
    """Fails if the directory's latest TF2 checkpoint is not the one its weights file was written from."""
    _, metadata = read_weights_file(model_dir)
    latest = latest_checkpoint_name(model_dir)
    written = metadata.get("checkpoint", "")
    if latest and written and latest != written:
        raise ValueError(
            f"{weights_path(model_dir)} holds the weights of {written}, but the latest checkpoint of {model_dir} is "
            f"{latest}; rewrite it with `python -m experiments.write_weights_file --model_dir={model_dir}` "
            "(needs TensorFlow)."
        )


def load_weights_file(model, path: str) -> None:
    """Sets every weight of `model` from a weights file (or a model directory's); works on every backend.

    Raises:
      ValueError: a weight of the model is missing from the file or has another shape there.
    """
    if os.path.isdir(path):
        check_current(path)
    tensors, _ = read_weights_file(path)
    named = named_weights(model)
    missing = sorted(key for key in named if key not in tensors)
    if missing:
        raise ValueError(
            f"{path} does not hold every weight of the {type(model).__name__}: missing {', '.join(missing[:5])}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            + "."
        )
    for key, variable in named.items():
        value = tensors[key]
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"{path}: {key} has shape {tuple(value.shape)}, the model's {tuple(variable.shape)}.")
        variable.assign(value)  # cast to the variable's dtype by Keras
