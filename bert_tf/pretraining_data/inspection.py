"""Pretraining TFRecords as text, and statistics of their features (`bert_tf_inspect_tfrecords`).

    from bert_tf.pretraining_data import inspection
    stats = inspection.inspect("out/pretrain.tfrecord*", vocab_file="vocab.txt", num=5)

Each shown instance lists segment A and segment B as tokens, whether B is a
random next sentence, and marks every masked-LM prediction as
{token_in_input->original_token} (e.g. {[MASK]->house}, {tree->house} for a
random replacement, {house->house} when kept). The statistics cover every
record (or the first `max_records`): counts, sequence lengths, predictions per
instance, masked fraction, the [MASK]/random/kept split and the next-sentence
split. Works for files of google-research/bert and of
`bert_tf.pretraining_data.write_pretraining_data`, gzip detected automatically.
Reading the records needs TensorFlow, which loads on the first call, not on import.
"""

import dataclasses
import sys
from collections.abc import Sequence

import numpy as np

from bert_tf.errors import BadInputError
from bert_tf.tokenization.vocab import load_vocab_for_flag

_BATCH = 1024


@dataclasses.dataclass
class FeatureLengths:
    seq_length: int
    max_predictions_per_seq: int
    sentence_task: str = "nsp"  # which label the records hold ("none": no label)


def feature_lengths(record: bytes) -> FeatureLengths:
    """Reads the padded lengths from one serialized Example."""
    import tensorflow as tf

    from bert_tf.data.pretraining_features import sentence_task_of

    feature = tf.train.Example.FromString(record).features.feature
    if "input_ids" not in feature:
        raise ValueError(
            f"records have no 'input_ids' feature; not BERT pretraining data (features: {sorted(feature.keys())})"
        )
    predictions = len(feature["masked_lm_positions"].int64_list.value) if "masked_lm_positions" in feature else 0
    return FeatureLengths(len(feature["input_ids"].int64_list.value), predictions, sentence_task_of(feature.keys()))


def _parse_spec(lengths: FeatureLengths):
    from bert_tf.data import pretraining_features

    p = lengths.max_predictions_per_seq
    return pretraining_features.feature_spec(
        lengths.seq_length, p, masked_lm="required" if p else "absent", sentence_task=lengths.sentence_task
    )


def _tokens(ids, vocab: Sequence[str] | None) -> list[str]:
    if vocab is None:
        return [str(int(i)) for i in ids]
    return [vocab[int(i)] if 0 <= int(i) < len(vocab) else f"<{int(i)}?>" for i in ids]


def format_instance(index: int, example, vocab: Sequence[str] | None) -> str:
    """One instance (numpy feature dict of a single record) as text."""
    length = int(example["input_mask"].sum())
    ids = example["input_ids"][:length]
    segments = example["segment_ids"][:length]
    tokens = _tokens(ids, vocab)
    masked = {}
    if "masked_lm_weights" in example:
        for position, original, weight in zip(
            example["masked_lm_positions"], example["masked_lm_ids"], example["masked_lm_weights"]
        ):
            if weight > 0:
                masked[int(position)] = _tokens([original], vocab)[0]
    shown = [f"{{{token}->{masked[i]}}}" if i in masked else token for i, token in enumerate(tokens)]
    a_part = " ".join(t for t, s in zip(shown, segments) if s == 0)
    b_part = " ".join(t for t, s in zip(shown, segments) if s == 1)
    if "next_sentence_labels" in example:
        is_random = int(example["next_sentence_labels"][0]) == 1
        label = f"next sentence: {'random (label 1)' if is_random else 'actual (label 0)'}"
    elif "sentence_order_labels" in example:
        swapped = int(example["sentence_order_labels"][0]) == 1
        label = f"sentence order: {'swapped (label 1)' if swapped else 'in order (label 0)'}"
    else:
        label = "no sentence label"
    return f"Instance {index}: length {length}, {len(masked)} masked, {label}\n  A: {a_part}\n  B: {b_part}"


@dataclasses.dataclass
class RecordStats:
    """Statistics accumulated over batches of parsed records."""

    num_records: int = 0
    lengths: list[np.ndarray] = dataclasses.field(default_factory=list)
    b_lengths: list[np.ndarray] = dataclasses.field(default_factory=list)
    predictions: list[np.ndarray] = dataclasses.field(default_factory=list)
    num_mask_token: int = 0
    num_kept: int = 0
    num_random: int = 0
    num_random_next: int = 0
    num_special_masked: int = 0
    sentence_task: str = "nsp"

    def add(self, batch, mask_id: int | None):
        mask = batch["input_mask"]
        lengths = mask.sum(axis=1)
        self.num_records += len(lengths)
        self.lengths.append(lengths)
        self.b_lengths.append(batch["segment_ids"].sum(axis=1))
        for label in ("next_sentence_labels", "sentence_order_labels"):
            if label in batch:
                self.num_random_next += int(batch[label].sum())
        if "masked_lm_weights" not in batch:
            return
        real = batch["masked_lm_weights"] > 0
        self.predictions.append(real.sum(axis=1))
        rows = np.broadcast_to(np.arange(len(lengths))[:, None], real.shape)
        in_input = batch["input_ids"][rows, batch["masked_lm_positions"]]
        original = batch["masked_lm_ids"]
        kept = real & (in_input == original)
        self.num_kept += int(kept.sum())
        if mask_id is not None:
            is_mask = real & (in_input == mask_id)
            self.num_mask_token += int(is_mask.sum())
            self.num_random += int((real & ~kept & ~is_mask).sum())
        positions = batch["masked_lm_positions"]
        b_start = (mask - batch["segment_ids"]).sum(axis=1) - 1  # second [SEP]
        special = (positions == 0) | (positions == b_start[:, None]) | (positions == (lengths - 1)[:, None])
        self.num_special_masked += int((special & real).sum())

    def format(self) -> str:
        if not self.num_records:
            return "0 records."
        lengths = np.concatenate(self.lengths)
        b_lengths = np.concatenate(self.b_lengths)
        lines = [
            f"Records: {self.num_records:,}",
            f"Sequence length: mean {lengths.mean():.1f}, min {lengths.min()}, "
            f"max {lengths.max()}; segment B (incl. [SEP]) mean "
            f"{b_lengths.mean():.1f}",
        ]
        ones, zeros = {"nsp": ("Next sentence: random", "actual"), "sop": ("Sentence order: swapped", "in order")}.get(
            self.sentence_task, (None, None)
        )
        if ones:
            lines.append(
                f"{ones} {self.num_random_next:,} ({self.num_random_next / self.num_records:.1%}), {zeros} "
                f"{self.num_records - self.num_random_next:,}"
            )
        if self.predictions:
            predictions = np.concatenate(self.predictions)
            total = max(int(predictions.sum()), 1)
            lines.append(
                f"Predictions per instance: mean {predictions.mean():.2f}, min "
                f"{predictions.min()}, max {predictions.max()}; masked fraction "
                f"{predictions.sum() / lengths.sum():.2%} of tokens"
            )
            if self.num_mask_token or self.num_random:
                lines.append(
                    f"Replacement: [MASK] {self.num_mask_token / total:.1%}, random "
                    f"{self.num_random / total:.1%}, kept {self.num_kept / total:.1%}"
                    " (a random draw equal to the original counts as kept)"
                )
            else:
                lines.append(f"Kept (input token = label): {self.num_kept / total:.1%}")
            lines.append(f"Predictions on [CLS]/[SEP] positions: {self.num_special_masked}")
        return "\n".join(lines)


def _first_record(files, compression):
    """(path, bytes) of the first record of the first non-empty file, or None."""
    import tensorflow as tf

    for path in files:
        try:
            for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
                return path, record.numpy()
        except tf.errors.OpError as error:
            raise BadInputError(
                f"{path}: cannot read as a TFRecord file (compression={compression or 'none'}): {error.message}"
            ) from None
    return None


def inspect(
    input_patterns,
    vocab_file: str | None = None,
    num: int = 5,
    max_records: int | None = None,
    compression: str | None = None,
    out=None,
):
    """Prints `num` decoded instances and statistics of the records.

    Raises:
      BadInputError: naming the file (and record) that is missing, corrupt,
        truncated or not BERT pretraining data.
    """
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    from bert_tf.data import tfrecord_files

    out = out or sys.stdout  # looked up now: sys.stdout may have been replaced since import
    try:
        files = tfrecord_files.resolve_input_files(input_patterns)
    except ValueError as error:
        raise BadInputError(f"--input_file={input_patterns}: {error}") from None
    if compression is None:
        compression = tfrecord_files.detect_compression(files[0])
    compression = "" if compression.upper() == "NONE" else compression.upper()
    vocab = None
    mask_id = None
    if vocab_file:
        vocab = load_vocab_for_flag(vocab_file, "vocab_file")
        if "[MASK]" in vocab:
            mask_id = vocab.index("[MASK]")

    first = _first_record(files, compression) if max_records != 0 else None
    if first is None:
        out.write(f"No records in {', '.join(files)}\n")
        return RecordStats()
    try:
        lengths = feature_lengths(first[1])
    except DecodeError:
        raise BadInputError(f"{first[0]}: record 0 is not a tf.train.Example") from None
    except ValueError as error:
        raise BadInputError(f"{first[0]}: {error}") from None
    out.write(
        f"{len(files)} file(s): {', '.join(files[:5])}"
        f"{', ...' if len(files) > 5 else ''}\n"
        f"seq_length {lengths.seq_length}, max_predictions_per_seq "
        f"{lengths.max_predictions_per_seq}\n\n"
    )
    spec = _parse_spec(lengths)
    stats = RecordStats(sentence_task=lengths.sentence_task)
    shown = 0
    # One file at a time, so an error names the file and the record.
    for path in files:
        remaining = None if max_records is None else max_records - stats.num_records
        if remaining == 0:
            break
        records = tf.data.TFRecordDataset(path, compression_type=compression)
        if remaining is not None:
            records = records.take(remaining)
        in_file = 0
        try:
            for batch in records.batch(_BATCH).map(lambda r: tf.io.parse_example(r, spec)):
                batch = {k: v.numpy() for k, v in batch.items()}
                for row in range(min(num - shown, len(batch["input_ids"]))):
                    one = {k: v[row] for k, v in batch.items()}
                    out.write(format_instance(shown, one, vocab) + "\n\n")
                    shown += 1
                stats.add(batch, mask_id)
                in_file += len(batch["input_ids"])
        except tf.errors.DataLossError as error:
            raise BadInputError(f"{path}: corrupt or truncated after record {in_file}: {error.message}") from None
        except tf.errors.InvalidArgumentError as error:
            raise BadInputError(
                f"{path}: records from #{in_file} on do not parse as BERT pretraining examples with "
                f"the lengths of the first record ({lengths}); mixed files? {error.message}"
            ) from None
    out.write(stats.format() + "\n")
    return stats
