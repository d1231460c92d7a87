"""`extract_features`: activations of chosen encoder layers, per token (as BERT's `extract_features.py`) or
pooled per line (sentence features).

Input: a text file with one example per line, either a text or a pair
`text_a ||| text_b`. Layers: Transformer layer indices as in the original
(0 the first, -1 the last), `embeddings` (the embedding layer's output, the
first Transformer layer's input) or `all` (`bert_tf.features.layer_selection`).

    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.extract_features import FeatureExtractionConfig, run_feature_extraction

    config = FeatureExtractionConfig("input.txt", ModelSource(model_dir="models/minilm"), layers=(-1,),
                                     pooling="mean", normalize=True)
    run_feature_extraction("embeddings.npy", config)

Per-token output (`pooling=None`), by the file's extension:

* `.jsonl`: one JSON object per line, as the original script writes it:
  `{"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index": -1,
  "values": [...]}, ...]}, ...]}` for the real (unpadded) tokens, values
  rounded to 6 decimals. (`linex_index` is the original's key, kept for
  compatibility.)
* `.npy`: float32 [num_lines, max_seq_length, num_layers, hidden_size], the
  layers in `layers` order; padding positions are zero.
* `.npz`: `layer_<name>` float32 [num_lines, max_seq_length, hidden_size] per
  layer (`layer_-1`, `layer_embeddings`), plus the int32 `input_word_ids`,
  `input_mask` and `input_type_ids`.

Sentence features (`pooling` "cls", "mean" or "max" over real tokens, or
"pooled": the pooler's dense + tanh on [CLS]), optionally scaled to unit
length (`normalize`): `.jsonl` lines `{"linex_index": i, "layers": [{"index":
-1, "values": [...]}]}`, `.npy` [num_lines, num_layers, hidden_size], `.npz`
`layer_<name>` [num_lines, hidden_size] (`pooled` for the pooler) and the
packed inputs. sentence-transformers' embedding of all-MiniLM-L6-v2 is
`layers=(-1,), pooling="mean", normalize=True`.

Lines are packed at `max_seq_length`, then run in batches of similar length
padded to multiples of `bucket_width` (`bert_tf.data.length_buckets`; 0
turns it off): the outputs are the same, minus most of the padding's cost.
Results are streamed to a temporary file and renamed at the end.

A text longer than the window (`max_seq_length` - 2 pieces) is cut as `long_text` says
(`bert_tf.tasks.long_text`): `truncate` keeps its first pieces, `head_tail` its first and last, and `windows`
reads all of it in windows, each a line of its own for the encoder (packed rows too: short documents' windows
share rows), put together per document (`bert_tf.features.document_windows`): a sentence feature is the mean of
the windows' vectors (then `normalize`), per-token features are `[CLS] pieces [SEP]` with each piece once, from
the window where it has the most context (the arrays' second axis is then the longest document's tokens).
Whatever `long_text` is, the job logs how many lines were longer than the window and the share of their pieces
dropped, and writes it with the run's settings to `<output_file>.summary.json` (`SUMMARY_SUFFIX`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile

import numpy as np
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints.model_source import ModelSource
from bert_tf.data.length_buckets import DEFAULT_BUCKET_WIDTH
from bert_tf.data.text_inputs import pack_texts
from bert_tf.errors import DataError, JobArgumentError, check_int
from bert_tf.features.layer_selection import check_layer_specs, parse_layers, select_layers
from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES
from bert_tf.tasks.long_text import LongTextConfig, cut_report, describe_cut, truncate_unless_given

OUTPUT_FORMATS = (".jsonl", ".npy", ".npz")
POOLINGS = ("cls", "mean", "max", "pooled")
PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\| (.*)$")
POOLED = "pooled"
# Beside the output: the run's settings and what was cut of the texts.
SUMMARY_SUFFIX = ".summary.json"


def read_lines(input_file: str) -> tuple[list[str], list[str | None]]:
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


@dataclasses.dataclass(frozen=True)
class FeatureExtractionConfig:
    """What to extract and how (the flags of `experiments.extract_features` of the same names).

    Attributes:
      input_file: one `text` or `text_a ||| text_b` per line.
      model: the model's files (`model_dir`, or `init_checkpoint` + `bert_config_file` + `vocab_file`, each
        of which also overrides the model directory's; `do_lower_case`).
      layers: Transformer layer indices (0 the first, -1 the last), "embeddings" or "all"; not used with
        `pooling="pooled"` (the pooler's output is the one feature).
      pooling: None (per-token features), or one of `POOLINGS`: one vector per line.
      normalize: scale each pooled vector to unit L2 length (needs `pooling`).
      max_seq_length: packed sequence length; a longer line is cut as `long_text_config` says.
      batch_size: lines per forward pass.
      bucket_width: batches are padded to multiples of it (outputs unchanged); 0: to max_seq_length.
      packing: run rows of max_seq_length tokens filled with whole lines, each computed as if alone
        (`bert_tf.data.packed_rows`; outputs unchanged to float rounding), `batch_size` lines a batch on
        average (the default; None means it too); False: one line a row in length buckets. With windows, each
        window is a line.
      long_text_config: texts longer than the window (`bert_tf.tasks.long_text`: --long_text, --window_stride,
        --max_windows); head_tail and windows are for single texts.
    """

    input_file: str
    model: ModelSource
    layers: tuple = (-1, -2, -3, -4)
    pooling: str | None = None
    normalize: bool = False
    max_seq_length: int = 128
    batch_size: int = 32
    bucket_width: int = DEFAULT_BUCKET_WIDTH
    packing: bool | None = True
    long_text_config: LongTextConfig = LongTextConfig()

    def __post_init__(self):
        if self.packing is None:  # the --packing flag left unset: the default
            object.__setattr__(self, "packing", True)
        if not self.input_file:
            raise JobArgumentError("--input_file is required.")
        object.__setattr__(self, "layers", check_layer_specs(self.layers))
        check_int("max_seq_length", self.max_seq_length, minimum=3)  # [CLS], one piece, [SEP]
        check_int("batch_size", self.batch_size)
        check_int("bucket_width", self.bucket_width, minimum=0)
        if self.pooling is not None and self.pooling not in POOLINGS:
            raise JobArgumentError(f"--pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}.")
        if self.normalize and self.pooling is None:
            raise JobArgumentError("--normalize needs --pooling: it scales sentence features to unit length.")
        self.long_text_config.check_window(self.max_seq_length)


def run_feature_extraction(
    output_file: str, config: FeatureExtractionConfig, *, strategy=None, jit_compile: bool = False
) -> str:
    """Writes the activations of `config.layers` for every line of `config.input_file` to `output_file`.

    `output_file` ends in one of `OUTPUT_FORMATS`; see the module docstring for the layouts. `strategy`: a
    `tf.distribute` strategy to run the forward passes under (default: the current one); `jit_compile`: XLA-
    compile the forward pass. Returns `output_file`.

    Raises:
      JobArgumentError: an option or model that cannot work (naming the flag), before anything is written.
      DataError: a missing or unreadable input file.
    """
    import tensorflow as tf

    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.models import BertEncoder
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    extension = os.path.splitext(output_file)[1].lower()
    if extension not in OUTPUT_FORMATS:
        raise JobArgumentError(f"--output_file must end in {', '.join(OUTPUT_FORMATS)}, got {output_file}.")
    max_seq_length, long_text = config.max_seq_length, truncate_unless_given(config.long_text_config)
    model = config.model.resolve(max_seq_length)
    names, positions = _layer_names(config.layers, config.pooling, model.config.num_hidden_layers)

    texts_a, texts_b = read_lines(config.input_file)
    _check_single_texts(long_text, texts_b, config.input_file)
    tokenizer = TaskTokenizer(model.vocab_file, lower_case=model.do_lower_case)
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        encoder = BertEncoder(model.config)
    restore(encoder, model.checkpoint)

    packed, plan, cut = _encoder_rows(tokenizer, texts_a, texts_b, max_seq_length, long_text)
    for line in describe_cut(cut, "extract_features", long_text.long_text, max_seq_length - 2):
        logging.info(line)
    per_token = config.pooling is None
    if plan is None:
        sink = _RowSink(packed, max_seq_length)
    else:
        sink = _DocumentSink(plan, tokenizer, per_token, config.normalize)
    # Written under a temporary name and renamed when complete, so a failed run leaves no partial output.
    with file_io.atomic_path(output_file) as tmp_path:
        writer = _WRITERS[extension](
            tmp_path, len(texts_a), sink.seq_length, names, model.config.hidden_size, tokenizer
        )
        writer.per_token = per_token
        writer.open()
        try:
            forward = _forward_fn(encoder, config, positions)
            _extract(forward, _row_batches(packed, config), sink, writer, config, strategy, jit_compile)
            writer.close()
        except BaseException:
            writer.abort()
            raise
    file_io.write_json(output_file + SUMMARY_SUFFIX, _summary(output_file, config, len(texts_a), cut))
    return output_file


def _layer_names(layers: tuple, pooling: str | None, num_layers: int):
    """(the output's layer names, their positions in `all_layers`); the pooler's output: ([POOLED], None)."""
    if pooling == POOLED:
        return [POOLED], None
    names = parse_layers(layers, num_layers)
    return names, select_layers(names, num_layers)


def _forward_fn(encoder, config: FeatureExtractionConfig, positions):
    """The forward pass over a batch of rows, packed or one text a row; with windows a document's vector is
    scaled to unit length after its windows' are averaged (`_DocumentSink`), not each window's."""
    from bert_tf.data import packed_rows

    pooling = config.pooling
    normalize_rows = config.normalize and not config.long_text_config.windows
    slots = packed_rows.max_examples_per_row(config.max_seq_length)

    def forward(inputs, training=False):
        if config.packing:
            return _packed_forward(encoder, inputs, pooling, positions, normalize_rows, slots)
        return _unpacked_forward(encoder, inputs, pooling, positions, normalize_rows)

    return forward


def _extract(forward, dataset, sink, writer, config: FeatureExtractionConfig, strategy, jit_compile: bool):
    """Runs `forward` over `dataset` and hands each batch's values to `sink` (per token: padded back to
    max_seq_length, the padding beyond the bucket being zero)."""
    from bert_tf.tasks.base import FEATURE_INDEX_KEY
    from bert_tf.tasks.inference import iterate_outputs

    batches = iterate_outputs(forward, dataset, strategy=strategy, jit_compile=jit_compile, label="Extracting features")
    for batch in batches:
        values = batch["layers"]
        if config.pooling is None:
            values = np.pad(values, ((0, 0), (0, config.max_seq_length - values.shape[1]), (0, 0), (0, 0)))
        sink.write(writer, batch[FEATURE_INDEX_KEY], values)


def _check_single_texts(long_text: LongTextConfig, texts_b, input_file: str) -> None:
    """head_tail and windows cut one text: a pair line is refused, naming it."""
    pair = next((number for number, text_b in enumerate(texts_b, 1) if text_b is not None), None)
    if long_text.long_text != "truncate" and pair is not None:
        raise JobArgumentError(
            f"--long_text={long_text.long_text} is for single texts; {input_file}:{pair} is a pair (text_a ||| text_b)."
        )


def _encoder_rows(tokenizer, texts_a, texts_b, max_seq_length: int, long_text: LongTextConfig):
    """(encoder inputs [rows, max_seq_length], the windows' `DocumentWindows` or None, the cut report).

    Without windows a row is a line (its texts cut as `long_text` says); with windows, a window of a document.
    """
    from bert_tf.features.document_windows import DocumentWindows

    pieces_a = tokenizer.tokenize(list(texts_a))
    if long_text.windows:
        plan = DocumentWindows.plan(pieces_a, max_seq_length - 2, long_text)
        return plan.rows(tokenizer, max_seq_length)[0], plan, plan.cut_report()
    packed = pack_texts(tokenizer, texts_a, texts_b, max_seq_length, head_tail=long_text.long_text == "head_tail")
    pairs = np.array([b is not None for b in texts_b])
    num_pieces = np.array([len(p) for p in pieces_a], np.int64)
    if pairs.any():
        pieces_b = tokenizer.tokenize([b or "" for b in texts_b])
        num_pieces += np.array([len(p) for p in pieces_b]) * pairs
    specials = 2 + pairs.astype(np.int64)  # [CLS] [SEP] (and a pair's second [SEP])
    kept = packed["input_mask"].sum(axis=1) - specials
    return packed, None, cut_report(num_pieces, kept, max_seq_length - specials)


def _summary(output_file: str, config: FeatureExtractionConfig, num_lines: int, cut: dict) -> dict:
    """`<output_file>.summary.json`: what was extracted, and what was cut of the texts (`cut_report`)."""
    return {
        "output_file": os.path.abspath(output_file),
        "lines": num_lines,
        "max_seq_length": config.max_seq_length,
        "pooling": config.pooling,
        "normalize": config.normalize,
        "packing": config.packing,
        "long_text": truncate_unless_given(config.long_text_config).recorded(),
        "cut": cut,
    }


class _RowSink:
    """Hands the writer each batch of lines as it comes (a line is a row)."""

    def __init__(self, packed: dict, seq_length: int):
        self.packed = packed
        self.seq_length = seq_length

    def write(self, writer, indices, values):
        writer.write_inputs(indices, {name: self.packed[name][indices] for name in ENCODER_INPUT_NAMES})
        writer.write(indices, values)


class _DocumentSink:
    """Hands the writer each document once all its windows are in (`DocumentAssembler`); per token, each
    document's tokens padded to the longest document's (`seq_length`)."""

    def __init__(self, plan, tokenizer, per_token: bool, normalize: bool):
        from bert_tf.features.document_windows import DocumentAssembler

        self.plan, self.tokenizer, self.per_token, self.normalize = plan, tokenizer, per_token, normalize
        self.assembler = DocumentAssembler(plan, per_token)
        self.seq_length = max(plan.document_length(d) for d in range(plan.num_documents))

    def write(self, writer, indices, values):
        done = self.assembler.add(indices, values)
        if not done:
            return
        documents = np.array([document for document, _ in done], np.int64)
        if self.per_token:
            stacked = np.zeros((len(done), self.seq_length) + values.shape[2:], np.float32)
            for row, (_, value) in enumerate(done):
                stacked[row, : len(value)] = value
        else:
            stacked = np.stack([value for _, value in done]).astype(np.float32)
            if self.normalize:
                stacked /= np.maximum(np.linalg.norm(stacked, axis=-1, keepdims=True), 1e-12)
        writer.write_inputs(documents, self.plan.document_inputs(documents, self.seq_length, self.tokenizer))
        writer.write(documents, stacked)


def _row_batches(rows: dict, config: FeatureExtractionConfig):
    """The encoder inputs' batches: packed rows (which log the share of real tokens) or one line a row in length
    buckets (which log the batches' count and lengths)."""
    from bert_tf.data import packed_rows
    from bert_tf.data.length_buckets import bucketed_dataset

    if config.packing:
        lengths = rows["input_mask"].sum(axis=1)
        tables = packed_rows.inference_row_batches(lengths, config.batch_size, config.max_seq_length)
        return packed_rows.gather_packed_batches(tables, rows, config.max_seq_length)
    return bucketed_dataset(rows, config.batch_size, config.max_seq_length, config.bucket_width)[0]


def _unpacked_forward(encoder, inputs, pooling, positions, normalize):
    """`forward` on one line a row: per-token features [batch, seq, layers, hidden] (zero at padding), or one
    vector per line [batch, layers, hidden]."""
    import tensorflow as tf

    from bert_tf.features.layer_selection import all_layers
    from bert_tf.features.pooling import l2_normalize, pool_tokens

    outputs = encoder(inputs, training=False)
    if pooling == POOLED:
        values = outputs["pooled_output"][:, None, :]
    else:
        every_layer = all_layers(outputs)
        values = tf.stack([every_layer[i] for i in positions], axis=2)  # [batch, seq, layers, hidden]
        mask = tf.cast(inputs["input_mask"], values.dtype)
        if pooling is None:
            values *= mask[:, :, None, None]
        else:
            values = pool_tokens(values, mask, pooling)
    if normalize:
        values = l2_normalize(values)
    return {"layers": values}


def _packed_forward(encoder, inputs, pooling, positions, normalize, slots):
    """`forward` on packed rows: per-token features [rows, seq, layers, hidden] (unpacked per line by
    `iterate_outputs`), or one vector per example slot [rows, slots, layers, hidden]."""
    import tensorflow as tf

    from bert_tf.features.layer_selection import all_layers
    from bert_tf.features.pooling import l2_normalize

    outputs = encoder.packed_outputs(inputs, slots)
    if pooling == POOLED:
        values = outputs["pooled_output"][:, :, None, :]
    else:
        every_layer = all_layers(outputs)
        values = tf.stack([every_layer[i] for i in positions], axis=2)  # [rows, seq, layers, hidden]
        mask = tf.cast(inputs["input_mask"], values.dtype)
        values *= mask[:, :, None, None]
        if pooling is not None:
            values = _pool_examples(values, inputs["input_example_ids"], slots, pooling)
    if normalize:
        values = l2_normalize(values)
    return {"layers": values}


def _pool_examples(values, example_ids, slots: int, method: str):
    """Pools [rows, seq, ...] token features per example of each row: [rows, slots, ...] (segment reductions)."""
    import tensorflow as tf

    example_ids = tf.cast(example_ids, tf.int32)
    rows = tf.shape(example_ids)[0]
    # Example k of row r is segment r * slots + k - 1; padding goes to one extra segment, dropped at the end.
    row_offsets = tf.range(rows)[:, None] * slots
    segments = tf.reshape(tf.where(example_ids > 0, row_offsets + example_ids - 1, rows * slots), [-1])
    flat = tf.reshape(values, [-1] + values.shape[2:].as_list())
    num_segments = rows * slots + 1
    if method == "cls":  # the only token of its example at position 0: a sum of it alone
        previous = tf.pad(example_ids[:, :-1], [[0, 0], [1, 0]])
        first = tf.reshape(tf.cast(example_ids != previous, flat.dtype), [-1] + [1] * (flat.shape.rank - 1))
        pooled = tf.math.unsorted_segment_sum(flat * first, segments, num_segments)
    elif method == "mean":
        counts = tf.math.unsorted_segment_sum(tf.ones_like(segments, flat.dtype), segments, num_segments)
        pooled = tf.math.unsorted_segment_sum(flat, segments, num_segments)
        pooled /= tf.reshape(tf.maximum(counts, 1.0), [-1] + [1] * (flat.shape.rank - 1))
    else:  # max
        pooled = tf.math.unsorted_segment_max(flat, segments, num_segments)
    return tf.reshape(pooled[: rows * slots], tf.concat([[rows, slots], tf.shape(values)[2:]], axis=0))


class _Writer:
    """Streams rows into `path` (the output's temporary name); `close` checks every line was written.

    `write` takes `values` [rows, max_seq_length, layers, hidden] per token or [rows, layers, hidden] per line.
    """

    per_token = True

    def __init__(self, path, num_lines, seq_length, layers, hidden_size, tokenizer):
        self.path = path
        self.num_lines = num_lines
        self.seq_length = seq_length
        self.layers = layers
        self.hidden_size = hidden_size
        self.tokenizer = tokenizer
        self.written = 0
        self.inputs = {}

    def open(self):
        pass

    def row_shape(self):
        return ((self.seq_length,) if self.per_token else ()) + (self.hidden_size,)

    def write_inputs(self, indices, inputs):
        self.inputs = inputs

    def abort(self):
        pass

    def _check_complete(self):
        if self.written != self.num_lines:
            raise RuntimeError(f"Wrote {self.written} of {self.num_lines} lines.")


class _JsonlWriter(_Writer):
    def open(self):
        self.file = open(self.path, "w", encoding="utf-8")

    def _values(self, layer_values):
        return [
            {"index": layer, "values": [round(float(v), 6) for v in layer_values[i]]}
            for i, layer in enumerate(self.layers)
        ]

    def write(self, indices, values):
        word_ids, mask = self.inputs["input_word_ids"], self.inputs["input_mask"]
        for row, index in enumerate(indices.tolist()):
            if not self.per_token:
                record = {"linex_index": index, "layers": self._values(values[row])}
            else:
                features = [
                    {
                        "token": self.tokenizer.vocab[word_ids[row, position]],
                        "layers": self._values(values[row, position]),
                    }
                    for position in range(int(mask[row].sum()))
                ]
                record = {"linex_index": index, "features": features}
            self.file.write(json.dumps(record) + "\n")
            self.written += 1

    def close(self):
        self.file.close()
        self._check_complete()

    def abort(self):
        self.file.close()


class _NpyWriter(_Writer):
    def open(self):
        shape = (self.num_lines,) + self.row_shape()
        shape = shape[:-1] + (len(self.layers), self.hidden_size)
        self.array = np.lib.format.open_memmap(self.path, mode="w+", dtype=np.float32, shape=shape)

    def write(self, indices, values):
        self.array[indices] = values
        self.written += len(indices)

    def close(self):
        self.array.flush()
        del self.array
        self._check_complete()


class _NpzWriter(_Writer):
    """Fills one memory-mapped array per layer and input in a scratch directory, then zips them into `path`."""

    def open(self):
        self.scratch = tempfile.mkdtemp(prefix=".features-", dir=os.path.dirname(os.path.abspath(self.path)))
        self.arrays = {
            self._key(layer): self._memmap(self._key(layer), (self.num_lines,) + self.row_shape(), np.float32)
            for layer in self.layers
        }
        for name in ENCODER_INPUT_NAMES:
            self.arrays[name] = self._memmap(name, (self.num_lines, self.seq_length), np.int32)

    @staticmethod
    def _key(layer):
        return POOLED if layer == POOLED else f"layer_{layer}"

    def _memmap(self, name, shape, dtype):
        return np.lib.format.open_memmap(os.path.join(self.scratch, name + ".npy"), mode="w+", dtype=dtype, shape=shape)

    def write(self, indices, values):
        for i, layer in enumerate(self.layers):
            self.arrays[self._key(layer)][indices] = values[..., i, :]
        for name in ENCODER_INPUT_NAMES:
            self.arrays[name][indices] = self.inputs[name]
        self.written += len(indices)

    def close(self):
        self._check_complete()
        with open(self.path, "wb") as f:  # a file object: np.savez would append ".npz" to the temporary name
            np.savez(f, **self.arrays)
        self.abort()

    def abort(self):
        if hasattr(self, "arrays"):
            self.arrays.clear()
            shutil.rmtree(self.scratch, ignore_errors=True)


_WRITERS = {".jsonl": _JsonlWriter, ".npy": _NpyWriter, ".npz": _NpzWriter}
