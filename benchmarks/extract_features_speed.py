r"""extract_features on the bundled reviews: sequences per second of packed rows (the default), length buckets and
every batch padded to 128.

    python benchmarks/extract_features_speed.py --model_dir=<converted all-MiniLM-L6-v2>
    python benchmarks/extract_features_speed.py --model_dir=... --rounds=3 --layouts=packed,buckets,padded

What is measured: `bert_tf.jobs.run_feature_extraction` (what `experiments.extract_features` runs)
on the 4,000 bundled training reviews (`data/fine_foods_train.tsv`, one review per line, truncated at 128
WordPieces), sentence embeddings as sentence-transformers computes them (`layers=[-1]`, `pooling="mean"`,
`normalize=True`, written as `.npy`), batch 32, once per `--layouts` entry (`packed`: rows of 128 tokens
filled with whole reviews, the default; `buckets`: `--nopacking`, one review a row padded to a multiple of 16;
`padded`: `--nopacking --bucket_width=0`, every batch padded to `max_seq_length`), each in a fresh process,
the entries interleaved over `--rounds`. Timed: the whole `run_feature_extraction` call (model build and restore,
tokenization, forward passes, writing), i.e. what a user pays after the interpreter and TensorFlow start.
The vectors are the same in every layout (`tests/test_sentence_features.py`,
`tests/test_extract_features.py`).

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
# --layouts: (packing, bucket_width, the table's label).
LAYOUTS = {
    "packed": (True, 16, "packed rows (the default)"),
    "buckets": (False, 16, "`--nopacking`, buckets of 16"),
    "padded": (False, 0, "`--nopacking --bucket_width=0`, padded to 128"),
}
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
        bucket_width=LAYOUTS[args.layout][1],
        packing=LAYOUTS[args.layout][0],
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
    parser.add_argument("--layouts", default="packed,buckets,padded", help=f"comma-separated: {', '.join(LAYOUTS)}")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--nowrite", action="store_true", help="print, do not write RESULTS.md")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input_file", help=argparse.SUPPRESS)
    parser.add_argument("--output_file", help=argparse.SUPPRESS)
    parser.add_argument("--layout", choices=sorted(LAYOUTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    layouts = args.layouts.split(",")
    unknown = sorted(set(layouts) - set(LAYOUTS))
    if unknown:
        parser.error(f"--layouts: unknown {', '.join(unknown)}; the layouts are {', '.join(LAYOUTS)}")
    load_before = _common.load_average()
    results = {layout: [] for layout in layouts}
    with tempfile.TemporaryDirectory() as tmp:
        input_file = os.path.join(tmp, "reviews.txt")
        num_lines = _write_lines(input_file)
        for _ in range(args.rounds):
            for layout in layouts:
                output_file = os.path.join(tmp, f"features_{layout}.npy")
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
                        f"--layout={layout}",
                    ],
                    timeout=3600,
                )
                if "error" in result:
                    raise SystemExit(f"{layout} failed:\n{result['error']}")
                results[layout].append(result["seconds"])
                print(f"{layout}: {num_lines / result['seconds']:.1f} sequences/s", flush=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=_common.ROOT, timeout=30
    ).stdout.strip()
    command = "python benchmarks/extract_features_speed.py --model_dir=<converted all-MiniLM-L6-v2>"
    if args.rounds != 1 or args.layouts != "packed,buckets,padded":
        command += f" --rounds={args.rounds} --layouts={args.layouts}"
    lines = [
        f"`extract_features` of all-MiniLM-L6-v2 sentence embeddings (last layer, mean over real tokens, unit "
        f"length) for the {num_lines:,} bundled training reviews, batch 32, max_seq_length 128; {args.rounds} "
        "interleaved round(s), each run a fresh process; time = the whole `run_feature_extraction` call.",
        "",
        *_common.header_lines(command, load_before, _common.load_average(), {"commit": commit}),
        "",
        f"| layout | seconds per round | sequences/s (all rounds) | vs {LAYOUTS[layouts[-1]][2]} |",
        "| --- | --- | ---: | ---: |",
    ]
    last = num_lines * len(results[layouts[-1]]) / sum(results[layouts[-1]])
    for layout in layouts:
        speed = num_lines * len(results[layout]) / sum(results[layout])
        per_round = ", ".join(f"{s:.1f}" for s in results[layout])
        lines.append(f"| {LAYOUTS[layout][2]} | {per_round} | {speed:.1f} | {speed / last:.2f}x |")
    print("\n".join(lines))
    if not args.nowrite:
        _common.write_section(SECTION, "extract_features_speed: sentence features, packed rows vs one a row", lines)


if __name__ == "__main__":
    main()
