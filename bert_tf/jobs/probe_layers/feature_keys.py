"""The feature cache's keys of `bert_tf.jobs.probe_layers`: what each model's features of each file were computed from.

A key changes when the checkpoint, the config, the vocabulary, the data file or an option that shapes the
features changes, so a rerun reuses exactly the arrays it would compute (`bert_tf.probing.layer_features`).
"""

from __future__ import annotations

import os

from bert_tf.errors import JobArgumentError
from bert_tf.probing import data as data_lib


def cache_dir(config, output_dir) -> str:
    """The features' cache: `config.cache_dir`, or `<output_dir>/feature_cache`."""
    return config.cache_dir or os.path.join(output_dir, "feature_cache")


def feature_keys(config, model, data) -> dict:
    """{(model name, task, split): the cache key of its features}: what the arrays were computed from."""
    from bert_tf.file_io import sha256_of

    model_keys = {"pretrained": {"checkpoint": checkpoint_identity(model.checkpoint), "config": model.config.to_dict()}}
    if config.random_control:
        model_keys["random_init"] = {"random_init_seed": config.seed, "config": model.config.to_dict()}
    options = {
        "max_seq_length": config.max_seq_length,
        "lower_case": model.do_lower_case,
        "vocab": sha256_of(model.vocab_file),
    }
    keys = {}
    for name, model_key in model_keys.items():
        for task, (train, test) in data.items():
            for split, split_data in (("train", train), ("test", test)):
                file_key = {"model": model_key, "file": sha256_of(split_data.path), **options}
                if task == data_lib.TOKEN:
                    keys[(name, task, split)] = {"kind": "token", "word_piece": config.word_piece, **file_key}
                else:
                    keys[(name, task, split)] = {"kind": "sentence", **file_key}
    return keys


def checkpoint_identity(checkpoint: str) -> dict:
    """What the cache key knows of a checkpoint: its path, and the name, size and time of its index file(s).

    Read from the file system alone (no TensorFlow in the coordinating process): a directory is named by all
    the `.index` files in it, so a new checkpoint there changes the key.
    """
    path = os.path.abspath(checkpoint)
    if os.path.isdir(path):
        indexes = sorted(os.path.join(path, name) for name in os.listdir(path) if name.endswith(".index"))
    else:
        indexes = [path + ".index"]
    files = []
    for index in indexes:
        if not os.path.exists(index):
            raise JobArgumentError(f"--init_checkpoint: no checkpoint at {checkpoint} ({index} not found).")
        stat = os.stat(index)
        files.append([os.path.basename(index), stat.st_size, stat.st_mtime_ns])
    if not files:
        raise JobArgumentError(f"--model_dir: no TF2 checkpoint in {checkpoint}.")
    return {"path": path, "index_files": files}
