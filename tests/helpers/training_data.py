"""Data for the training tests: real-text pretraining TFRecords, and synthetic batches that split exactly.

`write_pretraining_records` turns the five Sense and Sensibility chapters of
tests/fixtures/pretraining/ into TFRecords with `bert_tf.pretraining_data`'s writer
(chapters 1-4 for training, chapter 5 for evaluation; ~2 s).

`synthetic_dataset_fn` yields the same global batches under any strategy: every
global batch is cut into per-replica slices in replica order, and each input
pipeline takes the slices of its own replicas, so one device, two mirrored
replicas and two workers all train on identical data.
"""

import os
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "pretraining"
SAMPLE_TEXT = FIXTURES / "austen_sample.txt"
VOCAB_FILE = FIXTURES / "vocab.txt"

SEQ_LENGTH = 32
MAX_PREDICTIONS = 5

SYNTHETIC_VOCAB = 40
SYNTHETIC_SEQ = 12
SYNTHETIC_PREDICTIONS = 3


def vocab_size() -> int:
    with open(VOCAB_FILE, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def write_pretraining_records(directory, units=None, **instance_options) -> dict:
    """Writes train.tfrecord and eval.tfrecord under `directory`; returns their paths and the vocab's.

    `instance_options`: further `InstanceConfig` fields (`sentence_task`, `masking`); `units`: the
    writer's phrase and entity tables (`knowledge_units.unit_tables`).
    """
    from bert_tf.pretraining_data import InstanceConfig, write_pretraining_data

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    documents = SAMPLE_TEXT.read_text(encoding="utf-8").strip("\n").split("\n\n")
    splits = {"train": ("\n\n".join(documents[:-1]), 2), "eval": (documents[-1], 1)}
    paths = {"vocab": str(VOCAB_FILE)}
    for name, (text, dupe_factor) in splits.items():
        text_path = directory / f"{name}.txt"
        text_path.write_text(text + "\n", encoding="utf-8")
        config = InstanceConfig(
            max_seq_length=SEQ_LENGTH,
            max_predictions_per_seq=MAX_PREDICTIONS,
            dupe_factor=dupe_factor,
            **instance_options,
        )
        record_path = str(directory / f"{name}.tfrecord")
        write_pretraining_data(
            [str(text_path)],
            [record_path],
            str(VOCAB_FILE),
            config,
            seed=7,
            num_workers=1,
            units=units,
        )
        paths[name] = record_path
    return paths


def synthetic_global_batches(num_batches: int, global_batch: int, seed: int = 0) -> dict:
    """numpy pretraining features [num_batches, global_batch, ...]; every masked-LM weight is 1.

    Equal weights make each replica's weighted-mean MLM loss an equal share of
    the global mean, so the loss is the same function of the weights however
    the batch is split.
    """
    rng = np.random.default_rng(seed)
    shape = (num_batches, global_batch)
    positions = np.sort(rng.choice(np.arange(1, SYNTHETIC_SEQ), size=shape + (SYNTHETIC_PREDICTIONS,)), axis=-1)
    return {
        "input_word_ids": rng.integers(4, SYNTHETIC_VOCAB, size=shape + (SYNTHETIC_SEQ,)).astype("int32"),
        "input_mask": np.ones(shape + (SYNTHETIC_SEQ,), "int32"),
        "input_type_ids": np.broadcast_to(
            np.arange(SYNTHETIC_SEQ) >= SYNTHETIC_SEQ // 2, shape + (SYNTHETIC_SEQ,)
        ).astype("int32"),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(4, SYNTHETIC_VOCAB, size=shape + (SYNTHETIC_PREDICTIONS,)).astype("int32"),
        "masked_lm_weights": np.ones(shape + (SYNTHETIC_PREDICTIONS,), "float32"),
        "next_sentence_labels": rng.integers(0, 2, size=shape).astype("int32"),
    }


def synthetic_dataset_fn(global_batch: int, num_batches: int = 8, seed: int = 0, nan_batch: int | None = None):
    """A `train_dataset_fn` over `synthetic_global_batches`, repeated forever.

    nan_batch: index of a global batch whose masked-LM weights are NaN (its loss is NaN).
    """
    import tensorflow as tf

    batches = synthetic_global_batches(num_batches, global_batch, seed)
    if nan_batch is not None:
        batches["masked_lm_weights"][nan_batch] = np.nan

    def dataset_fn(input_context):
        replicas = input_context.num_replicas_in_sync
        per_replica = global_batch // replicas
        local = replicas // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * local
        slices = {}
        for name, value in batches.items():
            split = value.reshape((num_batches, replicas, per_replica) + value.shape[2:])
            mine = split[:, first : first + local]
            slices[name] = mine.reshape((num_batches * local, per_replica) + value.shape[2:])
        return tf.data.Dataset.from_tensor_slices(slices).repeat()

    return dataset_fn


def synthetic_eval_dataset_fn(global_batch: int, num_examples: int = 20, seed: int = 1):
    """An `eval_dataset_fn`: `num_examples` examples sharded over pipelines, last batches partial."""
    import tensorflow as tf

    examples = {name: value[0] for name, value in synthetic_global_batches(1, num_examples, seed).items()}

    def dataset_fn(input_context):
        mine = {
            name: value[input_context.input_pipeline_id :: input_context.num_input_pipelines]
            for name, value in examples.items()
        }
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        return tf.data.Dataset.from_tensor_slices(mine).batch(per_replica)

    return dataset_fn


def tiny_bert_config(vocab: int, dropout: float = 0.1, max_positions: int = 32, num_layers: int = 2):
    from bert_tf import BertConfig

    return BertConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=max_positions,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )


def subprocess_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env
