r"""Where int8 is fast on TensorFlow's CPU: one encoder Dense layer's matrix product, by dtype and kernel.

    python benchmarks/quantized_matmul_profile.py --batch_size=32 --max_seq_length=128 --hidden=384 --intermediate=1536

Times, interleaved in one process (median of --rounds rounds of --calls calls each), the pieces of a feed-forward
`Dense` ([batch, length, hidden] x [hidden, intermediate]) as each inference form runs it:
float32 `tf.matmul` (3-D, as Keras calls it, and 2-D), bfloat16 `tf.matmul`, int8 x int8 -> int32 `tf.matmul`
(what `Model.quantize("int8")` layers call, 3-D and 2-D), the same integer product on oneDNN's uint8 x int8
kernel (`bert_tf.distillation.onednn_int8.integer_product`), the same integers as a float32 product (what the int8 form
computes where oneDNN is off), the per-token abs-max quantization of the input
that every int8 layer adds, and whole layers: float32 `Dense`, Keras' int8 `Dense` and `OneDnnInt8Dense`.
Prints a table; the figures belong in benchmarks/RESULTS.md (`distillation_frontier` section) with the machine
and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--intermediate", type=int, default=1536)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.max_seq_length, args.hidden)
    x = tf.constant(rng.normal(size=shape).astype("float32"))
    w = tf.constant(rng.normal(size=(args.hidden, args.intermediate)).astype("float32"))
    x_int8 = tf.constant(rng.integers(-127, 128, shape).astype("int8"))
    w_int8 = tf.constant(rng.integers(-127, 128, (args.hidden, args.intermediate)).astype("int8"))
    x_bf16, w_bf16 = tf.cast(x, tf.bfloat16), tf.cast(w, tf.bfloat16)
    flat = (-1, args.hidden)

    def quantize_input():
        # Keras' per-token abs-max input quantizer of an int8 Dense.
        scale = 127.0 / tf.maximum(tf.reduce_max(tf.abs(x), axis=-1, keepdims=True), 1e-7)
        return tf.cast(tf.clip_by_value(tf.round(x * scale), -127.0, 127.0), tf.int8)

    import keras

    from bert_tf import cpu_features
    from bert_tf.distillation.onednn_int8 import integer_product, onednn_int8_available, use_onednn_int8

    x_uint8 = tf.cast(tf.cast(tf.reshape(x_int8, flat), tf.int32) + 128, tf.uint8)
    layers = {}
    for name in ("float32", "int8", "onednn_int8"):
        keras.utils.set_random_seed(0)
        layers[name] = keras.layers.Dense(args.intermediate)
        layers[name].build((None, args.hidden))
        if name != "float32":
            layers[name].quantize("int8")
    use_onednn_int8(layers["onednn_int8"])
    pieces = {
        "float32 matmul (3-D)": lambda: tf.matmul(x, w),
        "float32 matmul (2-D)": lambda: tf.matmul(tf.reshape(x, flat), w),
        "bfloat16 matmul (3-D)": lambda: tf.matmul(x_bf16, w_bf16),
        "int8 matmul -> int32 (3-D)": lambda: tf.matmul(x_int8, w_int8, output_type=tf.int32),
        "int8 matmul -> int32 (2-D)": lambda: tf.matmul(tf.reshape(x_int8, flat), w_int8, output_type=tf.int32),
        "int8 matmul on oneDNN (uint8 x int8, 2-D)": lambda: integer_product(x_uint8, w_int8),
        "int8 product as float32 (the int8 form without oneDNN, 2-D)": lambda: tf.matmul(
            tf.cast(tf.reshape(x_int8, flat), tf.float32), tf.cast(w_int8, tf.float32)
        ),
        "int8 input quantization": quantize_input,
        "float32 Dense layer (2-D, with bias)": lambda: layers["float32"](tf.reshape(x, flat)),
        "Keras int8 Dense layer (2-D)": lambda: layers["int8"](tf.reshape(x, flat)),
        "OneDnnInt8Dense layer (2-D; the int8 form)": lambda: layers["onednn_int8"](tf.reshape(x, flat)),
    }
    if not onednn_int8_available():  # oneDNN off (TensorFlow's default on AVX2): its kernel does not run
        del pieces["int8 matmul on oneDNN (uint8 x int8, 2-D)"]
    print(
        f"CPU: {cpu_features.cpu_name()} ({cpu_features.instruction_set_level()}); oneDNN's int8 kernel "
        f"{'runs' if onednn_int8_available() else 'does not run (oneDNN off)'}"
    )
    functions = {name: tf.function(fn) for name, fn in pieces.items()}
    for fn in functions.values():
        fn().numpy()
    seconds = {name: [] for name in functions}
    for _ in range(args.rounds):
        for name, fn in functions.items():
            started = time.perf_counter()
            for _ in range(args.calls):
                fn().numpy()
            seconds[name].append((time.perf_counter() - started) / args.calls)
    reference = statistics.median(seconds["float32 matmul (3-D)"])
    print(f"| piece ({'x'.join(map(str, shape))} x {args.hidden}x{args.intermediate}) | ms | vs float32 3-D |")
    print("|---|---:|---:|")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"| {name} | {1000 * median:.1f} | {median / reference:.2f}x |")


if __name__ == "__main__":
    main()
