"""`extract_features`: per-token activations of chosen encoder layers, as BERT's `extract_features.py`.

Input: a text file with one example per line, either a text or a pair
`text_a ||| text_b`. Output, by the file's extension:

* `.jsonl`: one JSON object per line, as the original script writes it:
  `{"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index": -1,
  "values": [...]}, ...]}, ...]}` for the real (unpadded) tokens, values
  rounded to 6 decimals. (`linex_index` is the original's key, kept for
  compatibility.)
* `.npy`: float32 [num_lines, max_seq_length, num_layers, hidden_size], the
  layers in `layers` order; padding positions are zero.
* `.npz`: `layer_<index>` float32 [num_lines, max_seq_length, hidden_size] per
  layer, plus the int32 `input_word_ids`, `input_mask` and `input_type_ids`.

Layers index the encoder's `encoder_outputs` (every Transformer layer's
output): -1 is the last layer, 0 the first. Results are streamed to a
temporary file and renamed at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Optional, Sequence

import numpy as np

from bert_tf.tasks.base import ENCODER_INPUT_KEYS
from bert_tf import cli, file_io
from bert_tf.tasks.readers import DataError

OUTPUT_FORMATS = (".jsonl", ".npy", ".npz")
PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\| (.*)$")


def read_lines(input_file: str) -> tuple[list[str], list[Optional[str]]]:
    """Reads `text` or `text_a ||| text_b` lines; returns (texts_a, texts_b with None for single texts)."""
    try:
        with open(input_file, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        raise DataError(f"--input_file not found: {input_file}") from None
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1
        raise DataError(f"--input_file: {input_file}:{line}: not valid UTF-8 ({e.reason}).") from None
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise DataError(f"{input_file}: no lines.")
    texts_a, texts_b = [], []
    for line in lines:
        line = line.strip()
        match = PAIR_SEPARATOR.match(line)
        texts_a.append(match.group(1) if match else line)
        texts_b.append(match.group(2) if match else None)
    return texts_a, texts_b


def extract_features(
    input_file: str,
    output_file: str,
    *,
    model_dir: Optional[str] = None,
    init_checkpoint: Optional[str] = None,
    bert_config_file: Optional[str] = None,
    vocab_file: Optional[str] = None,
    layers: Sequence[int] = (-1, -2, -3, -4),
    max_seq_length: int = 128,
    batch_size: int = 32,
    do_lower_case: bool = True,
    strategy=None,
    jit_compile: bool = False,
) -> str:
    """Writes the activations of `layers` for every line of `input_file` to `output_file`; returns its path.

    The model comes from `model_dir` (bert_config.json, vocab.txt, checkpoint)
    or `init_checkpoint` + `bert_config_file` + `vocab_file` (each of which
    also overrides the model directory's).
    """
    import tensorflow as tf

    from bert_tf.checkpoints.model_dir import CONFIG_NAME, VOCAB_NAME, restore
    from bert_tf.config import BertConfig
    from bert_tf.models import BertEncoder
    from bert_tf.tasks.base import FEATURE_INDEX_KEY, with_feature_index
    from bert_tf.tasks.inference import iterate_outputs
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    extension = os.path.splitext(output_file)[1].lower()
    if extension not in OUTPUT_FORMATS:
        raise ValueError(f"--output_file must end in {', '.join(OUTPUT_FORMATS)}, got {output_file}.")
    if max_seq_length < 3 or batch_size < 1:
        raise ValueError(f"--max_seq_length must be >= 3 and --batch_size >= 1, got {max_seq_length}, {batch_size}.")
    if model_dir:
        bert_config_file = bert_config_file or os.path.join(model_dir, CONFIG_NAME)
        vocab_file = vocab_file or os.path.join(model_dir, VOCAB_NAME)
        init_checkpoint = init_checkpoint or model_dir
    if not (bert_config_file and vocab_file and init_checkpoint):
        raise ValueError("Give --model_dir, or --init_checkpoint with --bert_config_file and --vocab_file.")
    try:
        config = BertConfig.from_json_file(bert_config_file)
    except ValueError as e:
        raise ValueError(f"--bert_config_file={bert_config_file}: {e}") from None
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"--max_seq_length={max_seq_length} exceeds the model's max_position_embeddings "
            f"({config.max_position_embeddings})."
        )
    num_layers = config.num_hidden_layers
    layers = [int(layer) for layer in layers]
    bad = [layer for layer in layers if not -num_layers <= layer < num_layers]
    if bad or not layers:
        raise ValueError(
            f"--layers {bad or layers} out of range: the model has {num_layers} layers "
            f"(use -{num_layers}..{num_layers - 1}; -1 is the last)."
        )

    texts_a, texts_b = read_lines(input_file)
    cli.load_vocab(vocab_file, "vocab_file")  # errors naming the flag, file and line
    tokenizer = TaskTokenizer(vocab_file, lower_case=do_lower_case)
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(
            f"--vocab_file: {vocab_file} has {tokenizer.vocab_size} tokens but the model's "
            f"vocab_size is {config.vocab_size}."
        )
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        encoder = BertEncoder(config)
    restore(encoder, init_checkpoint)

    def model(inputs, training=False):
        outputs = encoder(inputs, training=training)["encoder_outputs"]
        return {
            "layers": tf.stack([outputs[layer] for layer in layers], axis=2),
            **{name: tf.cast(inputs[name], tf.float32) for name in inputs},
        }

    has_pairs = any(b is not None for b in texts_b)
    columns = {"text_a": np.array(texts_a, dtype=str)}
    if has_pairs:
        columns["text_b"] = np.array([b or "" for b in texts_b], dtype=str)
        columns["has_text_b"] = np.array([b is not None for b in texts_b])
    columns = with_feature_index(columns, batch_size, training=False)
    dataset = tf.data.Dataset.from_tensor_slices(columns).batch(batch_size, drop_remainder=True)
    dataset = dataset.map(tokenizer.pack_fn(max_seq_length)).prefetch(tf.data.AUTOTUNE)

    # Written under a temporary name and renamed when complete, so a failed run leaves no partial output.
    with file_io.atomic_path(output_file) as tmp_path:
        writer = _WRITERS[extension](tmp_path, len(texts_a), max_seq_length, layers, config.hidden_size, tokenizer)
        try:
            for batch in iterate_outputs(model, dataset, strategy=strategy, jit_compile=jit_compile):
                mask = batch["input_mask"].astype(np.int32)
                batch["layers"] *= mask[:, :, None, None]
                writer.write(
                    batch[FEATURE_INDEX_KEY],
                    batch["layers"],
                    batch["input_word_ids"].astype(np.int32),
                    mask,
                    batch["input_type_ids"].astype(np.int32),
                )
            writer.close()
        except BaseException:
            writer.abort()
            raise
    return output_file


class _Writer:
    """Streams rows into `path` (the output's temporary name); `close` checks every line was written."""

    def __init__(self, path, num_lines, seq_length, layers, hidden_size, tokenizer):
        self.path = path
        self.num_lines = num_lines
        self.seq_length = seq_length
        self.layers = layers
        self.hidden_size = hidden_size
        self.tokenizer = tokenizer
        self.written = 0

    def abort(self):
        pass

    def _check_complete(self):
        if self.written != self.num_lines:
            raise RuntimeError(f"Wrote {self.written} of {self.num_lines} lines.")


class _JsonlWriter(_Writer):
    def __init__(self, *args):
        super().__init__(*args)
        self.file = open(self.path, "w", encoding="utf-8")

    def write(self, indices, layer_values, word_ids, mask, type_ids):
        for row, index in enumerate(indices.tolist()):
            features = []
            for position in range(int(mask[row].sum())):
                features.append(
                    {
                        "token": self.tokenizer.vocab[word_ids[row, position]],
                        "layers": [
                            {"index": layer, "values": [round(float(v), 6) for v in layer_values[row, position, i]]}
                            for i, layer in enumerate(self.layers)
                        ],
                    }
                )
            self.file.write(json.dumps({"linex_index": index, "features": features}) + "\n")
            self.written += 1

    def close(self):
        self.file.close()
        self._check_complete()

    def abort(self):
        self.file.close()


class _NpyWriter(_Writer):
    def __init__(self, *args):
        super().__init__(*args)
        self.array = np.lib.format.open_memmap(
            self.path,
            mode="w+",
            dtype=np.float32,
            shape=(self.num_lines, self.seq_length, len(self.layers), self.hidden_size),
        )

    def write(self, indices, layer_values, word_ids, mask, type_ids):
        self.array[indices] = layer_values
        self.written += len(indices)

    def close(self):
        self.array.flush()
        del self.array
        self._check_complete()


class _NpzWriter(_Writer):
    """Fills one memory-mapped array per layer and input in a scratch directory, then zips them into `path`."""

    def __init__(self, *args):
        super().__init__(*args)
        self.scratch = tempfile.mkdtemp(prefix=".features-", dir=os.path.dirname(os.path.abspath(self.path)))
        shape = (self.num_lines, self.seq_length)
        self.arrays = {
            f"layer_{layer}": self._memmap(f"layer_{layer}", shape + (self.hidden_size,), np.float32)
            for layer in self.layers
        }
        for name in ENCODER_INPUT_KEYS:
            self.arrays[name] = self._memmap(name, shape, np.int32)

    def _memmap(self, name, shape, dtype):
        return np.lib.format.open_memmap(os.path.join(self.scratch, name + ".npy"), mode="w+", dtype=dtype, shape=shape)

    def write(self, indices, layer_values, word_ids, mask, type_ids):
        for i, layer in enumerate(self.layers):
            self.arrays[f"layer_{layer}"][indices] = layer_values[:, :, i]
        self.arrays["input_word_ids"][indices] = word_ids
        self.arrays["input_mask"][indices] = mask
        self.arrays["input_type_ids"][indices] = type_ids
        self.written += len(indices)

    def close(self):
        self._check_complete()
        with open(self.path, "wb") as f:  # a file object: np.savez would append ".npz" to the temporary name
            np.savez(f, **self.arrays)
        self.abort()

    def abort(self):
        self.arrays.clear()
        shutil.rmtree(self.scratch, ignore_errors=True)


_WRITERS = {".jsonl": _JsonlWriter, ".npy": _NpyWriter, ".npz": _NpzWriter}
