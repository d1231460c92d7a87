r"""Speed and peak memory of create_pretraining_data: ours vs google-research/bert.

Runs both tools as subprocesses on the same corpus, vocabulary and flags
(max_seq_length 128, max_predictions_per_seq 20, dupe_factor 10, seed 12345),
measuring wall time, CPU time, input words per second and the peak resident
memory of the whole process tree (main process + workers, sampled every 50 ms;
reported in MiB). Ours runs on the corpus (`data/austen_corpus.txt`, 4.0 MB)
repeated 1x, 10x and 30x (--repeats) to show that its memory does not grow
with the corpus; the original, which holds every instance in memory (about
0.3 GiB more per 4 MB of corpus) and makes about 44,000 words per second, runs
on 1x and 3x (--reference_repeats). Each run may take at most --timeout
seconds. The 1x outputs are then summarized with
`tfrecords_tools.inspect_tfrecords` to show they are the same kind of data.

The same tool on Apache Beam's DirectRunner (`--runner=DirectRunner`, in this
process with --num_workers=1, else as many worker processes) runs beside it on
--beam_repeats; its 1x records are checked to be the local writer's (the same
multiset). It shows what the pipeline costs on one machine, not a cluster's speed.

The original is not part of this repository. Put google-research/bert's
`create_pretraining_data.py` and `tokenization.py` in a scratch folder, e.g.
from the `bert-tensorflow` wheel (its `bert/` folder), and pass it as
--reference_dir; import lines are adapted at run time in a temporary copy
(`import tensorflow.compat.v1 as tf`, `import tokenization`).

  python benchmarks/create_pretraining_data_speed.py \
      --vocab_file=/tmp/vocab_uncased.txt --reference_dir=/tmp/bert_original

Updates its section of benchmarks/RESULTS.md.
"""

import argparse
import datetime
import io
import os
import pathlib
import platform
import re
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import _common  # noqa: E402

SECTION = "create_pretraining_data_speed"
FLAGS = [
    "--max_seq_length=128",
    "--max_predictions_per_seq=20",
    "--dupe_factor=10",
    "--random_seed=12345",
    "--masked_lm_prob=0.15",
    "--short_seq_prob=0.1",
    "--do_lower_case=True",
]


def measure(command, env, timeout=3600.0):
    """Runs `command`; returns (wall s, CPU s of the tree, peak tree RSS in bytes, load, output).

    CPU time covers the process and the workers it waited for, so it shows the
    work done even when other jobs share the cores. A run that takes longer
    than `timeout` seconds is killed with its process tree, and fails.
    """
    result = _common.measure_command(command, env, timeout, interval=0.05)
    return result["seconds"], result["cpu_seconds"], result["peak_rss"], result["load"], result["output"]


def prepare_reference(reference_dir, work):
    """Copies the original script + tokenizer and adapts their imports."""
    target = work / "original"
    target.mkdir(exist_ok=True)
    for name in ("create_pretraining_data.py", "tokenization.py"):
        source = pathlib.Path(reference_dir) / name
        if not source.exists():
            raise FileNotFoundError(f"--reference_dir has no {name}: {source}")
        text = source.read_text(encoding="utf-8")
        text = re.sub(r"^import tensorflow as tf$", "import tensorflow.compat.v1 as tf", text, flags=re.M)
        text = re.sub(r"^from bert import tokenization$", "import tokenization", text, flags=re.M)
        (target / name).write_text(text, encoding="utf-8")
    return target / "create_pretraining_data.py"


def summarize(paths, vocab_file):
    from bert_tf.pretraining_data import inspection

    out = io.StringIO()
    stats = inspection.inspect(",".join(paths), vocab_file, num=0, out=out)
    text = out.getvalue()
    import numpy as np

    lengths = np.concatenate(stats.lengths)
    predictions = np.concatenate(stats.predictions)
    return {
        "instances": stats.num_records,
        "mean_length": float(lengths.mean()),
        "random_next": stats.num_random_next / stats.num_records,
        "masked_fraction": float(predictions.sum() / lengths.sum()),
        "text": text,
    }


def write_corpus(work, corpus_text, repeat):
    """The corpus repeated `repeat` times (once per size), each copy its own documents."""
    corpus = work / f"corpus_x{repeat}.txt"
    if not corpus.exists():
        with open(corpus, "wb") as f:
            for _ in range(repeat):
                f.write(corpus_text + b"\n")  # blank line: copies are separate documents
    return corpus


def same_records(paths, other_paths):
    """Whether two sets of TFRecord files hold the same multiset of records."""
    import tensorflow as tf

    def records(files):
        return sorted(bytes(r.numpy()) for r in tf.data.TFRecordDataset(files))

    return records(paths) == records(other_paths)


def count_words(path):
    words = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            words += len(block.split())  # blocks end mid-word at most once per 16 MB
    return words


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(ROOT / "data" / "austen_corpus.txt"))
    parser.add_argument("--vocab_file", required=True, help="a real BERT vocab (e.g. uncased, 30,522)")
    parser.add_argument("--reference_dir", help="folder with the original two files; omit to skip it")
    parser.add_argument("--repeats", default="1,10,30", help="corpus sizes for ours, in copies")
    parser.add_argument(
        "--reference_repeats",
        default="1,3",
        help="corpus sizes for the original (about 4 CPU s and 80 MiB per MB of corpus)",
    )
    parser.add_argument("--beam_repeats", default="1,10", help="corpus sizes for the DirectRunner; empty: skip it")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one tool run may take")
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--no_update", action="store_true", help="do not touch RESULTS.md")
    args = parser.parse_args()

    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="cpd_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    corpus_text = pathlib.Path(args.corpus).read_bytes()
    if not corpus_text.endswith(b"\n"):
        corpus_text += b"\n"
    import_seconds, *_ = measure([sys.executable, "-c", "import tensorflow"], env, args.timeout)
    rows = []
    ours_1x_output = None
    for repeat in [int(r) for r in args.repeats.split(",")]:
        corpus = write_corpus(work, corpus_text, repeat)
        words = count_words(corpus)
        output = work / f"ours_x{repeat}.tfrecord"
        command = [
            sys.executable,
            "-m",
            "tfrecords_tools.create_pretraining_data",
            f"--input_file={corpus}",
            f"--output_file={output}",
            f"--vocab_file={args.vocab_file}",
            f"--num_workers={args.num_workers}",
        ] + FLAGS
        seconds, cpu, peak, load, _ = measure(command, env, args.timeout)
        rows.append((f"bert_tf (ours), {args.num_workers} workers", repeat, words, seconds, cpu, peak, load))
        print(rows[-1], flush=True)
        if repeat == 1:
            ours_1x_output = output
        else:
            os.remove(output)  # gigabytes at 10x and more; only the 1x output is summarized
    beam_matches = None
    for repeat in [int(r) for r in args.beam_repeats.split(",") if r]:
        corpus = write_corpus(work, corpus_text, repeat)
        output = work / f"beam_x{repeat}" / "out.tfrecord"
        mode = "in_memory" if args.num_workers == 1 else "multi_processing"
        command = [
            sys.executable,
            "-m",
            "tfrecords_tools.create_pretraining_data",
            f"--input_file={corpus}",
            f"--output_file={output}",
            f"--vocab_file={args.vocab_file}",
            "--runner=DirectRunner",
            f"--num_output_shards={args.num_workers}",
            f"--beam_pipeline_options=direct_num_workers={args.num_workers},direct_running_mode={mode}",
        ] + FLAGS
        seconds, cpu, peak, load, _ = measure(command, env, args.timeout)
        rows.append(
            (
                f"bert_tf on Beam's DirectRunner, {args.num_workers} workers",
                repeat,
                count_words(corpus),
                seconds,
                cpu,
                peak,
                load,
            )
        )
        print(rows[-1], flush=True)
        if repeat == 1 and ours_1x_output is not None:
            beam_matches = same_records([str(ours_1x_output)], sorted(str(p) for p in output.parent.iterdir()))
        shutil.rmtree(output.parent)

    original_summary = ours_summary = None
    if args.reference_dir:
        script = prepare_reference(args.reference_dir, work)
        env_original = dict(env, PYTHONPATH=str(script.parent))
        for repeat in [int(r) for r in args.reference_repeats.split(",")]:
            corpus = write_corpus(work, corpus_text, repeat)
            output = work / f"original_x{repeat}.tfrecord"
            command = [
                sys.executable,
                str(script),
                f"--input_file={corpus}",
                f"--output_file={output}",
                f"--vocab_file={args.vocab_file}",
            ] + FLAGS
            seconds, cpu, peak, load, _ = measure(command, env_original, args.timeout)
            rows.append(
                ("google-research/bert (original), 1 process", repeat, count_words(corpus), seconds, cpu, peak, load)
            )
            print(rows[-1], flush=True)
            if repeat == 1:
                original_summary = summarize([str(output)], args.vocab_file)
        if ours_1x_output is not None and original_summary is not None:
            ours_summary = summarize([str(ours_1x_output)], args.vocab_file)

    # Report.
    title = "create_pretraining_data: speed and peak memory"
    lines = [
        f"Date: {datetime.date.today()}. Machine: {os.cpu_count()}-core CPU ({_common.cpu_name()}), "
        f"{_common.gpu_note()}. "
        "Python " + platform.python_version() + f". Commit: {_common.git_commit()}.",
        "",
        "Command: `python benchmarks/create_pretraining_data_speed.py --vocab_file=VOCAB "
        "--reference_dir=BERT_ORIGINAL`",
        f"(corpus `{os.path.relpath(args.corpus, ROOT)}` repeated, uncased vocab of "
        f"{sum(1 for _ in open(args.vocab_file, encoding='utf-8')):,} tokens, flags "
        f"`{' '.join(FLAGS)}`). Wall time is end to end, process start included; words/s is input "
        "words (whitespace-separated) per wall second; CPU s is user + system time of the process and "
        "its workers (words per CPU second is what the work costs when other jobs share the cores); "
        "memory is the peak RSS summed over the process tree, in MiB (2^20 bytes); load is the mean 1-minute "
        "load average during the run (2 means both cores busy: other jobs compete with the run above that).",
        "",
        "| tool | corpus | input words | wall s | words/s | CPU s | words per CPU s | peak RSS MiB | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, repeat, words, seconds, cpu, peak, load in rows:
        lines.append(
            f"| {name} | {repeat}x | {words:,} | {seconds:.1f} | {words / seconds:,.0f} | "
            f"{cpu:.1f} | {words / cpu:,.0f} | {peak / 2**20:,.0f} | {load:.1f} |"
        )
    original = [r for r in rows if r[0].startswith("google")]
    ours = [r for r in rows if r[0].startswith("bert_tf (ours)")]
    if beam_matches is not None:
        lines.append("")
        lines.append(
            "DirectRunner, 1x corpus: the same multiset of records as the local writer: "
            f"{'yes' if beam_matches else 'NO'}."
        )
    if original and ours:
        # The original's rate is steady (its start-up is a few seconds of
        # minutes); ours has a fixed start-up (importing TensorFlow, setting up
        # the tokenizer in each worker), so the rate between the smallest and
        # largest corpus is what a large corpus sees. The original's faster run
        # is the base, so the ratios are the conservative ones.
        base = max(original, key=lambda row: row[2] / row[3])
        base_wall, base_cpu = base[2] / base[3], base[2] / base[4]
        lines.append("")
        lines.append(
            f"Original: {base_wall:,.0f} words/s, {base_cpu:,.0f} words per CPU s ({base[1]}x corpus, its faster run)."
        )
        lines.append(f"Fixed start-up in ours: `import tensorflow` alone takes {import_seconds:.1f} s here.")
        for name, repeat, words, seconds, cpu, _, _ in ours:
            lines.append(
                f"Ours, {repeat}x corpus, end to end: {words / seconds / base_wall:.1f}x the original's "
                f"words/s, {words / cpu / base_cpu:.1f}x its words per CPU s."
            )
        if len(ours) >= 2:
            (_, r0, w0, s0, c0, _, _), (_, r1, w1, s1, c1, _, _) = ours[0], ours[-1]
            lines.append(
                f"Ours, marginal rate from {r0}x to {r1}x (start-up excluded): "
                f"{(w1 - w0) / (s1 - s0):,.0f} words/s = {(w1 - w0) / (s1 - s0) / base_wall:.1f}x the "
                f"original; {(w1 - w0) / (c1 - c0):,.0f} words per CPU s = "
                f"{(w1 - w0) / (c1 - c0) / base_cpu:.1f}x."
            )
    if original_summary and ours_summary:
        lines += [
            "",
            "Same kind of output (1x corpus, from `inspect_tfrecords`):",
            "",
            "| tool | instances | mean length | random next | masked fraction |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, s in (("ours", ours_summary), ("original", original_summary)):
            lines.append(
                f"| {name} | {s['instances']:,} | {s['mean_length']:.1f} | "
                f"{s['random_next']:.1%} | {s['masked_fraction']:.2%} |"
            )
    print("\n".join([f"## {title}", ""] + lines))
    if not args.no_update:
        _common.write_section(SECTION, title, lines)
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
