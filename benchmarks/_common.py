"""Shared by the throughput benchmarks: machine facts, peer virtual environments, RESULTS.md sections.

Standard library only: the benchmarks run this module under every peer's own Python too.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "RESULTS.md")
DEFAULT_PEER_DIR = os.path.join(os.path.expanduser("~"), ".cache", "bert_tf_bench", "peers")

# Each peer gets its own virtual environment (Model Garden pins its own TensorFlow), from PyPI.
PEER_VENVS = {
    "hf_torch": {"requirements": ["torch", "transformers", "numpy"], "probe": "import torch, transformers"},
    "keras_hub": {
        "requirements": ["keras-hub==0.32.*", "tensorflow==2.21.0", "tensorflow-text==2.21.*", "numpy"],
        "probe": "import keras_hub, tensorflow",
    },
    "tf_models": {
        "requirements": ["tf-models-official==2.20.0"],
        "probe": "import os; os.environ['TF_USE_LEGACY_KERAS']='1'; import official.nlp.modeling",
    },
}


def cpu_name() -> str:
    """The CPU's model name and instruction-set level, e.g. "AMD EPYC 9R14, AVX-512 VNNI/BF16"."""
    if ROOT not in sys.path:  # a benchmark run from a checkout without bert_tf installed (the GPU machine)
        sys.path.insert(0, ROOT)
    from bert_tf import cpu_features

    return f"{cpu_features.cpu_name()}, {cpu_features.instruction_set_level()}"


def gpu_note() -> str:
    """What the machine has in GPUs, looked up rather than assumed: "no GPU", or the NVIDIA GPUs' names.

    The benchmarks' contenders run on the CPU unless one reports its device; on a machine with a GPU the
    header says so, so that a CPU figure is not read as the machine's best.
    """
    nodes = sorted(glob.glob("/dev/nvidia[0-9]*"))
    if not nodes:
        return "no GPU"
    try:
        names = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split("\n")
        names = [name.strip() for name in names if name.strip()]
    except (OSError, subprocess.SubprocessError):
        names = []
    return f"{len(nodes)} NVIDIA GPU(s)" + (f" ({', '.join(names)})" if names else "") + " present"


def tensorflow_models_version(official_module) -> str:
    """tf-models-official's installed version, from its package metadata (the module has no `__version__`)."""
    from importlib import metadata

    for distribution in ("tf-models-official", "tf-models-nightly"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return getattr(official_module, "__version__", "unknown")


def load_average() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def peer_python(peer_dir: str, name: str, create: bool) -> str | None:
    """The Python of the peer's venv under `peer_dir`, created with pip when `create` and missing."""
    python = os.path.join(peer_dir, name, "bin", "python")
    spec = PEER_VENVS[name]

    def works():
        return (
            os.path.exists(python)
            and subprocess.run(
                [python, "-c", spec["probe"]],
                capture_output=True,
                timeout=300,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            ).returncode
            == 0
        )

    if works():
        return python
    if not create:
        return None
    print(f"creating {os.path.join(peer_dir, name)} ({' '.join(spec['requirements'])}); this takes minutes", flush=True)
    subprocess.run([sys.executable, "-m", "venv", os.path.join(peer_dir, name)], check=True, timeout=600)
    subprocess.run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True, timeout=1800)
    subprocess.run([python, "-m", "pip", "install", "-q"] + spec["requirements"], check=True, timeout=3600)
    if not works():
        sys.exit(f"{name}: the new venv cannot run `{spec['probe']}`")
    return python


def run_child(python: str, script: str, args: list, env: dict | None = None, timeout: int = 1800) -> dict:
    """Runs `python script --child ... args` and returns the JSON on its last `RESULT ` line."""
    # The repository first, then the caller's PYTHONPATH (packages installed with --target, a test's import blocker).
    pythonpath = os.pathsep.join(p for p in [ROOT, os.environ.get("PYTHONPATH", "")] if p)
    child_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=pythonpath)
    child_env.update(env or {})
    proc = subprocess.run(
        [python, script] + args, capture_output=True, text=True, env=child_env, timeout=timeout, check=False
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        return {"error": (proc.stderr or proc.stdout)[-2000:]}
    return json.loads(lines[-1][len("RESULT ") :])


def summarize(step_seconds: list, batch_size: int) -> dict:
    median = statistics.median(step_seconds)
    return {
        "median_step_s": median,
        "sequences_per_s": batch_size / median,
        "min_step_s": min(step_seconds),
        "max_step_s": max(step_seconds),
    }


def step_rows(results: dict, batch_size: int, timed_steps: int) -> dict:
    """One table row per contender that has timed steps, from `run_child` results gathered over the rounds.

    `results[label]` holds "step_s" (every round's timed steps, in round order) and "first_step_s" (one per
    round). A row is `summarize` of all its steps, the median first step, and "per_round": sequences/s of each
    round's median step (so a drifting machine shows).
    """
    rows = {}
    for label, result in results.items():
        steps = result["step_s"]
        if not steps:
            continue
        rows[label] = summarize(steps, batch_size)
        rows[label]["first_step_s"] = statistics.median(result["first_step_s"])
        rows[label]["per_round"] = [
            batch_size / statistics.median(steps[i : i + timed_steps]) for i in range(0, len(steps), timed_steps)
        ]
    return rows


def ours_and_peers(rates: dict) -> tuple[dict, dict]:
    """Splits {contender: sequences/s} into ours (labels starting "ours") and the peers'."""
    ours = {label: rate for label, rate in rates.items() if label.startswith("ours")}
    return ours, {label: rate for label, rate in rates.items() if label not in ours}


def table_lines(columns: list, rows: list) -> list:
    """A Markdown table: `columns` are (header, "<" or ">") pairs, the alignment of each; `rows` lists of cells."""
    lines = [
        "| " + " | ".join(header for header, _ in columns) + " |",
        "|" + "|".join("---:" if align == ">" else "---" for _, align in columns) + "|",
    ]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def per_round_cell(rates: list) -> str:
    return ", ".join(f"{rate:.1f}" for rate in rates)


def failure_lines(errors: dict) -> list:
    """One line per contender that failed in a round: {label: [error text, ...]} -> its last error's last line."""
    return [
        f"\n{label} failed: `{texts[-1].strip().splitlines()[-1][:200]}`" for label, texts in errors.items() if texts
    ]


def closing_lines(errors: dict, ours: dict, peers: dict, target: float) -> list:
    """Below a comparison table: `failure_lines(errors)`, then the best of ours, the fastest peer (sequences/s)
    and their ratio against `target` (when both sides have a figure)."""
    lines = failure_lines(errors)
    if ours and peers:
        best, fastest = max(ours, key=ours.get), max(peers, key=peers.get)
        lines += [
            "",
            f"Best of ours: {best}, {ours[best]:.1f} sequences/s; fastest peer: {fastest}, {peers[fastest]:.1f}; "
            f"ratio {ours[best] / peers[fastest]:.2f}x (target {target:g}x).",
        ]
    return lines


def publish(section: str, title: str, lines: list, write: bool, path: str | None = None) -> None:
    """Prints a benchmark's section and, when `write`, puts it in RESULTS.md between its markers (`write_section`)."""
    print("\n".join(lines))
    if write:
        write_section(section, title, lines, path)
        print(f"Updated {path or RESULTS}")


def replace_section(name: str, section: str, path: str | None = None) -> None:
    """Puts `section` between `<!-- name:start -->` and `<!-- name:end -->` in `path` (default RESULTS.md).

    The markers' old block is replaced, or the block is appended when the file lacks it (the file is created
    when missing); every other byte of the file stays as it was (line endings included). Atomic: the new text
    is written to a temporary file beside it and renamed over it, so a failed write leaves the old file whole.
    """
    path = path or RESULTS
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    body = section.strip("\n")
    block = f"{start}\n{body}\n{end}\n"
    if os.path.exists(path):
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    else:
        text = "# Benchmark results\n\n"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end) + "(\r?\n)?", re.S)
    text = pattern.sub(lambda _: block, text, count=1) if pattern.search(text) else text.rstrip("\n") + "\n\n" + block
    tmp_path = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp_path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise


def write_section(name: str, title: str, body_lines: list, path: str | None = None) -> None:
    """Replaces (or appends) the `name` section of RESULTS.md, headed `## title`, atomically (`replace_section`)."""
    replace_section(name, "\n".join([f"## {title}", ""] + list(body_lines)), path)


def git_commit() -> str:
    """The checkout's short commit hash, with `+changes` when the working tree differs from it."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (commit or "unknown") + ("+changes" if dirty else "")


def header_lines(command: str, load_before: str, load_after: str, versions: dict, commit: str | None = None) -> list:
    """The lines that head a RESULTS.md table; `commit`: the one measured (default: the checkout's now).

    A `commit` entry of `versions` (scripts that looked it up themselves) is the commit line, not a version.
    """
    versions = dict(versions)
    commit = commit or versions.pop("commit", None) or git_commit()
    lines = [
        f"- Date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Commit: {commit}",
        f"- Machine: {os.cpu_count()} CPU cores ({cpu_name()}), {gpu_note()}"
        + (f"; a contender ran on: {versions['device']}" if versions.get("device", "cpu").lower() != "cpu" else ""),
        f"- Load average (1/5/15 min) before: {load_before}; after: {load_after}",
    ]
    if versions:
        lines.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return lines + [f"- Command: `{command}`"]


def _tree_memory(process) -> tuple[int, int, int]:
    """(sum of RSS, sum of PSS, largest RSS of one process) over `process` and its descendants, in bytes.

    PSS splits a shared page between the processes that map it, so its sum is what the tree occupies; the
    RSS sum counts shared libraries once per process. PSS needs Linux (elsewhere it is the RSS)."""
    import psutil

    try:
        processes = [process] + process.children(recursive=True)
    except psutil.Error:
        return 0, 0, 0
    rss_total, pss_total, rss_max = 0, 0, 0
    for p in processes:
        try:
            info = p.memory_full_info()
        except psutil.Error:
            continue
        rss_total += info.rss
        pss_total += getattr(info, "pss", info.rss)
        rss_max = max(rss_max, info.rss)
    return rss_total, pss_total, rss_max


def measure_command(command: list, env: dict | None = None, timeout: float = 3600.0, interval: float = 0.25) -> dict:
    """Runs `command` from the repository root, sampling its process tree's memory every `interval` seconds.

    Returns {"seconds", "cpu_seconds" (the tree's, workers included), "peak_rss" (tree sum), "peak_pss" (tree
    sum), "peak_process_rss" (largest one process), "load" (mean 1-minute load average), "output"}. A run past
    `timeout` seconds is killed with its tree and raises RuntimeError, as does a non-zero exit."""
    import resource
    import tempfile
    import time

    import psutil

    def children_cpu():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    cpu_before = children_cpu()
    start = time.perf_counter()
    peaks = [0, 0, 0]
    loads = []
    with tempfile.TemporaryFile("w+") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        handle = psutil.Process(child.pid)
        while child.poll() is None:
            peaks = [max(a, b) for a, b in zip(peaks, _tree_memory(handle))]
            loads.append(os.getloadavg()[0])
            if time.perf_counter() - start > timeout:
                for process in handle.children(recursive=True) + [handle]:
                    try:
                        process.kill()
                    except psutil.NoSuchProcess:
                        pass
                child.wait(timeout=60)
                raise RuntimeError(f"{' '.join(command)} took more than {timeout:.0f} s; killed")
            time.sleep(interval)
        seconds = time.perf_counter() - start
        log.seek(0)
        output = log.read()
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({child.returncode}):\n{output[-3000:]}")
    return {
        "seconds": seconds,
        "cpu_seconds": children_cpu() - cpu_before,
        "peak_rss": peaks[0],
        "peak_pss": peaks[1],
        "peak_process_rss": peaks[2],
        "load": sum(loads) / max(len(loads), 1),
        "output": output,
    }
