r"""Transfer study, part 3's diagnostic: frozen features of small encoders -> logistic regression on the reviews.

    nice -n 10 python benchmarks/transfer_study_probe.py --work_dir=/work/transfer_runs3 random \
        /work/transfer_runs3/base/pretrain/model /work/transfer_runs3/mlm_mean_e10/seed1/model

For each model directory (or `random`: the work directory's config with `keras.utils.set_random_seed(0)`), the
mean of `sequence_output` and `pooled_output` of the 4,000 training and 1,000 held-out reviews at length 64
(the vocabulary of `transfer_study.py`'s work directory), standardised on the training features, and a logistic
regression (C=1) trained on the training reviews; prints one JSON line per model with the held-out accuracies.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def features(encoder, inputs, batch_size=250):
    """(mean of sequence_output, pooled_output) of `inputs`, as numpy arrays."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.features.pooling import pool_tokens

    @tf.function(reduce_retracing=True)
    def pooled(batch):
        outputs = encoder(batch, training=False)
        return pool_tokens(outputs["sequence_output"], batch["input_mask"], "mean"), outputs["pooled_output"]

    means, pools = [], []
    for start in range(0, len(inputs["input_mask"]), batch_size):
        mean, pool = pooled({k: v[start : start + batch_size] for k, v in inputs.items()})
        means.append(mean.numpy())
        pools.append(pool.numpy())
    return np.concatenate(means), np.concatenate(pools)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work_dir", required=True)
    p.add_argument("models", nargs="+", help="Model directories, or `random`.")
    args = p.parse_args(argv)

    import keras
    from sklearn.linear_model import LogisticRegression

    from bert_tf.checkpoints.model_dir import load_config, load_encoder
    from bert_tf.data.text_inputs import pack_texts
    from bert_tf.datasets import bundled
    from bert_tf.models import BertEncoder
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    base = os.path.join(args.work_dir, "base")
    tokenizer = TaskTokenizer(os.path.join(base, "vocab", "vocab.txt"))
    train_texts, train_labels = bundled.read_sentiment("train")
    test_texts, test_labels = bundled.read_sentiment("test")
    train = pack_texts(tokenizer, train_texts, [None] * len(train_texts), 64)
    test = pack_texts(tokenizer, test_texts, [None] * len(test_texts), 64)
    for name in args.models:
        if name == "random":
            keras.utils.set_random_seed(0)
            encoder = BertEncoder(load_config(os.path.join(base, "pretrain", "model")))
        else:
            encoder = load_encoder(name)
        row = {"model": name}
        for kind, train_x, test_x in zip(("mean", "pooled"), features(encoder, train), features(encoder, test)):
            mean, scale = train_x.mean(0), train_x.std(0) + 1e-6
            probe = LogisticRegression(max_iter=2000, C=1.0).fit((train_x - mean) / scale, train_labels)
            row[kind] = round(float(probe.score((test_x - mean) / scale, test_labels)), 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
