r"""Fine-tuning throughput on real text: all-MiniLM-L6-v2 on the bundled reviews, ours vs the peers users pick.

    python benchmarks/finetune_throughput.py                      # ours: packed (the default), random, grouped
    python benchmarks/finetune_throughput.py --peers              # + HF/PyTorch (2 ways), keras-hub; interleaved
    python benchmarks/finetune_throughput.py --peers --rounds=2 --timed_steps=30
    python benchmarks/finetune_throughput.py --bfloat16           # + the default in mixed_bfloat16 (native only)

What is measured: fine-tuning steps of a sentence classifier (2 classes) on the converted all-MiniLM-L6-v2
(6 layers, H=384, installed by scripts/setup.sh) over `data/fine_foods_train.tsv`, the bundled reviews with
their real length distribution, truncated at `--max_seq_length` (128): batch 32, AdamW (peak 1e-4, linear
warm-up then decay, weight decay 0.01 except LayerNorm and biases, eps 1e-6), global-norm clipping at 1.0,
dropout 0.1, float32. Each contender runs in a fresh process; it takes `--warmup_steps` untimed steps, then
`--timed_steps` steps timed as one span of wall-clock time from the end of the last warm-up step to the end
of the last timed step, so everything a training step costs its user is inside it (input pipeline, padding,
the loop's logging and summaries). Figure: sequences in the timed steps / that time. The same figure for
every contender; with `--rounds=N` the contender list runs N times in turn (A B C A B C) and the figure is
the total over the rounds. "real tokens" is the share of the timed batches' positions that are not padding.

Contenders:
- ours, the default: `bert_tf.training.train` (the loop `experiments.finetune` runs) on `ClassificationTask`'s
  tf.data pipeline (in-graph WordPiece) of packed rows (`bert_tf.data.packed_rows`): rows of 128 tokens filled
  with whole reviews in random order, as many rows as hold 32 reviews on average, every batch of one shape;
  its sequences are the reviews its timed batches hold (not steps x 32).
- ours, --nopacking: the same loop on batches of one review a row, random, each padded to the smallest
  multiple of 16 holding its longest review (`bucket_width=16`).
- ours, --group_by_length: the same with batches of near-equal lengths (sorted inside chunks of 50 batches).
- ours, --nopacking --bucket_width=0: random batches, every one padded to 128.
- with --bfloat16, on a CPU with AVX-512 BF16 or AMX (`bert_tf.cpu_features`; elsewhere bfloat16 is emulated and
  the row is left out, saying so): the default in `mixed_bfloat16`.
- --peers, each in its own venv under --peer_dir (created from PyPI on first use, see benchmarks/_common.py):
  HuggingFace transformers `BertForSequenceClassification.from_pretrained` on the same installed weights, on
  PyTorch (eager), as its users run it: tokenized beforehand (`BertTokenizerFast`, truncation at 128), a
  `DataLoader` with `DataCollatorWithPadding` (each batch padded to its longest row) over random batches,
  and with the Trainer's `group_by_length` sampler (`LengthGroupedSampler`); torch.optim.AdamW, linear
  schedule, `clip_grad_norm_`, `loss.item()` every step (the Trainer's loop, without the Trainer).
  keras-hub `BertClassifier` (Keras 3, TF backend, `train_on_batch`, XLA off) on a `BertBackbone` of the
  same shape with random weights (keras-hub loads HF weights only through its hub presets, which need
  the network; the weights do not change the cost of a step) with the exact GELU swapped in for its tanh
  approximation (`train_throughput.use_exact_gelu`), batches of token ids padded to 128 as its
  `BertTextClassifierPreprocessor(sequence_length=128)` packs them, random batches; loss only, no metrics.

What remains different: ours computes a batch accuracy with the loss (the peers compute the loss alone);
keras-hub's weights are random; each library tokenizes with its own WordPiece implementation of the same
vocabulary (lengths agree to within a few pieces). Ours and HF share the data order only in kind (each
library's sampler, seeded).

The table goes to stdout and, unless --no-write, into the `finetune_throughput` section of
benchmarks/RESULTS.md with date, CPU, load average, versions and the command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common

SCRIPT = os.path.abspath(__file__)
SECTION = "finetune_throughput"
TRAIN_TSV = os.path.join(_common.ROOT, "data", "fine_foods_train.tsv")

# (label, venv: None = ours, child kind, extra child flags)
OURS = [
    ("ours, default (packed rows, random order)", None, "ours", ["--order=packed"]),
    ("ours, --nopacking (random batches, buckets of 16)", None, "ours", ["--order=random", "--bucket_width=16"]),
    ("ours, --group_by_length (buckets of 16)", None, "ours", ["--order=grouped", "--bucket_width=16"]),
    ("ours, --nopacking --bucket_width=0 (padded to 128)", None, "ours", ["--order=random", "--bucket_width=0"]),
]
BFLOAT16 = ("ours, default in mixed_bfloat16", None, "ours", ["--order=packed", "--mixed_precision=mixed_bfloat16"])
PEERS = [
    ("HF torch, DataCollatorWithPadding, random batches", "hf_torch", "hf", ["--hf_order=random"]),
    ("HF torch, group_by_length", "hf_torch", "hf", ["--hf_order=group_by_length"]),
    ("keras-hub BertClassifier, padded to 128", "keras_hub", "keras_hub", []),
]


def read_reviews(path: str, limit: int = 0):
    """(texts, labels) of a `text<TAB>label` file with a header."""
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            text, label = line.rstrip("\n").split("\t")
            texts.append(text)
            labels.append(int(label))
            if limit and len(texts) >= limit:
                break
    return texts, labels


def minilm_source_dir() -> str:
    """The installed all-MiniLM-L6-v2 (HF format: config.json, model.safetensors, vocab.txt)."""
    from bert_tf.checkpoints.published import minilm_l6_v2_dir

    return minilm_l6_v2_dir()


def _num_steps(args) -> int:
    return args.warmup_steps + args.timed_steps


def _timed(step_end_times: list, args) -> float:
    """Seconds from the end of the last warm-up step to the end of the last timed step."""
    return step_end_times[args.warmup_steps + args.timed_steps - 1] - step_end_times[args.warmup_steps - 1]


# --- children -------------------------------------------------------------------------------------


def child_ours(args):
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import numpy as np
    import tensorflow as tf

    from bert_tf import training
    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.config import BertConfig
    from bert_tf.data.examples import TextExample
    from bert_tf.models import BertEncoder
    from bert_tf.tasks.classification import ClassificationTask
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    model_dir = args.model_dir
    config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
    task = ClassificationTask(
        TaskTokenizer(os.path.join(model_dir, "vocab.txt")),
        args.max_seq_length,
        ["0", "1"],
        bucket_width=args.bucket_width,
        group_by_length=args.order == "grouped",
        packing=args.order == "packed",
    )
    training.set_precision_policy(args.mixed_precision)
    texts, labels = read_reviews(TRAIN_TSV, args.num_examples)
    features = task.featurize(
        [TextExample(f"r{i}", t, None, str(y)) for i, (t, y) in enumerate(zip(texts, labels))], training=True
    )
    steps = _num_steps(args)

    def dataset_fn(input_context):
        return task.dataset(features, args.batch_size, training=True, seed=0, input_context=input_context)

    # The positions the timed steps compute, from the same (deterministic) pipeline.
    real = padded = sequences = 0
    for i, batch in enumerate(dataset_fn(None).take(steps)):
        if i >= args.warmup_steps:
            real += int(batch["input_mask"].numpy().sum())
            padded += int(np.prod(batch["input_mask"].shape))
            sequences += int((batch["feature_index"].numpy() >= 0).sum())  # packed: a batch's examples vary

    step_end_times = []

    def record(step, metrics):
        step_end_times.append(time.perf_counter())

    loop_config = training.TrainingConfig(
        num_train_steps=steps,
        learning_rate=1e-4,
        num_warmup_steps=max(1, steps // 10),
        weight_decay_rate=0.01,
        clip_norm=1.0,
        steps_per_loop=1,
        save_checkpoints_steps=10**9,
    )
    with tempfile.TemporaryDirectory() as output_dir:
        training.train(
            training.get_strategy("one_device"),
            lambda: task.build_model(BertEncoder(config)),
            task.compute_loss,
            dataset_fn,
            output_dir,
            loop_config,
            init_fn=lambda model: restore(model.encoder, model_dir),
            loop_callback=record,
        )
    return {
        "seconds": _timed(step_end_times, args),
        "sequences": sequences,
        "real_tokens": real,
        "positions": padded,
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
    }


def child_hf(args):
    import torch
    import transformers
    from torch.utils.data import DataLoader
    from transformers.trainer_pt_utils import LengthGroupedSampler

    source = args.hf_dir
    torch.manual_seed(0)
    tokenizer = transformers.BertTokenizerFast(os.path.join(source, "vocab.txt"), do_lower_case=True)
    texts, labels = read_reviews(TRAIN_TSV, args.num_examples)
    encoded = tokenizer(texts, truncation=True, max_length=args.max_seq_length)
    rows = [
        {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "labels": label}
        for ids, types, mask, label in zip(
            encoded["input_ids"], encoded["token_type_ids"], encoded["attention_mask"], labels
        )
    ]
    collator = transformers.DataCollatorWithPadding(tokenizer)
    generator = torch.Generator().manual_seed(0)
    if args.hf_order == "group_by_length":
        sampler = LengthGroupedSampler(
            args.batch_size, lengths=[len(r["input_ids"]) for r in rows], generator=generator
        )
        loader = DataLoader(rows, batch_size=args.batch_size, sampler=sampler, collate_fn=collator, drop_last=True)
    else:
        loader = DataLoader(
            rows, batch_size=args.batch_size, shuffle=True, generator=generator, collate_fn=collator, drop_last=True
        )
    model = transformers.BertForSequenceClassification.from_pretrained(source, num_labels=2)
    model.train()
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4, eps=1e-6
    )
    steps = _num_steps(args)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, max(1, steps // 10), steps)
    step_end_times, real, padded = [], 0, 0
    batches = iter(loader)
    for step in range(steps):
        batch = next(batches)
        if step >= args.warmup_steps:
            real += int(batch["attention_mask"].sum())
            padded += batch["attention_mask"].numel()
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        step_end_times.append(time.perf_counter())
    return {
        "seconds": _timed(step_end_times, args),
        "real_tokens": real,
        "positions": padded,
        "threads": torch.get_num_threads(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


def child_keras_hub(args):
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    with open(os.path.join(args.hf_dir, "config.json"), encoding="utf-8") as f:
        hf = json.load(f)
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=hf["vocab_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=hf["num_attention_heads"],
        hidden_dim=hf["hidden_size"],
        intermediate_dim=hf["intermediate_size"],
        dropout=0.1,
        max_sequence_length=hf["max_position_embeddings"],
        num_segments=hf["type_vocab_size"],
    )
    from train_throughput import use_exact_gelu

    use_exact_gelu(backbone, keras)  # MiniLM's (and BERT's) exact GELU, not keras-hub's tanh approximation
    model = keras_hub.models.BertClassifier(backbone, num_classes=2, preprocessor=None, dropout=0.1)
    steps = _num_steps(args)
    schedule = keras.optimizers.schedules.PolynomialDecay(1e-4, steps, 0.0)
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "layer_norm", "LayerNorm", "gamma", "beta"])
    model.compile(
        optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False
    )
    tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=os.path.join(args.hf_dir, "vocab.txt"), lowercase=True)
    packer = keras_hub.layers.MultiSegmentPacker(
        sequence_length=args.max_seq_length,
        start_value=tokenizer.cls_token_id,
        end_value=tokenizer.sep_token_id,
        pad_value=tokenizer.pad_token_id,
    )
    texts, labels = read_reviews(TRAIN_TSV, args.num_examples)
    token_ids, segment_ids = packer(tokenizer(tf.constant(texts)))
    token_ids, segment_ids = np.asarray(token_ids), np.asarray(segment_ids)
    labels = np.asarray(labels, np.int32)
    order = np.random.default_rng(0).permutation(len(texts))
    step_end_times, real, padded = [], 0, 0
    for step in range(steps):
        rows = order[step * args.batch_size : (step + 1) * args.batch_size]
        x = {
            "token_ids": tf.constant(token_ids[rows]),
            "segment_ids": tf.constant(segment_ids[rows]),
            "padding_mask": tf.constant(token_ids[rows] != tokenizer.pad_token_id),
        }
        if step >= args.warmup_steps:
            real += int(x["padding_mask"].numpy().sum())
            padded += int(np.prod(x["padding_mask"].shape))
        model.train_on_batch(x, tf.constant(labels[rows]))
        step_end_times.append(time.perf_counter())
    return {
        "seconds": _timed(step_end_times, args),
        "real_tokens": real,
        "positions": padded,
        "versions": {
            "keras-hub": keras_hub.__version__,
            "keras (keras-hub venv)": keras.__version__,
            "tensorflow (keras-hub venv)": tf.__version__,
        },
    }


CHILDREN = {"ours": child_ours, "hf": child_hf, "keras_hub": child_keras_hub}


# --- parent ---------------------------------------------------------------------------------------


def convert_minilm(directory: str) -> str:
    """Converts the installed all-MiniLM-L6-v2 into a bert_tf model directory under `directory` (once)."""
    model_dir = os.path.join(directory, "minilm_l6_v2")
    if not os.path.exists(os.path.join(model_dir, "bert_config.json")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "experiments.convert",
                "--from=hf",
                f"--input={minilm_source_dir()}",
                f"--output_dir={model_dir}",
            ],
            check=True,
            timeout=600,
            cwd=_common.ROOT,
            capture_output=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
    return model_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--timed_steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--num_examples", type=int, default=0, help="use the first N reviews (0: all 4,000)")
    parser.add_argument("--peers", action="store_true", help="also run the peers (venvs created on first use)")
    parser.add_argument("--only_peers", default="", help="comma-separated peer venvs to keep (hf_torch,keras_hub)")
    parser.add_argument("--peer_dir", default=_common.DEFAULT_PEER_DIR)
    parser.add_argument("--work_dir", default=os.path.join(os.path.expanduser("~"), ".cache", "bert_tf_bench"))
    parser.add_argument("--no-write", dest="write", action="store_false", help="do not update RESULTS.md")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--bucket_width", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--order", choices=["packed", "random", "grouped"], default="packed", help=argparse.SUPPRESS)
    parser.add_argument("--mixed_precision", default="float32", help=argparse.SUPPRESS)
    parser.add_argument(
        "--bfloat16", action="store_true", help="also the default in mixed_bfloat16, on CPUs that compute it natively"
    )
    parser.add_argument("--hf_order", default="random", help=argparse.SUPPRESS)
    parser.add_argument("--model_dir", help=argparse.SUPPRESS)
    parser.add_argument("--hf_dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warmup_steps < 1 or args.timed_steps < 10 or args.rounds < 1:
        parser.error("--warmup_steps and --rounds must be >= 1, --timed_steps >= 10")
    if args.num_examples and args.num_examples < args.batch_size * (args.warmup_steps + args.timed_steps):
        parser.error("--num_examples must hold (--warmup_steps + --timed_steps) batches")

    if args.child:
        print("RESULT " + json.dumps(CHILDREN[args.child](args)), flush=True)
        return

    os.makedirs(args.work_dir, exist_ok=True)
    model_dir = convert_minilm(args.work_dir)
    hf_dir = minilm_source_dir()
    contenders = list(OURS)
    if args.bfloat16:
        from bert_tf import cpu_features

        warning = cpu_features.form_cost_warning("bfloat16")
        if warning is None:
            contenders.append(BFLOAT16)
        else:
            print(f"--bfloat16: not measured: {warning}", flush=True)
    pythons = {None: sys.executable}
    if args.peers:
        keep = set(filter(None, args.only_peers.split(","))) or {"hf_torch", "keras_hub"}
        for name in sorted(keep):
            pythons[name] = _common.peer_python(args.peer_dir, name, create=True)
        contenders += [c for c in PEERS if c[1] in keep]
    common_flags = [
        f"--batch_size={args.batch_size}",
        f"--max_seq_length={args.max_seq_length}",
        f"--warmup_steps={args.warmup_steps}",
        f"--timed_steps={args.timed_steps}",
        f"--num_examples={args.num_examples}",
        f"--model_dir={model_dir}",
        f"--hf_dir={hf_dir}",
    ]
    load_before = _common.load_average()
    totals = {
        label: {"seconds": 0.0, "sequences": 0, "real": 0, "positions": 0, "rounds": []} for label, *_ in contenders
    }
    versions = {}
    for round_index in range(args.rounds):
        for label, venv, kind, flags in contenders:
            out = _common.run_child(pythons[venv], SCRIPT, [f"--child={kind}"] + common_flags + flags)
            if "error" in out:
                print(f"[round {round_index + 1}] {label}: FAILED\n{out['error']}", flush=True)
                totals[label].setdefault("errors", []).append(out["error"][-300:])
                continue
            sequences = out.get("sequences", args.timed_steps * args.batch_size)
            row = totals[label]
            row["seconds"] += out["seconds"]
            row["sequences"] += sequences
            row["real"] += out["real_tokens"]
            row["positions"] += out["positions"]
            row["rounds"].append(sequences / out["seconds"])
            versions.update(out.get("versions", {}))
            print(
                f"[round {round_index + 1}] {label}: {sequences / out['seconds']:.1f} sequences/s "
                f"({args.timed_steps} steps in {out['seconds']:.1f} s; real tokens "
                f"{100 * out['real_tokens'] / out['positions']:.0f}%)",
                flush=True,
            )
    load_after = _common.load_average()

    rates = {label: r["sequences"] / r["seconds"] for label, r in totals.items() if r["seconds"]}
    ours, peers = _common.ours_and_peers(rates)
    best_ours = max(ours.values()) if ours else None
    lines = [
        f"all-MiniLM-L6-v2 (L=6, H=384) sentence classifier on the bundled reviews (`data/fine_foods_train.tsv`, "
        f"truncated at {args.max_seq_length}), batch {args.batch_size}, AdamW + clipping, dropout 0.1, float32; "
        f"{args.rounds} interleaved round(s) of {args.warmup_steps} warm-up + {args.timed_steps} timed steps per "
        "contender, each in a fresh process; figure = timed sequences / wall-clock time of the timed steps "
        "(input pipeline and the loop's own work included).",
        "",
    ]
    command = "python benchmarks/finetune_throughput.py " + " ".join(sys.argv[1:])
    lines += _common.header_lines(command.strip(), load_before, load_after, versions)
    columns = [("contender", "<"), ("sequences/s", ">"), ("per round", "<"), ("real tokens", ">")]
    columns += [("best ours / this", ">")]
    lines += [""] + _common.table_lines(
        columns,
        [
            [
                label,
                f"{rate:.1f}",
                _common.per_round_cell(totals[label]["rounds"]),
                f"{100 * totals[label]['real'] / max(totals[label]['positions'], 1):.0f}%",
                f"{best_ours / rate:.2f}x" if best_ours else "-",
            ]
            for label, rate in rates.items()
        ],
    )
    lines += _common.closing_lines({label: row.get("errors") for label, row in totals.items()}, ours, peers, 1.25)
    _common.publish(SECTION, "finetune_throughput: fine-tuning on real text, ours vs peers", lines, args.write)


if __name__ == "__main__":
    main()
