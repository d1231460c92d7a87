r"""Fine-tuning accuracy against HuggingFace transformers: same weights, data, recipe and seeds.

    python benchmarks/finetune_accuracy.py                                   # every contender, seeds 1 2 3
    python benchmarks/finetune_accuracy.py --tasks=reviews --seeds=1,2,3,4,5 --contenders=ours,hf

What is measured: held-out accuracy of all-MiniLM-L6-v2 (installed by scripts/setup.sh; converted for ours
with `experiments.convert --from=hf`) fine-tuned with google-research/bert's recipe (AdamW at a peak of 5e-5,
10% linear warm-up then linear decay, weight decay 0.01 except LayerNorm and biases, global-norm clipping at
1.0, batch 32, 3 epochs, dropout 0.1, float32) on two of the bundled labelled sets:

- reviews: the first `--train_examples` of `data/fine_foods_train.tsv` (great/other), tested on all of
  `data/fine_foods_test.tsv` (accuracy);
- tags: the first `--train_examples` sentences of `data/brown_pos_train.conll` (universal part-of-speech tags),
  tested on all of `data/brown_pos_test.conll` (accuracy over words, first WordPiece of each word);
both at `--max_seq_length` WordPieces (128).

Contenders, each seed a fresh process:
- ours: `python -m experiments.finetune` with its defaults (packed rows: whole examples in random order filling
  rows of --max_seq_length, each computed as if alone; Adam with bias correction and epsilon 1e-8, as PyTorch's
  AdamW);
- ours, unpacked: the same with `--nopacking` (random batches of one example a row, each padded to its bucket
  of 16);
- ours, grouped: the same with `--group_by_length` (batches of one example a row, of near-equal lengths);
- ours, original: the same as ours with the original BERT's update, `--noadam_bias_correction --adam_epsilon=1e-6`;
- ours, bfloat16: the same as ours with `--mixed_precision=mixed_bfloat16` (Keras' mixed policy: bfloat16
  matmuls, float32 variables, LayerNorm, softmax, logits and loss); its speed needs a CPU with AVX-512 BF16 or
  AMX (elsewhere bfloat16 is emulated), its accuracy does not;
- hf: transformers' `BertForSequenceClassification` / `BertForTokenClassification.from_pretrained` on the
  same files, PyTorch eager, in its own virtual environment under --peer_dir (created from PyPI on first use):
  random batches padded to their longest row (`DataCollatorWithPadding` / `...ForTokenClassification`),
  `torch.optim.AdamW` (epsilon 1e-8, bias correction), `get_linear_schedule_with_warmup`, `clip_grad_norm_`,
  the Trainer's parameter groups (no decay for biases and LayerNorm weights), the last partial batch dropped as
  ours drops it.

The table (each seed and the mean per contender and task) goes to stdout and, unless --no-write, into the
`finetune_accuracy` section of benchmarks/RESULTS.md with date, CPU, versions and the command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common

SCRIPT = os.path.abspath(__file__)
SECTION = "finetune_accuracy"
DATA = os.path.join(_common.ROOT, "data")
TASKS = {
    "reviews": ("fine_foods_train.tsv", "fine_foods_test.tsv"),
    "tags": ("brown_pos_train.conll", "brown_pos_test.conll"),
}
# name -> (label, extra flags of experiments.finetune); "hf" is the peer.
OURS = {
    "ours": ("bert_tf, default (packed rows, random order)", []),
    "unpacked": ("bert_tf, --nopacking (random batches, each padded)", ["--nopacking"]),
    "grouped": ("bert_tf, --group_by_length", ["--group_by_length"]),
    "original": (
        "bert_tf, --noadam_bias_correction --adam_epsilon=1e-6",
        ["--noadam_bias_correction", "--adam_epsilon=1e-6"],
    ),
    "bfloat16": ("bert_tf, default with --mixed_precision=mixed_bfloat16", ["--mixed_precision=mixed_bfloat16"]),
}
CONTENDERS = list(OURS) + ["hf"]
RECIPE = dict(learning_rate=5e-5, epochs=3, batch_size=32, warmup_proportion=0.1, weight_decay=0.01, clip_norm=1.0)


# --- data ------------------------------------------------------------------------------------------


def write_subsets(task: str, train_examples: int, directory: str) -> tuple[str, str]:
    """The task's first `train_examples` training rows (or sentences) as a file in `directory`; the test file."""
    train_name, test_name = TASKS[task]
    path = os.path.join(directory, f"{task}_train_{train_examples}{os.path.splitext(train_name)[1]}")
    with open(os.path.join(DATA, train_name), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if task == "reviews":
        kept = lines[: 1 + train_examples]  # the header and the rows
    else:
        kept, sentences = [], 0
        for line in lines:
            if sentences >= train_examples:
                break
            kept.append(line)
            sentences += not line.strip()
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(kept).rstrip("\n") + "\n" + ("\n" if task == "tags" else ""))
    return path, os.path.join(DATA, test_name)


# --- contenders --------------------------------------------------------------------------------------


def run_ours(task, name, train_file, test_file, model_dir, seed, max_seq_length, work_dir, timeout) -> float:
    output_dir = os.path.join(work_dir, f"{task}_{name}_{seed}")
    flags = [
        f"--task={'classification' if task == 'reviews' else 'token_classification'}",
        f"--train_file={train_file}",
        f"--eval_file={test_file}",
        f"--model_dir={model_dir}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--do_eval",
        f"--max_seq_length={max_seq_length}",
        f"--train_batch_size={RECIPE['batch_size']}",
        "--eval_batch_size=64",
        f"--learning_rate={RECIPE['learning_rate']}",
        f"--num_train_epochs={RECIPE['epochs']}",
        f"--warmup_proportion={RECIPE['warmup_proportion']}",
        f"--weight_decay_rate={RECIPE['weight_decay']}",
        f"--clip_norm={RECIPE['clip_norm']}",
        f"--seed={seed}",
    ]
    if task == "reviews":
        # Truncated as HuggingFace's contender reads them (the default reads a review longer than the window in
        # windows: benchmarks/long_documents.py).
        flags += ["--text_a_column=text", "--label_column=label", "--long_text=truncate"]
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.finetune"] + flags + OURS[name][1],
        cwd=_common.ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    if proc.returncode:
        raise RuntimeError(f"ours ({name}, {task}, seed {seed}) failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    return results["accuracy" if task == "reviews" else "token_accuracy"]


def child_hf(args) -> dict:
    """HuggingFace transformers on PyTorch: fine-tunes and evaluates once; returns {"accuracy": ...}."""
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(os.cpu_count())
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.source)
    if args.task == "reviews":
        texts, labels = _read_tsv(args.train_file)
        test_texts, test_labels = _read_tsv(args.test_file)
        label_list = sorted(set(labels))
        model = transformers.BertForSequenceClassification.from_pretrained(args.source, num_labels=len(label_list))
        encode = lambda t: tokenizer(t, truncation=True, max_length=args.max_seq_length)  # noqa: E731
        train = [dict(encode(t), labels=label_list.index(y)) for t, y in zip(texts, labels)]
        test = [
            dict(encode(t), labels=label_list.index(y) if y in label_list else -1)
            for t, y in zip(test_texts, test_labels)
        ]
        collator = transformers.DataCollatorWithPadding(tokenizer)
    else:
        sentences, tags = _read_conll(args.train_file)
        test_sentences, test_tags = _read_conll(args.test_file)
        label_list = sorted({t for s in tags for t in s})
        model = transformers.BertForTokenClassification.from_pretrained(args.source, num_labels=len(label_list))

        def encode(words, word_tags):
            encoding = tokenizer(words, is_split_into_words=True, truncation=True, max_length=args.max_seq_length)
            ids, previous = [], None
            for word in encoding.word_ids():
                first = word is not None and word != previous
                tag = word_tags[word] if first else None
                ids.append(label_list.index(tag) if first and tag in label_list else -100)
                previous = word
            return dict(encoding, labels=ids)

        train = [encode(s, t) for s, t in zip(sentences, tags)]
        test = [encode(s, t) for s, t in zip(test_sentences, test_tags)]
        collator = transformers.DataCollatorForTokenClassification(tokenizer)
    generator = torch.Generator().manual_seed(args.seed)
    batch_size = RECIPE["batch_size"]
    loader = torch.utils.data.DataLoader(
        train, batch_size=batch_size, shuffle=True, drop_last=True, collate_fn=collator, generator=generator
    )
    num_steps = len(loader) * RECIPE["epochs"]
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
            "weight_decay": RECIPE["weight_decay"],
        },
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=RECIPE["learning_rate"], eps=1e-8)
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, int(RECIPE["warmup_proportion"] * num_steps), num_steps
    )
    model.train()
    for _ in range(RECIPE["epochs"]):
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), RECIPE["clip_norm"])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for start in range(0, len(test), 64):
            batch = collator(test[start : start + 64])
            labels = batch.pop("labels")
            predicted = model(**batch).logits.argmax(-1)
            if args.task == "reviews":
                correct += int((predicted == labels).sum())
                total += len(labels)
            else:
                scored = labels != -100
                correct += int(((predicted == labels) & scored).sum())
                total += int(scored.sum())
    if args.task == "tags":
        # Words past the cut get no prediction: count them as errors, as ours tags every word.
        total = sum(len(s) for s in test_sentences)
    return {"accuracy": correct / total, "transformers": transformers.__version__, "torch": torch.__version__}


def _read_tsv(path):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [r[0] for r in rows], [r[1] for r in rows]


def _read_conll(path):
    sentences, tags, words, word_tags = [], [], [], []
    with open(path, encoding="utf-8") as f:
        for line in list(f) + ["\n"]:
            if not line.strip():
                if words:
                    sentences.append(words)
                    tags.append(word_tags)
                words, word_tags = [], []
                continue
            word, tag = line.rstrip("\n").split("\t")
            words.append(word)
            word_tags.append(tag)
    return sentences, tags


# --- the run ---------------------------------------------------------------------------------------------


def convert_weights(work_dir: str, timeout: int) -> tuple[str, str]:
    """(the installed HuggingFace directory, our converted model directory)."""
    from bert_tf.checkpoints.published import minilm_l6_v2_dir

    source = minilm_l6_v2_dir()
    model_dir = os.path.join(work_dir, "minilm")
    subprocess.run(
        [sys.executable, "-m", "experiments.convert", "--from=hf", f"--input={source}", f"--output_dir={model_dir}"],
        cwd=_common.ROOT,
        check=True,
        capture_output=True,
        timeout=timeout,
    )
    return source, model_dir


def table(results: dict, seeds: list, labels: dict) -> list:
    lines = []
    for task, by_contender in results.items():
        lines += [
            f"**{task}** ({task_description(task)})",
            "",
            "| contender | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |",
            "| --- | " + " | ".join("---:" for _ in seeds) + " | ---: |",
        ]
        for name, accuracies in by_contender.items():
            cells = [f"{a:.4f}" for a in accuracies]
            lines.append(f"| {labels[name]} | " + " | ".join(cells) + f" | **{statistics.mean(accuracies):.4f}** |")
        if "hf" in by_contender and "ours" in by_contender:
            gap = statistics.mean(by_contender["ours"]) - statistics.mean(by_contender["hf"])
            lines.append("")
            lines.append(f"Default minus HuggingFace, mean over seeds: {100 * gap:+.2f} points.")
        lines.append("")
    return lines


def task_description(task: str) -> str:
    return {
        "reviews": "fine-food reviews, great/other; accuracy on 1,000 held-out reviews",
        "tags": "Brown part-of-speech tags; accuracy over the words of 1,000 held-out sentences",
    }[task]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="reviews,tags")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--train_examples", type=int, default=2000, help="Training reviews / sentences per task.")
    parser.add_argument("--max_seq_length", type=int, default=128, help="WordPieces per sequence, both tasks.")
    parser.add_argument("--peer_dir", default=_common.DEFAULT_PEER_DIR)
    parser.add_argument("--timeout", type=int, default=3600, help="Seconds for one contender's run.")
    parser.add_argument("--no-write", dest="write", action="store_false")
    parser.add_argument("--child", choices=["hf"], help=argparse.SUPPRESS)
    for name in ("task", "source", "train_file", "test_file"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child_hf(args)), flush=True)
        return
    tasks = args.tasks.split(",")
    contenders = args.contenders.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in contenders:
        if name not in CONTENDERS:
            parser.error(f"--contenders: unknown {name!r}; choose from {CONTENDERS}")
    for task in tasks:
        if task not in TASKS:
            parser.error(f"--tasks: unknown {task!r}; choose from {list(TASKS)}")
    hf_python = _common.peer_python(args.peer_dir, "hf_torch", create=True) if "hf" in contenders else None
    load_before, commit = _common.load_average(), _common.git_commit()
    versions = {}
    results = {task: {name: [] for name in contenders} for task in tasks}
    labels = dict({name: label for name, (label, _) in OURS.items()}, hf="HuggingFace transformers (PyTorch)")
    command = "python benchmarks/finetune_accuracy.py " + " ".join(sys.argv[1:])
    with tempfile.TemporaryDirectory() as work_dir:
        source, model_dir = convert_weights(work_dir, args.timeout)
        files = {task: write_subsets(task, args.train_examples, work_dir) for task in tasks}
        for done, seed in enumerate(seeds, start=1):  # interleaved: every task and contender once per seed
            for task in tasks:
                train_file, test_file = files[task]
                for name in contenders:
                    if name == "hf":
                        child_flags = [f"--task={task}", f"--source={source}", f"--train_file={train_file}"]
                        child_flags += [
                            f"--test_file={test_file}",
                            f"--seed={seed}",
                            f"--max_seq_length={args.max_seq_length}",
                        ]
                        out = _common.run_child(hf_python, SCRIPT, ["--child=hf"] + child_flags, timeout=args.timeout)
                        if "error" in out:
                            raise RuntimeError(f"hf ({task}, seed {seed}) failed:\n{out['error']}")
                        versions.update(transformers=out["transformers"], torch=out["torch"])
                        accuracy = out["accuracy"]
                    else:
                        accuracy = run_ours(
                            task,
                            name,
                            train_file,
                            test_file,
                            model_dir,
                            seed,
                            args.max_seq_length,
                            work_dir,
                            args.timeout,
                        )
                    results[task][name].append(accuracy)
                    print(f"{task} seed {seed} {name}: {accuracy:.4f}", flush=True)
            # Written after every seed, so a run cut short still leaves the seeds it finished.
            lines = table(results, seeds[:done], labels)
            if args.write:
                write_results(args, command, load_before, versions, commit, lines, seeds[:done], seeds)
    print("\n".join(lines))


def write_results(args, command, load_before, versions, commit, lines, seeds_done, seeds):
    recipe = (
        f"Recipe: all-MiniLM-L6-v2, first {args.train_examples:,} training reviews / sentences, sequence length "
        f"{args.max_seq_length}, batch 32, 3 epochs, AdamW peak 5e-5, 10% warm-up then linear decay, weight "
        "decay 0.01, clipping 1.0, dropout 0.1, float32 (but the bfloat16 contender); each contender and seed a "
        "fresh process, interleaved seed by seed."
    )
    if len(seeds_done) < len(seeds):
        recipe += f" Seeds finished so far: {len(seeds_done)} of {len(seeds)}."
    header = _common.header_lines(command.strip(), load_before, _common.load_average(), versions, commit)
    _common.write_section(SECTION, "Fine-tuning accuracy: ours against HuggingFace", header + ["", recipe, ""] + lines)


if __name__ == "__main__":
    main()
