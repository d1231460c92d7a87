"""What `bert_tf.jobs.probe_layers` runs in child processes (`bert_tf.child_process`), and their environment.

The forward passes and the scalar mixes need TensorFlow; run in children, the memory TensorFlow keeps after
them goes with the child, and the coordinating process never holds TensorFlow and the features at once. The
fine-tuning children preload jemalloc where there is one (`bert_tf.memory_allocator`), which gives freed
memory back.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from absl import logging

from bert_tf.jobs.probe_layers.feature_keys import cache_dir, feature_keys
from bert_tf.probing import data as data_lib


def compute_features(config, model, data, output_dir) -> None:
    """Runs the forward passes whose features are not in the cache yet, one model at a time, and stores them."""
    from bert_tf.tensorflow_startup import load_tensorflow_lean

    load_tensorflow_lean()  # this child needs none of jax, scikit-learn, matplotlib
    import keras

    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.models import BertEncoder
    from bert_tf.probing.layer_features import FeatureCache, sentence_features, token_features
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    cache = FeatureCache(cache_dir(config, output_dir))
    tokenizer = TaskTokenizer(model.vocab_file, lower_case=model.do_lower_case)
    common = dict(
        max_seq_length=config.max_seq_length,
        batch_size=config.batch_size,
        bucket_width=config.bucket_width,
        packing=config.packing,
    )
    encoders = {}

    def encoder_of(name):
        if name not in encoders:
            encoders.clear()  # one model in memory at a time
            if name == "random_init":
                keras.utils.set_random_seed(config.seed)
                encoders[name] = BertEncoder(model.config)
            else:
                encoders[name] = BertEncoder(model.config)
                restore(encoders[name], model.checkpoint)
        return encoders[name]

    for (name, task, split), key in feature_keys(config, model, data).items():
        split_data = data[task][0 if split == "train" else 1]
        label = f"{name} {task} {split}"
        if task == data_lib.TOKEN:
            cache.ensure(
                key,
                lambda: {
                    "token": token_features(
                        encoder_of(name),
                        tokenizer,
                        split_data.sentences,
                        word_piece=config.word_piece,
                        label=label,
                        **common,
                    )
                },
            )
        else:
            cache.ensure(
                key, lambda: sentence_features(encoder_of(name), tokenizer, split_data.texts, label=label, **common)
            )


@dataclasses.dataclass(frozen=True)
class MixJob:
    """One scalar-mix probe, as the child process gets it: where the features are, and the labels and split."""

    key: str
    model_name: str
    train_path: str
    test_path: str
    representation: str
    train_y: np.ndarray
    test_y: np.ndarray
    fit: np.ndarray
    dev: np.ndarray
    num_labels: int


def scalar_mixes(jobs: list, seed: int) -> dict:
    """{(report key, model name): the scalar mix's ProbeResult} for every job (run in a child process)."""
    from bert_tf.tensorflow_startup import load_tensorflow_lean

    load_tensorflow_lean()  # this child needs none of jax, scikit-learn, matplotlib
    from bert_tf.probing import probes
    from bert_tf.probing.layer_features import FeatureCache

    results = {}
    for job in jobs:
        train_x = FeatureCache.load(job.train_path, job.representation)
        test_x = FeatureCache.load(job.test_path, job.representation)
        split = probes.Split(train_x, job.train_y, job.fit, job.dev, test_x, job.test_y)
        results[(job.key, job.model_name)] = probes.scalar_mix_probe(split, job.num_labels, seed=seed)
        del train_x, test_x, split
        probes.release_memory()
    return results


def fine_tuning_environment() -> dict:
    """The fine-tuning children start on jemalloc where there is one (`bert_tf.memory_allocator`): it keeps the
    default run within its memory budget."""
    from bert_tf import memory_allocator

    environment = memory_allocator.releasing_allocator_environment()
    if environment:
        logging.info(
            "The fine-tuning children run on jemalloc (%s), which gives freed memory back.", environment["LD_PRELOAD"]
        )
    else:
        logging.warning(
            "No jemalloc found (scripts/setup.sh installs it; %s names one): the fine-tuning reference rows keep "
            "TensorFlow's memory pool, so their peak is higher.",
            memory_allocator.ENVIRONMENT_VARIABLE,
        )
    return environment
