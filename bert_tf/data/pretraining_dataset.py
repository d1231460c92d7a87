"""tf.data reader of BERT pretraining TFRecords.

Reads the feature set of google-research/bert's `create_pretraining_data.py`
(also written by `tfrecords_tools.create_pretraining_data`) and yields batches
keyed like Model Garden / keras-hub encoders:

    input_word_ids, input_mask, input_type_ids   int32 [batch, seq_length]
    masked_lm_positions, masked_lm_ids           int32 [batch, max_predictions]
    masked_lm_weights                            float32 [batch, max_predictions]
    next_sentence_labels                         int32 [batch]   (records of sentence task "nsp")
    sentence_order_labels                        int32 [batch]   ("sop"; records of "none" have no label)

With phrase or entity dynamic masking, the records' unit flags (`phrase_units`,
`entity_units`) are read too and consumed by the masking.

Only checkpoint-safe tf.data ops are used (no py_function, no stateful random
ops), so a training loop can save the iterator and resume mid-epoch.
"""

from collections.abc import Sequence

import tensorflow as tf

from bert_tf import prefetching
from bert_tf.data import dynamic_masking as dynamic_masking_lib
from bert_tf.data import pretraining_features
from bert_tf.data.pretraining_schema import UNIT_FEATURES
from bert_tf.data.tfrecord_files import detect_compression, resolve_input_files


def _first_record(path: str, compression: str) -> bytes | None:
    for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
        return record.numpy()
    return None


def check_record_format(
    path: str,
    compression: str,
    seq_length: int,
    max_predictions_per_seq: int,
    need_masked_lm: bool = True,
    sentence_task: str | None = None,
    unit_features: Sequence[str] = (),
) -> str | None:
    """Checks the first record of a file against the expected lengths (and sentence task, when given).

    `unit_features` (the unit flags of phrase and entity dynamic masking) must be there too.

    Returns:
        The sentence task the record was written for ("nsp", "sop" or "none",
        `pretraining_features.sentence_task_of`), None for an empty file.

    Raises:
        ValueError: naming the file, the feature and both lengths (or both tasks).
    """
    try:
        record = _first_record(path, compression)
    except tf.errors.OpError as error:
        raise ValueError(
            f"{path}: cannot read as a TFRecord file (compression={compression or 'none'}): {error.message}"
        ) from None
    if record is None:
        return None  # empty shard: nothing to check
    example = tf.train.Example()
    try:
        example.ParseFromString(record)
    except Exception:  # protobuf raises its own DecodeError type, which differs between its implementations
        raise ValueError(f"{path}: first record is not a tf.train.Example") from None
    feature = example.features.feature
    found_task = pretraining_features.sentence_task_of(feature.keys())
    if sentence_task is not None and found_task != sentence_task:
        raise ValueError(
            f"{path}: records were written with --sentence_task={found_task}, not {sentence_task} "
            f"(features: {sorted(feature.keys())})"
        )
    lengths = pretraining_features.feature_lengths(seq_length, max_predictions_per_seq, found_task)
    optional = {name: lengths[name] for name in pretraining_features.MASKED_LM_FEATURES}
    expected = {name: length for name, length in lengths.items() if name not in optional}
    expected.update({name: seq_length for name in unit_features})
    if need_masked_lm:
        expected.update(optional)
    for name, length in list(expected.items()) + list(optional.items()):
        if name not in feature:
            if name in unit_features:
                raise ValueError(
                    f"{path}: records have no feature {name!r}, the unit flags of its masking: write them with "
                    "create_pretraining_data --masking=phrase|entity --nodo_masking"
                )
            if name in expected:
                raise ValueError(f"{path}: records have no feature {name!r} (found {sorted(feature.keys())})")
            continue
        values = feature[name]
        found = len(values.int64_list.value) + len(values.float_list.value)
        if found != length:
            hint = (
                "seq_length"
                if length == seq_length and name in pretraining_features.SEQUENCE_FEATURES
                else "max_predictions_per_seq"
            )
            raise ValueError(
                f"{path}: feature {name!r} has length {found} but {hint}="
                f"{length} was requested; the file was written with different "
                "--max_seq_length/--max_predictions_per_seq."
            )
    return found_task


def _to_model_inputs(parsed):
    def int32(t):
        return tf.cast(t, tf.int32)

    inputs = {
        "input_word_ids": int32(parsed["input_ids"]),
        "input_mask": int32(parsed["input_mask"]),
        "input_type_ids": int32(parsed["segment_ids"]),
        "masked_lm_positions": int32(parsed["masked_lm_positions"]),
        "masked_lm_ids": int32(parsed["masked_lm_ids"]),
        "masked_lm_weights": tf.cast(parsed["masked_lm_weights"], tf.float32),
    }
    for label in pretraining_features.LABEL_FEATURES + ("sentence_order_labels",):
        if label in parsed:
            inputs[label] = int32(parsed[label][:, 0])
    for name in UNIT_FEATURES.values():
        if name in parsed:
            inputs[name] = int32(parsed[name])
    return inputs


def pretraining_dataset(
    input_patterns: str | Sequence[str],
    batch_size: int,
    seq_length: int,
    max_predictions_per_seq: int,
    *,
    training: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    shuffle_buffer_size: int = 10000,
    seed: int | None = None,
    compression: str | None = None,
    dynamic_masking: dynamic_masking_lib.DynamicMaskingConfig | None = None,
    drop_remainder: bool = True,
    cycle_length: int = 8,
    check_files: bool = True,
    sentence_task: str = "nsp",
) -> tf.data.Dataset:
    """Batches of pretraining features from TFRecord files.

    Args (all after `max_predictions_per_seq` by keyword only):
        input_patterns: file globs: a list, or one comma-separated string.
        batch_size: global batch size; with `input_context`, each pipeline
            yields `input_context.get_per_replica_batch_size(batch_size)`.
        seq_length: `--max_seq_length` the files were written with.
        max_predictions_per_seq: `--max_predictions_per_seq` of the files.
        training: shuffle files and records and repeat forever; otherwise
            read once, in order.
        input_context: from `strategy.distribute_datasets_from_function`. Files
            are sharded across input pipelines when there are at least as many
            files as pipelines, records otherwise.
        shuffle_buffer_size: records in the shuffle buffer (training).
        seed: makes the order (and dynamic masks) reproducible.
        compression: "GZIP", "ZLIB", "" (none), or None to detect GZIP from
            the first file's bytes.
        dynamic_masking: re-mask every batch as it is read (records written
            unmasked, or masked: the original tokens are restored first).
        drop_remainder: drop a last partial batch (fixed shapes for TPU/XLA).
        cycle_length: files read in parallel.
        check_files: read the first record of each file to check the feature
            lengths before building the pipeline.
        sentence_task: the label the records hold: "nsp" (`next_sentence_labels`),
            "sop" (`sentence_order_labels`) or "none" (no label in the batches).

    Returns:
        A `tf.data.Dataset` of feature dicts (see module docstring).

    Raises:
        ValueError: no file matches, or a file's records have other lengths
            (naming the file).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    files = resolve_input_files(input_patterns)
    if compression is None or compression == "auto":
        compression = detect_compression(files[0])
    compression = compression.upper() if compression else ""
    if compression == "NONE":
        compression = ""
    if check_files:
        for path in files:
            check_record_format(
                path,
                compression,
                seq_length,
                max_predictions_per_seq,
                need_masked_lm=dynamic_masking is None,
                sentence_task=sentence_task,
                unit_features=dynamic_masking.unit_features if dynamic_masking is not None else (),
            )

    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    per_pipeline_batch = input_context.get_per_replica_batch_size(batch_size) if input_context else batch_size
    shard_files = len(files) >= num_pipelines

    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    if num_pipelines > 1 and shard_files:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    if training:
        if shard_files:
            dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    shard_records = num_pipelines > 1 and not shard_files
    dataset = dataset.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=max(1, min(cycle_length, len(files))),
        num_parallel_calls=tf.data.AUTOTUNE,
        # Record sharding needs the same record order in every pipeline.
        deterministic=seed is not None or not training or shard_records,
    )
    if shard_records:
        # Same file order in every pipeline (files are not shuffled in this
        # mode), so taking every n-th record partitions the data.
        dataset = dataset.shard(num_pipelines, pipeline_id)
    if training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(per_pipeline_batch, drop_remainder=drop_remainder)
    spec = pretraining_features.feature_spec(
        seq_length,
        max_predictions_per_seq,
        masked_lm="optional" if dynamic_masking is not None else "required",
        sentence_task=sentence_task,
    )
    if dynamic_masking is not None:
        spec.update({name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in dynamic_masking.unit_features})
    dataset = dataset.map(
        lambda records: _to_model_inputs(tf.io.parse_example(records, spec)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    if dynamic_masking is not None:
        mask_seed = None if seed is None else seed + pipeline_id
        dataset = dynamic_masking_lib.apply_dynamic_masking(
            dataset, dynamic_masking, max_predictions_per_seq, seed=mask_seed
        )
    return prefetching.prefetched(dataset)
