"""One fine-tuning step on the CPU paths TensorFlow takes on other x86 CPUs, simulated on this one.

TensorFlow turns oneDNN on by default only on CPUs with AVX-512 VNNI/BF16, AVX-VNNI or AMX; on an AVX2-only CPU
it runs its Eigen kernels, as `TF_ENABLE_ONEDNN_OPTS=0` does anywhere. On a CPU with AVX-512 this script times
the same float32 training step (a `BertClassifier` of a model directory's config, AdamW, no XLA, as
`experiments.finetune` runs by default) three ways, each in its own process, in interleaved rounds: as TensorFlow
runs it here by default; with oneDNN off (TensorFlow's default on AVX2); and with oneDNN forced on but held to
AVX2 (`ONEDNN_MAX_CPU_ISA=AVX2`), a candidate setting for AVX2 machines. A proxy, not an AVX2 machine: the
cores, caches and clock stay this CPU's.

    python benchmarks/cpu_paths.py --model_dir=models/minilm --rounds=2
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PATHS = {
    "this CPU's default (oneDNN on, AVX-512)": {},
    "oneDNN off (TensorFlow's default on AVX2)": {"TF_ENABLE_ONEDNN_OPTS": "0"},
    "oneDNN forced on, held to AVX2": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def child(model_dir: str, batch_size: int, seq_length: int, steps: int) -> dict:
    """Median seconds of `steps` training steps after two warm-up steps, in this process."""
    import keras
    import numpy as np
    import tensorflow as tf

    from bert_tf import BertConfig
    from bert_tf.models import BertClassifier, BertEncoder

    config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
    model = BertClassifier(BertEncoder(config), num_classes=2)
    optimizer = keras.optimizers.AdamW(1e-4)
    rng = np.random.default_rng(0)
    shape = (batch_size, seq_length)
    inputs = {
        "input_word_ids": tf.constant(rng.integers(1000, config.vocab_size, shape), tf.int32),
        "input_mask": tf.ones(shape, tf.int32),
        "input_type_ids": tf.zeros(shape, tf.int32),
    }
    labels = tf.constant(rng.integers(0, 2, batch_size))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(inputs, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    step().numpy(), step().numpy()
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step().numpy()
        seconds.append(time.perf_counter() - start)
    return {"step_s": statistics.median(seconds)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True, help="A model directory (its bert_config.json is used).")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=6, help="Timed steps a process, after two warm-up steps.")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.model_dir, args.batch_size, args.seq_length, args.steps)))
        return
    medians = {name: [] for name in PATHS}
    command = [sys.executable, __file__, "--child", *sys.argv[1:]]
    for _ in range(args.rounds):
        for name, env in PATHS.items():
            out = subprocess.run(
                command, env={**os.environ, **env}, capture_output=True, text=True, timeout=1200, check=True
            )
            medians[name].append(json.loads(out.stdout.strip().splitlines()[-1])["step_s"])
    default = statistics.median(medians[next(iter(PATHS))])
    print("| path | step s (median of rounds) | per round | vs this CPU's default |\n|---|---:|---|---:|")
    for name, values in medians.items():
        median = statistics.median(values)
        rounds = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | {median:.2f} | {rounds} | {median / default:.2f}x |")


if __name__ == "__main__":
    main()
