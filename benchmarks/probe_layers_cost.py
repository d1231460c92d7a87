r"""Time and peak memory of `python -m experiments.probe_layers` on the converted all-MiniLM-L6-v2.

    .venv/bin/python benchmarks/probe_layers_cost.py --model_dir=<converted all-MiniLM-L6-v2>

Runs the default command (bundled Brown tags and reviews) twice from an empty cache, without and with the
fine-tuning rows (`--nofinetune`, then the default), while sampling the process tree's memory every 250 ms:
the sum of the tree's proportional set sizes (PSS: a shared library's pages are split between the processes
that map them, so the sum is the memory the run occupies) and the largest resident set (RSS) of any one
process. Targets (issue #20): at most 5 minutes without and 10 with the fine-tuning rows, at most 2 GB
resident. Writes the `probe_layers_cost` section of RESULTS.md.

The model directory: `python -m experiments.demo` converts the published weights into
`<demo output>/real_weights/model`, or `python -m experiments.convert --from=hf --input=... --output_dir=...`
does it alone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _common  # noqa: E402

GB = 10**9  # the target is in decimal gigabytes


def measure(command: list, timeout: float, log_path: str | None = None) -> dict:
    """Runs `command`; its wall seconds, peak tree PSS and peak single-process RSS; its output to `log_path`."""
    result = _common.measure_command(command, timeout=timeout)
    if log_path:
        with open(log_path, "w", encoding="utf-8") as f:
            f.write(result["output"])
    return {"seconds": result["seconds"], "peak_pss": result["peak_pss"], "peak_rss": result["peak_process_rss"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="the converted all-MiniLM-L6-v2")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run is killed")
    parser.add_argument("--nowrite", action="store_true", help="print, do not write RESULTS.md")
    parser.add_argument("--log_dir", help="keep each run's output here (nofinetune.log, finetune.log)")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=_common.ROOT, timeout=30
    ).stdout.strip()
    load_before = _common.load_average()
    rows = []
    runs = (
        ("without fine-tuning rows (`--nofinetune`)", ["--nofinetune"], "nofinetune.log"),
        ("with them (default)", [], "finetune.log"),
    )
    for name, extra, log_name in runs:
        with tempfile.TemporaryDirectory() as tmp:
            command = [
                sys.executable,
                "-m",
                "experiments.probe_layers",
                f"--model_dir={os.path.abspath(args.model_dir)}",
                f"--output_dir={os.path.join(tmp, 'report')}",
                *extra,
            ]
            log_path = os.path.join(args.log_dir, log_name) if args.log_dir else None
            result = measure(command, args.timeout, log_path)
        rows.append((name, result))
        print(
            f"{name}: {result['seconds']:.0f} s, peak tree PSS {result['peak_pss'] / GB:.2f} GB, "
            f"largest process RSS {result['peak_rss'] / GB:.2f} GB",
            flush=True,
        )
    lines = _common.header_lines(
        "python benchmarks/probe_layers_cost.py --model_dir=<converted all-MiniLM-L6-v2>",
        load_before,
        _common.load_average(),
        {"commit": commit},
    )
    lines += [
        "- Each run starts from an empty feature cache; memory sampled every 250 ms. Targets: 5 min without the "
        "fine-tuning rows, 10 min with them, 2 GB (2 x 10^9 bytes) resident.",
        "",
        "| run | wall time | peak memory of the process tree (sum of PSS) | largest process (RSS) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, result in rows:
        minutes, seconds = divmod(round(result["seconds"]), 60)
        lines.append(
            f"| {name} | {minutes} min {seconds:02d} s | {result['peak_pss'] / GB:.2f} GB "
            f"| {result['peak_rss'] / GB:.2f} GB |"
        )
    if not args.nowrite:
        _common.write_section("probe_layers_cost", "probe_layers: time and peak memory", lines)


if __name__ == "__main__":
    main()
