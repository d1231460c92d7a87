"""Reading HuggingFace BERT model directories (`config.json` + safetensors).

Weights are read with the `safetensors` package as numpy arrays; pickle-based
`pytorch_model.bin` files are never opened. Handled variations: `BertModel`
files (no prefix) and models with heads (`bert.` prefix); with or without the
pooler and the `cls.*` pretraining heads; old `LayerNorm.gamma/beta` names;
the masked-LM decoder weight tied to the word embeddings (absent, or present
as an identical copy); `cls.predictions.decoder.bias` in place of
`cls.predictions.bias`; single-file and sharded safetensors. The name table
is in `weight_mapping.py`.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np
from safetensors import SafetensorError, safe_open

from bert_tf.checkpoints.weight_mapping import SourceTensors, convert_weights
from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer

HF_CONFIG_NAME = "config.json"
HF_VOCAB_NAME = "vocab.txt"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
_PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")

_ENCODER_PREFIX = "bert."
_HEADS_PREFIX = "cls."
# Buffers that torch saves with the weights; they hold no learned values.
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"
_MLM_BIAS = "cls.predictions.bias"


def safetensors_files(directory: str) -> list[str]:
    """The safetensors file(s) of a HuggingFace model directory, shards included."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"HuggingFace model directory not found: {directory}")
    index_path = os.path.join(directory, SAFETENSORS_INDEX_NAME)
    single_path = os.path.join(directory, SAFETENSORS_NAME)
    if os.path.exists(single_path):
        return [single_path]
    if os.path.exists(index_path):
        try:
            with open(index_path, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{index_path}: not a valid safetensors index ({e!r}).") from None
        files = [os.path.join(directory, name) for name in sorted(set(weight_map.values()))]
        absent = [f for f in files if not os.path.exists(f)]
        if absent:
            raise FileNotFoundError(f"{index_path} names shard(s) that do not exist: {', '.join(absent)}")
        return files
    pickled = [name for name in _PICKLE_WEIGHTS if os.path.exists(os.path.join(directory, name))]
    hint = (
        f" It has {', '.join(pickled)}, which is not read: only safetensors are (a pickled "
        "pytorch_model.bin can run arbitrary code). Save the model with "
        "save_pretrained(safe_serialization=True) first."
        if pickled
        else ""
    )
    raise FileNotFoundError(f"No {SAFETENSORS_NAME} or {SAFETENSORS_INDEX_NAME} in {directory}.{hint}")


def _read_bfloat16(path: str, name: str) -> np.ndarray:
    """Reads a BF16 tensor (which numpy lacks) as float32, straight from the safetensors layout."""
    with open(path, "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        entry = json.loads(f.read(header_size))[name]
        begin, end = entry["data_offsets"]
        f.seek(8 + header_size + begin)
        raw = np.frombuffer(f.read(end - begin), dtype="<u2")
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def _normalise_name(name: str) -> str:
    """Our spelling of a HuggingFace tensor name: no `bert.` prefix, LayerNorm weight/bias."""
    if name.startswith(_ENCODER_PREFIX):
        name = name[len(_ENCODER_PREFIX) :]
    if name.endswith("LayerNorm.gamma"):
        name = name[: -len("gamma")] + "weight"
    elif name.endswith("LayerNorm.beta"):
        name = name[: -len("beta")] + "bias"
    return name


def read_hf_directory(directory: str) -> SourceTensors:
    """The tensors of a HuggingFace BERT directory, under normalised names."""
    shapes, locations, display = {}, {}, {}
    for path in safetensors_files(directory):
        try:
            with safe_open(path, framework="np") as f:
                entries = [(original, f.get_slice(original)) for original in f.keys()]
                entries = [(original, tuple(s.get_shape()), s.get_dtype()) for original, s in entries]
        except (OSError, SafetensorError) as e:
            raise ValueError(f"Cannot read safetensors file {path}: {e}") from None
        for original, shape, dtype in entries:
            name = _normalise_name(original)
            if name in shapes:
                raise ValueError(f"{path}: {original} and {display[name]} are the same weight ({name}) stored twice.")
            shapes[name], locations[name], display[name] = shape, (path, original, dtype), original

    def read(name):
        path, original, dtype = locations[name]
        if dtype == "BF16":
            return _read_bfloat16(path, original)
        try:
            with safe_open(path, framework="np") as f:
                return f.get_tensor(original)
        except (OSError, SafetensorError) as e:
            raise ValueError(f"Cannot read tensor {original} of {path}: {e}") from None

    description = f"HuggingFace model {directory}"
    ignored = [name for name in _BUFFERS if name in shapes]
    if _DECODER_BIAS in shapes and _MLM_BIAS not in shapes:
        # Some exports keep only the decoder's copy of the (tied) masked-LM bias.
        for table in (shapes, locations, display):
            table[_MLM_BIAS] = table.pop(_DECODER_BIAS)
    ignored += _tied_duplicates(shapes, read, display, description)
    weights = {name: shape for name, shape in shapes.items() if name not in ignored}
    prefixed = any(original.startswith(_ENCODER_PREFIX) for original in display.values())

    def spell_absent(name):
        return _ENCODER_PREFIX + name if prefixed and not name.startswith(_HEADS_PREFIX) else name

    return SourceTensors(
        weights,
        read,
        description=description,
        display_names={n: o for n, o in display.items() if n != o},
        ignored=ignored,
        spell_absent=spell_absent,
    )


def _tied_duplicates(shapes: dict, read, display: dict, description: str) -> list[str]:
    """Checks the masked-LM decoder copies; returns the names that duplicate another weight.

    Our masked-LM head ties its output matrix to the word embeddings and has
    one output bias, as the original BERT. A decoder weight or a second bias
    that differs from what it should duplicate cannot be represented, so it is
    an error rather than something to drop.
    """
    duplicates = []
    for copy, original, what in (
        (
            _DECODER_WEIGHT,
            _WORD_EMBEDDINGS,
            "the masked-LM output matrix is tied to the "
            "word embeddings (as in BERT); untied decoder weights are not supported",
        ),
        (_DECODER_BIAS, _MLM_BIAS, "the masked-LM head has a single output bias"),
    ):
        if copy not in shapes:
            continue
        if original not in shapes:
            raise ValueError(f"{description}: has {display[copy]} but no {original} to tie it to.")
        if shapes[copy] != shapes[original] or not np.array_equal(read(copy), read(original)):
            raise ValueError(f"{description}: {display[copy]} differs from {display[original]}; {what}.")
        duplicates.append(copy)
    return duplicates


def hf_bert_config(directory: str) -> BertConfig:
    """The `BertConfig` of a HuggingFace BERT directory's `config.json`."""
    path = os.path.join(directory, HF_CONFIG_NAME)
    config = BertConfig.from_hf_json_file(path)
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    if values.get("is_decoder") or values.get("add_cross_attention"):
        raise ValueError(
            f"{path}: is_decoder/add_cross_attention is set; only the bidirectional BERT encoder is supported."
        )
    return config


def hf_companion_files(directory: str) -> tuple[str, str]:
    """`config.json` and `vocab.txt` of a HuggingFace model directory."""
    return os.path.join(directory, HF_CONFIG_NAME), os.path.join(directory, HF_VOCAB_NAME)


def convert_hf_directory(
    directory: str, heads: str = "auto", allow_missing_pooler: bool = False
) -> BertEncoder | BertPretrainer:
    """A `BertPretrainer` or `BertEncoder` holding the weights of a HuggingFace BERT directory.

    Args:
      directory: holds `config.json` and `model.safetensors` (or a sharded
        `model.safetensors.index.json`), as written by `save_pretrained`.
      heads: "auto", "pretraining" or "none"; see `weight_mapping.convert_weights`.
      allow_missing_pooler: keep an initialised pooler when the files have none
        (e.g. `BertModel(add_pooling_layer=False)`, `BertForMaskedLM`).

    Returns:
      A `BertPretrainer` for `BertForPreTraining` weights, else a `BertEncoder`.
    """
    config = hf_bert_config(directory)
    source = read_hf_directory(directory)
    return convert_weights(
        config,
        source,
        "hf",
        heads=heads,
        allow_missing_pooler=allow_missing_pooler,
        config_description=os.path.join(directory, HF_CONFIG_NAME),
    )
