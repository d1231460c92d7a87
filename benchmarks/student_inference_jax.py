r"""Encoder inference speed of the distillation frontier's shapes on the JAX backend (for a GPU machine).

    KERAS_BACKEND=jax python benchmarks/student_inference_jax.py --layers=6,3,1 --no-write

The frontier (`experiments.distill_frontier`) times exported SavedModels with TensorFlow on the CPU; a GPU
machine here has JAX and no TensorFlow, so this script times the same encoders there: all-MiniLM-L6-v2's
shape (H=384, 12 heads, I=1536, vocabulary 30,522) with `--layers` layers (the teacher's 6 and the students'
depths), random weights (speed does not depend on their values), one jitted forward (`training=False`), all
tokens real, float32 and bfloat16 (`--precisions`). Figure: median of `--timed_steps` forwards, each fetched,
after `--warmup_steps`. Imports no TensorFlow.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common

SECTION = "student_inference_jax"


def sequences_per_second(layers: int, precision: str, args) -> float:
    import jax
    import keras
    import numpy as np

    from bert_tf import BertConfig, BertEncoder

    keras.mixed_precision.set_global_policy(precision)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=384,
        num_hidden_layers=layers,
        num_attention_heads=12,
        intermediate_size=1536,
    )
    encoder = BertEncoder(config)
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.max_seq_length)
    inputs = {
        "input_word_ids": rng.integers(1000, config.vocab_size, shape).astype("int32"),
        "input_mask": np.ones(shape, "int32"),
        "input_type_ids": np.zeros(shape, "int32"),
    }
    inputs = {name: inputs[name] for name in encoder.input}
    encoder(inputs)
    trainable = [v.value for v in encoder.trainable_variables]
    non_trainable = [v.value for v in encoder.non_trainable_variables]

    @jax.jit
    def forward(trainable, non_trainable, inputs):
        outputs, _ = encoder.stateless_call(trainable, non_trainable, inputs, training=False)
        return outputs["pooled_output"]

    times = []
    for i in range(args.warmup_steps + args.timed_steps):
        start = time.perf_counter()
        forward(trainable, non_trainable, inputs).block_until_ready()
        if i >= args.warmup_steps:
            times.append(time.perf_counter() - start)
    keras.mixed_precision.set_global_policy("float32")
    return args.batch_size / statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", default="6,3,1", help="encoder depths; the first is the reference")
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--timed_steps", type=int, default=20)
    parser.add_argument("--no-write", dest="write", action="store_false", help="do not update RESULTS.md")
    args = parser.parse_args()
    try:
        depths = [int(n) for n in args.layers.split(",")]
    except ValueError:
        parser.error(f"--layers must be comma-separated integers, got {args.layers!r}")
    if not depths or min(depths) < 1 or args.timed_steps < 10:
        parser.error("--layers must name depths >= 1 and --timed_steps must be >= 10")
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax

    precisions = [p for p in args.precisions.split(",") if p]
    rates = {(n, p): sequences_per_second(n, p, args) for p in precisions for n in depths}
    reference = rates[(depths[0], "float32")] if "float32" in precisions else None
    load = _common.load_average()
    lines = [
        f"all-MiniLM-L6-v2's shape (H=384) at {len(depths)} depths, batch {args.batch_size}, length "
        f"{args.max_seq_length}, one jitted forward, figure = median of {args.timed_steps} forwards.",
        "",
    ]
    command = "python benchmarks/student_inference_jax.py " + " ".join(sys.argv[1:])
    versions = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__}
    lines += _common.header_lines(command.strip(), load, _common.load_average(), versions)
    columns = [("layers", ">"), ("precision", "<"), ("sequences/s", ">"), (f"vs {depths[0]} layers float32", ">")]
    table = [
        [str(n), p, f"{rate:,.0f}", f"{rate / reference:.2f}x" if reference else "-"] for (n, p), rate in rates.items()
    ]
    lines += [""] + _common.table_lines(columns, table)
    _common.publish(SECTION, "Distillation frontier's encoders on the JAX backend", lines, args.write)


if __name__ == "__main__":
    main()
