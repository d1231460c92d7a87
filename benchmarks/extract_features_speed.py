r"""extract_features on the bundled reviews: sequences per second, every batch padded to 128 vs length buckets.

    python benchmarks/extract_features_speed.py --model_dir=<converted all-MiniLM-L6-v2>
    python benchmarks/extract_features_speed.py --model_dir=... --rounds=2 --bucket_widths=0,16,32

What is measured: `bert_tf.jobs.run_feature_extraction` (what `experiments.extract_features` runs)
on the 4,000 bundled training reviews (`data/fine_foods_train.tsv`, one review per line, truncated at 128
WordPieces), sentence embeddings as sentence-transformers computes them (`layers=[-1]`, `pooling="mean"`,
`normalize=True`, written as `.npy`), batch 32, once per `--bucket_widths` entry (0: every batch padded to
`max_seq_length`, as before length buckets; 16: the default), each in a fresh process, the entries
interleaved over `--rounds`. Timed: the whole `run_feature_extraction` call (model build and restore,
tokenization, forward passes, writing), i.e. what a user pays after the interpreter and TensorFlow start.
Target (issue #21): at least 1.5x the padded sequences/s.

The table goes to stdout and, unless --nowrite, into the `extract_features_speed` section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _common  # noqa: E402

SECTION = "extract_features_speed"
REVIEWS = os.path.join(_common.ROOT, "data", "fine_foods_train.tsv")


def _child(args) -> None:
    """One timed run_feature_extraction call; prints `RESULT {json}`."""
    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.extract_features import FeatureExtractionConfig, run_feature_extraction

    with open(args.input_file, encoding="utf-8") as f:
        num_lines = sum(1 for _ in f)
    start = time.perf_counter()
    config = FeatureExtractionConfig(
        args.input_file,
        ModelSource(model_dir=args.model_dir),
        layers=(-1,),
        pooling="mean",
        normalize=True,
        max_seq_length=128,
        batch_size=32,
        bucket_width=args.bucket_width,
    )
    run_feature_extraction(args.output_file, config)
    seconds = time.perf_counter() - start
    print("RESULT " + json.dumps({"seconds": seconds, "lines": num_lines}), flush=True)


def _write_lines(path: str) -> int:
    with open(REVIEWS, encoding="utf-8", newline="") as source, open(path, "w", encoding="utf-8") as out:
        rows = list(csv.DictReader(source, delimiter="\t"))
        for row in rows:
            out.write(" ".join(row["text"].split()) + "\n")
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="the converted all-MiniLM-L6-v2")
    parser.add_argument("--bucket_widths", default="0,16", help="comma-separated; 0 pads every batch to 128")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--nowrite", action="store_true", help="print, do not write RESULTS.md")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input_file", help=argparse.SUPPRESS)
    parser.add_argument("--output_file", help=argparse.SUPPRESS)
    parser.add_argument("--bucket_width", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    widths = [int(w) for w in args.bucket_widths.split(",")]
    load_before = _common.load_average()
    results = {width: [] for width in widths}
    with tempfile.TemporaryDirectory() as tmp:
        input_file = os.path.join(tmp, "reviews.txt")
        num_lines = _write_lines(input_file)
        for _ in range(args.rounds):
            for width in widths:
                output_file = os.path.join(tmp, f"features_{width}.npy")
                if os.path.exists(output_file):
                    os.remove(output_file)
                result = _common.run_child(
                    sys.executable,
                    os.path.abspath(__file__),
                    [
                        "--child",
                        f"--model_dir={os.path.abspath(args.model_dir)}",
                        f"--input_file={input_file}",
                        f"--output_file={output_file}",
                        f"--bucket_width={width}",
                    ],
                    timeout=3600,
                )
                if "error" in result:
                    raise SystemExit(f"bucket_width={width} failed:\n{result['error']}")
                results[width].append(result["seconds"])
                print(f"bucket_width={width}: {num_lines / result['seconds']:.1f} sequences/s", flush=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=_common.ROOT, timeout=30
    ).stdout.strip()
    command = "python benchmarks/extract_features_speed.py --model_dir=<converted all-MiniLM-L6-v2>"
    if args.rounds != 1 or args.bucket_widths != "0,16":
        command += f" --rounds={args.rounds} --bucket_widths={args.bucket_widths}"
    lines = [
        f"`extract_features` of all-MiniLM-L6-v2 sentence embeddings (last layer, mean over real tokens, unit "
        f"length) for the {num_lines:,} bundled training reviews, batch 32, max_seq_length 128; {args.rounds} "
        "interleaved round(s), each run a fresh process; time = the whole `run_feature_extraction` call.",
        "",
        *_common.header_lines(command, load_before, _common.load_average(), {"commit": commit}),
        "",
        "| --bucket_width | seconds per round | sequences/s (all rounds) | vs padded |",
        "| ---: | --- | ---: | ---: |",
    ]
    padded = num_lines * len(results[widths[0]]) / sum(results[widths[0]])
    for width in widths:
        speed = num_lines * len(results[width]) / sum(results[width])
        label = f"{width} (off: padded to 128)" if width == 0 else str(width)
        per_round = ", ".join(f"{s:.1f}" for s in results[width])
        lines.append(f"| {label} | {per_round} | {speed:.1f} | {speed / padded:.2f}x |")
    print("\n".join(lines))
    if not args.nowrite:
        _common.write_section(SECTION, "extract_features_speed: sentence features, padded vs length buckets", lines)


if __name__ == "__main__":
    main()
