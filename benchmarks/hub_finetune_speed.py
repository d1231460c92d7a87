r"""The main job's former biggest step, timed: fine-tuning all-MiniLM-L6-v2 through `hub.KerasLayer`, padded vs
bucketed.

    python benchmarks/hub_finetune_speed.py                  # one run each, interleaved: padded, bucketed
    python benchmarks/hub_finetune_speed.py --seeds=1,2,3 --bucket_widths=0,16,8

What is measured: `experiments.classify_with_hub` exactly as `experiments.demo` ran it for the real weights until
it moved to `experiments.finetune --packing` (step 6 then: the exported all-MiniLM-L6-v2 at sequence length 128,
the 4,000 bundled training reviews, one epoch, batch 32, Adam at a peak of 1e-4 with 10% warm-up then linear
decay, dropout 0.1, evaluated on the 1,000 held-out reviews), once per `--bucket_widths` entry: 0 is the TF Hub
notebook's program (every batch packed to 128), 16 the default (batches grouped by length, each packed to its
bucket; see the classify_with_hub docstring). Each `--seeds` entry is one interleaved round: every width runs with
that `--seed` (the classifier head's initialisation, dropout and the order of the batches). Reported per width:
the whole step's wall-clock time (the process, as the demo pays it) and `fit`'s time (training and the held-out
evaluation), both the median over the rounds, and the held-out accuracy of each seed and their mean: with 1,000
held-out reviews one run's accuracy has a standard error of about 1.1 points, so "the same accuracy" is a
statement about the mean over seeds. The model is converted and exported once under --work_dir, untimed.

The table goes to stdout and, unless --no-write, into the `hub_finetune_speed` section of
benchmarks/RESULTS.md with date, CPU, load average and the command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common

SECTION = "hub_finetune_speed"
DATA = os.path.join(_common.ROOT, "data")


def _run(args_list, log_path, env=None, timeout=3600):
    with open(log_path, "w", encoding="utf-8") as log:
        subprocess.run(
            [sys.executable, "-m"] + args_list,
            check=True,
            timeout=timeout,
            cwd=_common.ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})),
        )


def export_minilm(work_dir: str, seq_length: int) -> str:
    """Converts and exports the installed all-MiniLM-L6-v2 under `work_dir` (once); returns the export dir."""
    from bert_tf.checkpoints.published import minilm_l6_v2_dir

    model_dir = os.path.join(work_dir, "minilm_l6_v2")
    export_dir = os.path.join(work_dir, f"minilm_l6_v2_export_{seq_length}")
    if not os.path.exists(os.path.join(model_dir, "bert_config.json")):
        _run(
            ["experiments.convert", "--from=hf", f"--input={minilm_l6_v2_dir()}", f"--output_dir={model_dir}"],
            os.path.join(work_dir, "convert.log"),
        )
    if not os.path.isdir(os.path.join(export_dir, "preprocess")):
        _run(
            [
                "experiments.export",
                f"--model_dir={model_dir}",
                f"--export_dir={export_dir}",
                f"--max_seq_length={seq_length}",
            ],
            os.path.join(work_dir, "export.log"),
        )
    return export_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket_widths", default="0,16", help="classify_with_hub --bucket_width values")
    parser.add_argument("--seeds", default="1", help="comma-separated --seed values, one interleaved round each")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_train_examples", type=int, default=0, help="0: all 4,000 (the main job's)")
    parser.add_argument("--max_test_examples", type=int, default=0, help="0: all 1,000")
    parser.add_argument("--work_dir", default=os.path.join(os.path.expanduser("~"), ".cache", "bert_tf_bench"))
    parser.add_argument("--no-write", dest="write", action="store_false", help="do not update RESULTS.md")
    args = parser.parse_args()
    try:
        widths = [int(w) for w in args.bucket_widths.split(",") if w.strip()]
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--bucket_widths and --seeds must be integers, got {args.bucket_widths!r}, {args.seeds!r}")
    if not widths or any(w < 0 for w in widths) or not seeds:
        parser.error("--bucket_widths must be non-negative integers and --seeds must name at least one seed")

    os.makedirs(args.work_dir, exist_ok=True)
    export_dir = export_minilm(args.work_dir, args.max_seq_length)
    load_before = _common.load_average()
    runs = {w: [] for w in widths}
    for round_index, seed in enumerate(seeds):
        for width in widths:
            output_dir = os.path.join(args.work_dir, f"hub_classifier_w{width}")
            start = time.perf_counter()
            _run(
                [
                    "experiments.classify_with_hub",
                    f"--export_dir={export_dir}",
                    f"--train_file={os.path.join(DATA, 'fine_foods_train.tsv')}",
                    f"--eval_file={os.path.join(DATA, 'fine_foods_test.tsv')}",
                    f"--output_dir={output_dir}",
                    "--num_train_epochs=1",
                    "--learning_rate=1e-4",
                    "--warmup_proportion=0.1",
                    "--train_batch_size=32",
                    "--nopacking",  # the length buckets measured here; packed rows are the program's default
                    f"--bucket_width={width}",
                    f"--seed={seed}",
                    f"--max_train_examples={args.max_train_examples}",
                    f"--max_eval_examples={args.max_test_examples}",
                ],
                os.path.join(args.work_dir, f"hub_classifier_w{width}.log"),
                env={"TF_USE_LEGACY_KERAS": "1"},
            )
            wall = time.perf_counter() - start
            with open(os.path.join(output_dir, "results.json"), encoding="utf-8") as f:
                result = json.load(f)
            runs[width].append((wall, result["train_seconds"], result["test_accuracy"]))
            print(
                f"[round {round_index + 1}, seed {seed}] bucket_width={width}: step {wall:.0f} s, "
                f"fit {result['train_seconds']:.0f} s, held-out accuracy {result['test_accuracy']:.3f}",
                flush=True,
            )
    load_after = _common.load_average()

    lines = [
        "The main job's step 6 for the real weights: `experiments.classify_with_hub` on the exported "
        f"all-MiniLM-L6-v2 (sequence length {args.max_seq_length}), the bundled reviews, one epoch, batch 32, "
        f"peak 1e-4 with 10% warm-up; {len(seeds)} interleaved round(s), seed(s) {', '.join(map(str, seeds))}; "
        "step = the process's wall-clock time, fit = training plus the held-out evaluation (medians over the rounds).",
        "",
    ]
    command = "python benchmarks/hub_finetune_speed.py " + " ".join(sys.argv[1:])
    import tensorflow as tf

    lines += _common.header_lines(command.strip(), load_before, load_after, {"tensorflow": tf.__version__})
    baseline = runs[widths[0]]
    lines += [
        "",
        "| --bucket_width | step s | fit s | held-out accuracy per seed | mean accuracy | step speed-up vs first "
        "row | fit speed-up |",
        "|---:|---:|---:|---|---:|---:|---:|",
    ]
    base_step = statistics.median(r[0] for r in baseline)
    base_fit = statistics.median(r[1] for r in baseline)
    for width in widths:
        step = statistics.median(r[0] for r in runs[width])
        fit = statistics.median(r[1] for r in runs[width])
        accuracies = [r[2] for r in runs[width]]
        label = f"{width} (off: the notebook's program)" if width == 0 else str(width)
        lines.append(
            f"| {label} | {step:.0f} | {fit:.0f} | {', '.join(f'{a:.3f}' for a in accuracies)} | "
            f"{statistics.mean(accuracies):.4f} | {base_step / step:.2f}x | {base_fit / fit:.2f}x |"
        )
    _common.publish(
        SECTION, "hub_finetune_speed: the main job's fine-tuning step, padded vs bucketed", lines, args.write
    )


if __name__ == "__main__":
    main()
