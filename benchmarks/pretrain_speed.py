r"""Pretraining throughput (examples/second) of the custom loop, with and without XLA.

    python benchmarks/pretrain_speed.py                      # bert_mini, seq 128, batch 32, both modes
    python benchmarks/pretrain_speed.py --preset=bert_tiny --timed_loops=5 --no-write

Synthetic batches (random token ids, 20 masked positions, a fixed set of 8 batches repeated) by
default, so the figure is the training step's, not the input pipeline's; `--input_file` reads real
TFRecords instead. The first loop of each mode (tracing, XLA compilation) is not timed; the figure is
the median of the timed loops' examples/second as the loop reports it, and examples per CPU second
of the process (less sensitive to other jobs on a shared machine). Each mode runs in its own
process. The table in benchmarks/RESULTS.md (section "pretrain_speed") is replaced with the new rows
unless --no-write; the load average is recorded because the machine is shared.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "RESULTS.md")
SECTION_START = "<!-- pretrain_speed:start -->"
SECTION_END = "<!-- pretrain_speed:end -->"


def _measure(args, jit_compile: bool) -> dict:
    """Runs in a child process: trains and returns the per-loop throughput."""
    sys.path.insert(0, ROOT)
    import numpy as np
    import tensorflow as tf

    from bert_tf import BertConfig, BertEncoder, BertPretrainer, pretraining_losses, training

    config = BertConfig.from_preset(args.preset)
    seq, predictions, batch = args.seq_length, args.max_predictions_per_seq, args.batch_size

    def synthetic(input_context):
        per_replica = input_context.get_per_replica_batch_size(batch)
        rng = np.random.default_rng(input_context.input_pipeline_id)
        shape = (8, per_replica)
        features = {
            "input_word_ids": rng.integers(1000, config.vocab_size, size=shape + (seq,)).astype("int32"),
            "input_mask": np.ones(shape + (seq,), "int32"),
            "input_type_ids": np.broadcast_to(np.arange(seq) >= seq // 2, shape + (seq,)).astype("int32"),
            "masked_lm_positions": np.sort(rng.choice(np.arange(1, seq), size=shape + (predictions,)), axis=-1).astype(
                "int32"
            ),
            "masked_lm_ids": rng.integers(1000, config.vocab_size, size=shape + (predictions,)).astype("int32"),
            "masked_lm_weights": np.ones(shape + (predictions,), "float32"),
            "next_sentence_labels": rng.integers(0, 2, size=shape).astype("int32"),
        }
        return tf.data.Dataset.from_tensor_slices(features).repeat().prefetch(2)

    def real(input_context):
        from bert_tf.data import pretraining_dataset

        return pretraining_dataset(args.input_file, batch, seq, predictions, input_context=input_context, seed=1)

    throughput, cpu_marks = [], []

    def record(step, metrics):
        throughput.append(metrics["examples_per_second"])
        cpu_marks.append(time.process_time())

    loop_config = training.TrainingConfig(
        num_train_steps=args.steps_per_loop * (args.timed_loops + 1),
        learning_rate=1e-4,
        num_warmup_steps=args.steps_per_loop,
        steps_per_loop=args.steps_per_loop,
        save_checkpoints_steps=10**9,
        jit_compile=jit_compile,
    )
    with tempfile.TemporaryDirectory() as model_dir:
        training.train(
            training.get_strategy("one_device"),
            lambda: BertPretrainer(BertEncoder(config)),
            pretraining_losses,
            real if args.input_file else synthetic,
            model_dir,
            loop_config,
            loop_callback=record,
        )
    timed = throughput[1:]
    # CPU seconds of this process (all threads) per timed loop: a figure the other jobs on the machine
    # disturb much less than wall time.
    cpu_per_loop = [b - a for a, b in zip(cpu_marks, cpu_marks[1:])]
    examples_per_loop = batch * args.steps_per_loop
    return {
        "jit_compile": jit_compile,
        "examples_per_second": statistics.median(timed),
        "examples_per_cpu_second": statistics.median(examples_per_loop / c for c in cpu_per_loop),
        "loops": [round(x, 2) for x in timed],
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def _load_average() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _write_section(rows, command, load_before, load_after, args):
    lines = [
        SECTION_START,
        "## pretrain_speed: pretraining throughput of the custom loop",
        "",
        f"`{args.preset}` (BertPretrainer), seq {args.seq_length}, global batch {args.batch_size}, "
        f"{args.max_predictions_per_seq} predictions/sequence, one_device strategy, float32, "
        f"{'real TFRecords' if args.input_file else 'synthetic batches'}; median over "
        f"{args.timed_loops} timed loops of {args.steps_per_loop} steps (the first, compiling loop not timed).",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {os.cpu_count()}-core CPU ({_cpu_name()}), this machine, no GPU; shared with other jobs",
        f"- Load average (1/5/15 min) before: {load_before}; after: {load_after}",
        f"- Command: `{command}`",
        "",
        "| jit_compile | examples/s | s/step | per-loop examples/s | examples per CPU second |",
        "|---|---:|---:|---|---:|",
    ]
    for row in rows:
        rate = row["examples_per_second"]
        lines.append(
            f"| {row['jit_compile']} | {rate:.1f} | {args.batch_size / rate:.2f} | "
            f"{', '.join(str(x) for x in row['loops'])} | {row['examples_per_cpu_second']:.1f} |"
        )
    lines.append(SECTION_END)
    section = "\n".join(lines) + "\n"

    text = open(RESULTS, encoding="utf-8").read() if os.path.exists(RESULTS) else "# Benchmark results\n\n"
    pattern = re.compile(re.escape(SECTION_START) + ".*?" + re.escape(SECTION_END) + "\n?", re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    tmp_path = f"{RESULTS}.tmp-{os.getpid()}"
    with open(tmp_path, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp_path, RESULTS)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="bert_mini")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--steps_per_loop", type=int, default=5)
    parser.add_argument("--timed_loops", type=int, default=3)
    parser.add_argument("--input_file", help="real pretraining TFRecords instead of synthetic batches")
    parser.add_argument("--modes", default="false,true", help="jit_compile values to measure")
    parser.add_argument("--no-write", dest="write", action="store_false", help="do not update RESULTS.md")
    parser.add_argument("--child", choices=("false", "true"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        print("RESULT " + json.dumps(_measure(args, args.child == "true")), flush=True)
        return

    load_before = _load_average()
    rows = []
    for mode in args.modes.split(","):
        child = [sys.executable, os.path.abspath(__file__), f"--child={mode}"] + [
            arg for arg in sys.argv[1:] if not arg.startswith(("--modes", "--no-write"))
        ]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        output = subprocess.run(child, capture_output=True, text=True, env=env, check=False)
        results = [line for line in output.stdout.splitlines() if line.startswith("RESULT ")]
        if output.returncode or not results:
            sys.exit(f"jit_compile={mode} failed:\n{output.stderr[-3000:]}")
        rows.append(json.loads(results[-1][len("RESULT ") :]))
        print(
            f"jit_compile={mode}: {rows[-1]['examples_per_second']:.1f} examples/s (loops {rows[-1]['loops']}), "
            f"{rows[-1]['examples_per_cpu_second']:.1f} examples per CPU second"
        )
    load_after = _load_average()
    command = "python benchmarks/pretrain_speed.py " + " ".join(sys.argv[1:])
    print(f"load average before {load_before}, after {load_after}")
    if args.write:
        _write_section(rows, command.strip(), load_before, load_after, args)
        print(f"Updated {RESULTS}")


if __name__ == "__main__":
    main()
