r"""BERT encoder inference throughput (forward pass only): ours and, with --peers, the peers.

    python benchmarks/inference_throughput.py                    # ours: Keras model (XLA off, on), SavedModel
    python benchmarks/inference_throughput.py --peers --rounds=2 # + HF/PyTorch, keras-hub, Model Garden
    python benchmarks/inference_throughput.py --forms=float32,bfloat16,int8  # + our bfloat16 and int8 exports
    python benchmarks/inference_throughput.py --model_dir=<converted model> --layouts=packed,buckets,padded \
        --warmup_steps=1 --timed_steps=3 --rounds=2  # the exported encoder on the reviews' real lengths

What is measured: the encoder's forward pass (sequence and pooled outputs, training=False) on one
synthetic batch in memory, default bert_base shapes, seq 128, batch 8, random weights, float32.
Every contender runs in a fresh process: `--warmup_steps` untimed calls (the first traces/compiles,
reported apart), then `--timed_steps` calls each timed with the result fetched; the figure is the median.
With --rounds=N the contender list runs N times in turn (A B C A B C). Each round also times TensorFlow's
float32 2048x2048x2048 matmul (best of 10); the table gives each row's model GFLOP/s (sequences/s x the
encoder's forward matmul FLOPs, `train_throughput.encoder_forward_flops`) and its share of that rate, and the
closing lines the ceiling the rate puts on any float32 encoder against the fastest peer.

Contenders:
- ours, Keras: `BertEncoder` called in a `tf.function` (XLA off and on), as `bert_tf.tasks.inference`
  and `experiments/extract_features.py` run it;
- ours, SavedModel: the encoder exported with `bert_tf.export.export_encoder` (to a temporary directory),
  loaded through `hub.KerasLayer` (tf_keras, `TF_USE_LEGACY_KERAS=1`, in its own process) and called in a
  `tf.function`, as TF Hub users run it;
- --forms with bfloat16 and/or int8: ours, SavedModel, also exported in that form
  (`bert_tf.distillation.inference`, as `experiments.export --quantize` does) and loaded the same way. These
  rows are timed in the same rounds, interleaved with the others, and shown beside the float32 rows; the
  comparison with the peers (the closing line, "vs fastest peer" of the float32 rows) stays float32 against
  float32, like for like. Their figures are ratios to our float32 SavedModel;
- --peers (venvs under --peer_dir, created from PyPI on first use, shared with train_throughput.py):
  HuggingFace transformers `BertModel` on PyTorch (eval mode, `torch.inference_mode`);
  keras-hub `BertBackbone` (Keras 3, TF backend) called in a `tf.function` (XLA off and on);
  TF Model Garden `BertEncoderV2` (tf_keras) called in a `tf.function` (XLA off and on).

--layouts (with --model_dir, a converted model directory): instead of the contenders above, our exported
encoder (`export_encoder` of that model, loaded through `hub.KerasLayer` as above) on the real lengths of the
1,000 bundled test reviews (`data/fine_foods_test.tsv`, the model's WordPieces, truncated at
--max_seq_length), in batches of --batch_size reviews laid out as each entry says, every layout in a fresh
process, interleaved over the rounds: `packed` (rows of --max_seq_length filled with whole reviews in input
order, `bert_tf.data.packed_rows`, called with the fourth input `input_example_ids`: the `packed` signature),
`buckets` (one review a row, batches of similar length padded to a multiple of 16, as `bert_tf.data.length_buckets`
forms them for extract_features and classify_with_hub with --nopacking) and `padded` (one review a row in input
order, every batch padded to --max_seq_length: what the exported preprocessor gives). A step is one pass over the
reviews (every batch's `sequence_output` fetched); sequences/s = reviews / median pass. Its table goes into the
`exported_encoder_layouts` section.

The table goes to stdout and, unless --no-write, into the `inference_throughput` section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common
from train_throughput import (
    SHAPES,
    VOCAB,
    _time_steps,
    child_matmul_tf,
    encoder_forward_flops,
    hf_bert_config,
    keras_hub_backbone,
    keras_hub_inputs,
    model_garden_encoder,
)

SCRIPT = os.path.abspath(__file__)
SECTION = "inference_throughput"

OURS = [
    ("ours Keras", None, "ours_keras", ["--xla=0"]),
    ("ours Keras +XLA", None, "ours_keras", ["--xla=1"]),
    ("ours SavedModel via hub.KerasLayer", None, "ours_hub", []),
]
FLOAT32_SAVED_MODEL = OURS[-1][0]


def _export_in_child(tmp, flags):
    """Exports our encoder into `tmp` in a child process; returns (its export directory, the child's report)."""
    export_dir = os.path.join(tmp, "encoder")
    out = _common.run_child(sys.executable, SCRIPT, ["--child=ours_export", f"--export_dir={export_dir}", *flags])
    if "error" in out:
        sys.exit(f"export failed:\n{out['error']}")
    return export_dir, out


def form_contender(form):
    """The row of our SavedModel exported in a cheaper inference form (--forms)."""
    return (f"ours SavedModel {form} via hub.KerasLayer", None, "ours_hub", [f"--form={form}"])


def form_export_dir(export_dir, form):
    return export_dir if form == "float32" else f"{export_dir}_{form}"


# --layouts: name -> the table's label (see the module docstring).
LAYOUTS = {
    "packed": "packed rows (`packed` signature, + `input_example_ids`)",
    "buckets": "one review a row, length buckets of 16",
    "padded": "one review a row, padded to max_seq_length",
}
LAYOUTS_SECTION = "exported_encoder_layouts"
REVIEWS = os.path.join(_common.ROOT, "data", "fine_foods_test.tsv")
BUCKET_WIDTH = 16

PEERS = [
    ("HF torch BertModel", "hf_torch", "hf", []),
    ("keras-hub BertBackbone", "keras_hub", "keras_hub", ["--xla=0"]),
    ("keras-hub BertBackbone +XLA", "keras_hub", "keras_hub", ["--xla=1"]),
    ("Model Garden BertEncoderV2", "tf_models", "model_garden", ["--xla=0"]),
    ("Model Garden BertEncoderV2 +XLA", "tf_models", "model_garden", ["--xla=1"]),
]


def batch(args, np):
    rng = np.random.default_rng(0)
    B, S = args.batch_size, args.max_seq_length
    return {
        "input_word_ids": rng.integers(1000, VOCAB, (B, S)).astype("int32"),
        "input_mask": np.ones((B, S), "int32"),
        "input_type_ids": np.broadcast_to(np.arange(S) >= S // 2, (B, S)).astype("int32").copy(),
    }


def _ours_encoder(args):
    from bert_tf import BertConfig, BertEncoder

    config = BertConfig.from_preset(args.preset)
    return BertEncoder(config)


def child_ours_keras(args):
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import numpy as np
    import tensorflow as tf

    encoder = _ours_encoder(args)
    inputs = {k: tf.constant(v) for k, v in batch(args, np).items()}
    forward = tf.function(lambda x: encoder(x, training=False)["sequence_output"], jit_compile=bool(args.xla))
    result = _time_steps(lambda: forward(inputs), args, sync=lambda x: x.numpy())
    result["versions"] = {"tensorflow": tf.__version__, "keras": keras.__version__}
    return result


def child_ours_export(args):
    """Writes the SavedModels (ours, current code; one per --forms) for the hub.KerasLayer child; with --layouts,
    also the reviews' batches of each layout (`layout_batches`) in `<export_dir>.npz`."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    from bert_tf.distillation.inference import inference_form
    from bert_tf.export.exporter import export_encoder

    if args.model_dir:
        from bert_tf.checkpoints import load_encoder

        encoder = load_encoder(args.model_dir)
    else:
        encoder = _ours_encoder(args)
    for form in args.forms.split(","):
        path = form_export_dir(args.export_dir, form)
        export_encoder(inference_form(encoder, form), path, include_mlm=False, overwrite=True, verify=False)
    if not args.layouts:
        return {"path": args.export_dir}
    import numpy as np

    batches, stats = layout_batches(review_inputs(args.model_dir, args.max_seq_length), args)
    np.savez(args.export_dir + ".npz", **batches)
    return {"path": args.export_dir, "layouts": stats}


def review_inputs(model_dir, max_seq_length: int) -> dict:
    """The encoder inputs [reviews, max_seq_length] of the bundled test reviews, one review a row."""
    import csv

    import numpy as np

    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.data.packed_rows import ENCODER_KEYS
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    source = ModelSource(model_dir=model_dir).resolve(max_seq_length)
    tokenizer = TaskTokenizer(source.vocab_file, lower_case=source.do_lower_case)
    with open(REVIEWS, encoding="utf-8", newline="") as f:
        texts = [row["text"] for row in csv.DictReader(f, delimiter="\t")]
    pieces = tokenizer.tokenize(texts)
    inputs = {name: np.zeros((len(texts), max_seq_length), np.int32) for name in ENCODER_KEYS}
    for row, ids in enumerate(pieces):
        ids = [tokenizer.cls_id] + ids[: max_seq_length - 2] + [tokenizer.sep_id]
        inputs["input_word_ids"][row, : len(ids)] = ids
        inputs["input_mask"][row, : len(ids)] = 1
    return inputs


def layout_batches(inputs: dict, args) -> tuple[dict, dict]:
    """({"<layout>/<batch>/<input>": array}, {layout: {"batches", "real_tokens"}}) for every --layouts entry.

    Every batch of a layout is full, as the library's pipelines make them: a short last batch of one review a
    row is filled up with its first review (not counted), the last batch of packed rows with empty rows.
    """
    import numpy as np

    from bert_tf.data import length_buckets, packed_rows

    lengths = inputs["input_mask"].sum(axis=1)
    batch_size, max_seq_length = args.batch_size, args.max_seq_length
    batches, stats = {}, {}
    for layout in args.layouts.split(","):
        if layout == "packed":
            slots = packed_rows.max_examples_per_row(max_seq_length)
            table = packed_rows.slot_table_numpy(np.arange(len(lengths)), lengths, max_seq_length, slots)
            rows = packed_rows.rows_per_batch(lengths, batch_size, max_seq_length)
            table = np.concatenate([table, np.full((-len(table) % rows, slots), -1, np.int64)])
            arrays = []
            for start in range(0, len(table), rows):
                packed = packed_rows.pack_numpy(table[start : start + rows], inputs)
                arrays.append(
                    {name: packed[name] for name in packed_rows.ENCODER_KEYS + (packed_rows.EXAMPLE_IDS_KEY,)}
                )
        else:
            width = BUCKET_WIDTH if layout == "buckets" else 0
            arrays = []
            for batch in length_buckets.length_batches(lengths, batch_size, max_seq_length, width):
                indices = np.full(batch_size, batch.indices[0])
                indices[: len(batch.indices)] = batch.indices
                arrays.append({name: value[indices, : batch.seq_length] for name, value in inputs.items()})
        for index, arrays_of_batch in enumerate(arrays):
            for name, value in arrays_of_batch.items():
                batches[f"{layout}/{index}/{name}"] = value
        computed = sum(batch["input_word_ids"].size for batch in arrays)
        stats[layout] = {"batches": len(arrays), "real_tokens": int(lengths.sum()) / computed}
    return batches, stats


def child_ours_layout(args):
    """One --layouts entry: passes over the reviews' batches through the exported encoder (hub.KerasLayer)."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub

    layer = hub.KerasLayer(args.export_dir, trainable=False)
    with np.load(args.export_dir + ".npz") as saved:
        keys = [key for key in saved.files if key.startswith(args.layout + "/")]
        batches = [{} for _ in range(1 + max(int(key.split("/")[1]) for key in keys))]
        for key in keys:
            batches[int(key.split("/")[1])][key.split("/")[2]] = tf.constant(saved[key])
    forward = tf.function(lambda x: layer(x)["sequence_output"])

    def one_pass():
        for batch in batches:
            forward(batch).numpy()

    result = _time_steps(one_pass, args)
    result["versions"] = {"tensorflow_hub": hub.__version__}
    return result


def child_ours_hub(args):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub

    layer = hub.KerasLayer(form_export_dir(args.export_dir, args.form), trainable=False)
    inputs = {k: tf.constant(v) for k, v in batch(args, np).items()}
    forward = tf.function(lambda x: layer(x)["sequence_output"])
    result = _time_steps(lambda: forward(inputs), args, sync=lambda x: x.numpy())
    result["versions"] = {"tensorflow_hub": hub.__version__}
    return result


def child_hf(args):
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.BertModel(hf_bert_config(transformers, args.preset)).eval()
    b = {k: torch.from_numpy(v).long() for k, v in batch(args, np).items()}

    def step():
        with torch.inference_mode():
            return (
                model(input_ids=b["input_word_ids"], attention_mask=b["input_mask"], token_type_ids=b["input_type_ids"])
                .last_hidden_state.sum()
                .item()
            )

    result = _time_steps(step, args)
    result["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    return result


def child_keras_hub(args):
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras_hub
    import numpy as np
    import tensorflow as tf

    backbone = keras_hub_backbone(keras_hub, args.preset)
    inputs = keras_hub_inputs(batch(args, np), tf)
    forward = tf.function(lambda x: backbone(x, training=False)["sequence_output"], jit_compile=bool(args.xla))
    result = _time_steps(lambda: forward(inputs), args, sync=lambda x: x.numpy())
    result["versions"] = {"keras-hub": keras_hub.__version__}
    return result


def child_model_garden(args):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    from official.nlp.modeling import networks

    encoder = model_garden_encoder(networks, tf, args.preset)
    inputs = {k: tf.constant(v) for k, v in batch(args, np).items()}
    forward = tf.function(lambda x: encoder(x, training=False)["sequence_output"], jit_compile=bool(args.xla))
    result = _time_steps(lambda: forward(inputs), args, sync=lambda x: x.numpy())
    result["versions"] = {"tensorflow (Model Garden venv)": tf.__version__}
    return result


CHILDREN = {
    "ours_keras": child_ours_keras,
    "ours_export": child_ours_export,
    "ours_hub": child_ours_hub,
    "ours_layout": child_ours_layout,
    "hf": child_hf,
    "keras_hub": child_keras_hub,
    "model_garden": child_model_garden,
    "matmul_tf": child_matmul_tf,
}


def main_layouts(args):
    """--layouts: the exported encoder on the reviews' real lengths, one row per layout (the module docstring)."""
    layouts = args.layouts.split(",")
    model_dir = os.path.abspath(args.model_dir)
    common_flags = [
        f"--model_dir={model_dir}",
        f"--max_seq_length={args.max_seq_length}",
        f"--batch_size={args.batch_size}",
        f"--warmup_steps={args.warmup_steps}",
        f"--timed_steps={args.timed_steps}",
    ]
    load_before = _common.load_average()
    results = {layout: {"step_s": [], "first_step_s": []} for layout in layouts}
    versions = {}
    with tempfile.TemporaryDirectory() as tmp:
        export_dir, out = _export_in_child(tmp, [f"--layouts={args.layouts}", *common_flags])
        stats = out["layouts"]
        for round_index in range(args.rounds):
            for layout in layouts:
                out = _common.run_child(
                    sys.executable,
                    SCRIPT,
                    ["--child=ours_layout", f"--export_dir={export_dir}", f"--layout={layout}"] + common_flags,
                    env={"TF_USE_LEGACY_KERAS": "1"},
                )
                if "error" in out:
                    sys.exit(f"{layout} failed:\n{out['error']}")
                results[layout]["step_s"] += out["step_s"]
                results[layout]["first_step_s"].append(out["first_step_s"])
                versions.update(out["versions"])
                print(
                    f"[round {round_index + 1}] {layout}: {statistics.median(out['step_s']):.2f} s a pass", flush=True
                )
    load_after = _common.load_average()
    num_reviews = _count_reviews()
    rows = _common.step_rows(results, num_reviews, args.timed_steps)
    with open(os.path.join(model_dir, "bert_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    command = "python benchmarks/inference_throughput.py " + " ".join(
        "--model_dir=<model_dir>" if arg.startswith("--model_dir") else arg for arg in sys.argv[1:]
    )
    lines = [
        f"Our exported encoder (`export_encoder`, float32, through `hub.KerasLayer`) of a converted model "
        f"({config['num_hidden_layers']} layers, hidden {config['hidden_size']}) on the {num_reviews:,} bundled "
        f"test reviews' real lengths (truncated at {args.max_seq_length}), batches of {args.batch_size} reviews; "
        f"{args.rounds} interleaved round(s) of {args.warmup_steps} warm-up + {args.timed_steps} timed passes "
        "over the reviews per layout, each layout in a fresh process; figure = reviews / median pass.",
        "",
        *_common.header_lines(command, load_before, load_after, versions),
        "",
    ]
    reference = rows[layouts[-1]]["sequences_per_s"]
    columns = [("layout", "<"), ("batches", ">"), ("real tokens", ">"), ("sequences/s (median)", ">")]
    columns += [("per round", "<"), ("first pass s", ">"), (f"vs {layouts[-1]}", ">")]
    lines += _common.table_lines(
        columns,
        [
            [
                LAYOUTS[layout],
                stats[layout]["batches"],
                f"{100 * stats[layout]['real_tokens']:.0f}%",
                f"{rows[layout]['sequences_per_s']:.1f}",
                _common.per_round_cell(rows[layout]["per_round"]),
                f"{rows[layout]['first_step_s']:.1f}",
                f"{rows[layout]['sequences_per_s'] / reference:.2f}x",
            ]
            for layout in layouts
        ],
    )
    _common.publish(
        LAYOUTS_SECTION, "exported encoder on the reviews' lengths: packed rows vs one a row", lines, args.write
    )


def _count_reviews() -> int:
    import csv

    with open(REVIEWS, encoding="utf-8", newline="") as f:
        return sum(1 for _ in csv.DictReader(f, delimiter="\t"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="bert_base", choices=sorted(SHAPES))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--timed_steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--forms",
        default="float32",
        help="inference forms of our SavedModel: float32 and optionally bfloat16, int8 (rows beside float32's)",
    )
    parser.add_argument(
        "--model_dir", help="a converted model directory: its weights (default: --preset's random ones)"
    )
    parser.add_argument(
        "--layouts",
        default="",
        help=f"with --model_dir: the exported encoder on the reviews' real lengths, batches laid out as "
        f"each of {', '.join(LAYOUTS)} (comma-separated) instead of the contenders",
    )
    parser.add_argument("--peers", action="store_true")
    parser.add_argument("--only_peers", default="", help="comma-separated peer venvs to keep (hf_torch,...)")
    parser.add_argument("--peer_dir", default=_common.DEFAULT_PEER_DIR)
    parser.add_argument("--no-write", dest="write", action="store_false")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--xla", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--export_dir", help=argparse.SUPPRESS)
    parser.add_argument("--form", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--layout", choices=sorted(LAYOUTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warmup_steps < 1 or args.timed_steps < 1 or args.rounds < 1:
        parser.error("--warmup_steps, --timed_steps and --rounds must be >= 1")
    forms = args.forms.split(",")
    if "float32" not in forms or not set(forms) <= {"float32", "bfloat16", "int8"}:
        parser.error(f"--forms: float32 and optionally bfloat16, int8; got {args.forms}")

    if args.child:
        print("RESULT " + json.dumps(CHILDREN[args.child](args)), flush=True)
        return
    if args.layouts:
        unknown = sorted(set(args.layouts.split(",")) - set(LAYOUTS))
        if unknown or not args.model_dir:
            parser.error(f"--layouts: some of {', '.join(LAYOUTS)} (got {args.layouts}), with --model_dir")
        if args.peers or args.forms != "float32":
            parser.error("--layouts times our float32 export alone: leave out --peers and --forms")
        main_layouts(args)
        return

    pythons = {None: sys.executable}
    contenders = list(OURS) + [form_contender(form) for form in forms if form != "float32"]
    other_forms = [form_contender(form)[0] for form in forms if form != "float32"]
    if args.peers:
        keep = set(filter(None, args.only_peers.split(","))) or set(_common.PEER_VENVS)
        for name in sorted(keep):
            pythons[name] = _common.peer_python(args.peer_dir, name, create=True)
        contenders += [c for c in PEERS if c[1] in keep]
    common_flags = [
        f"--preset={args.preset}",
        f"--max_seq_length={args.max_seq_length}",
        f"--batch_size={args.batch_size}",
        f"--warmup_steps={args.warmup_steps}",
        f"--timed_steps={args.timed_steps}",
    ]

    load_before = _common.load_average()
    results = {label: {"step_s": [], "first_step_s": []} for label, *_ in contenders}
    versions = {}
    matmul_rate = None
    with tempfile.TemporaryDirectory() as tmp:
        export_dir, out = _export_in_child(tmp, [f"--forms={args.forms}", *common_flags])
        for round_index in range(args.rounds):
            for label, venv, kind, flags in contenders:
                env = {"TF_USE_LEGACY_KERAS": "1"} if kind in ("ours_hub", "model_garden") else {}
                out = _common.run_child(
                    pythons[venv],
                    SCRIPT,
                    [f"--child={kind}", f"--export_dir={export_dir}"] + common_flags + flags,
                    env=env,
                )
                if "error" in out:
                    print(f"[round {round_index + 1}] {label}: FAILED\n{out['error']}", flush=True)
                    results[label].setdefault("errors", []).append(out["error"][-300:])
                    continue
                results[label]["step_s"] += out["step_s"]
                results[label]["first_step_s"].append(out["first_step_s"])
                versions.update(out.get("versions", {}))
                print(
                    f"[round {round_index + 1}] {label}: "
                    f"{args.batch_size / statistics.median(out['step_s']):.1f} sequences/s",
                    flush=True,
                )
            # The machine's float32 product rate, once a round like every contender: the ceiling for the rows.
            out = _common.run_child(sys.executable, SCRIPT, ["--child=matmul_tf"])
            if "error" not in out:
                matmul_rate = max(matmul_rate or 0.0, out["flops_per_s"])
    load_after = _common.load_average()

    rows = _common.step_rows(results, args.batch_size, args.timed_steps)
    ours, peers = _common.ours_and_peers({label: row["sequences_per_s"] for label, row in rows.items()})
    # The peers run float32: our bfloat16 and int8 rows stand beside the comparison, not in it.
    ours = {label: rate for label, rate in ours.items() if label not in other_forms}
    fastest = max(peers, key=peers.get) if peers else None

    lines = [
        f"`{args.preset}` encoder forward, seq {args.max_seq_length}, batch {args.batch_size}, float32"
        f"{' (ours also ' + ' and '.join(f for f in forms if f != 'float32') + ')' if len(forms) > 1 else ''}, random "
        f"weights; {args.rounds} interleaved round(s) of {args.warmup_steps} warm-up + {args.timed_steps} timed "
        "calls per contender, each in a fresh process; figure = median call.",
        "",
    ]
    command = "python benchmarks/inference_throughput.py " + " ".join(sys.argv[1:])
    lines += _common.header_lines(command.strip(), load_before, load_after, versions)
    columns = [("contender", "<"), ("sequences/s (median)", ">"), ("per round", "<"), ("ms/call", ">")]
    flops = encoder_forward_flops(SHAPES[args.preset], args.max_seq_length)
    if matmul_rate:
        lines.append(
            f"- Forward FLOPs per sequence (matrix products, `encoder_forward_flops`): {flops / 1e9:.2f} GFLOP; "
            f"float32 2048x2048 matmul rate (TensorFlow, best of 10 in each round): {matmul_rate / 1e9:.0f} GFLOP/s"
        )
    columns += [("first call s", ">"), ("model GFLOP/s", ">"), ("% of matmul rate", ">"), ("vs fastest peer", ">")]
    lines += [""] + _common.table_lines(
        columns,
        [
            [
                label,
                f"{row['sequences_per_s']:.1f}",
                _common.per_round_cell(row["per_round"]),
                f"{1000 * row['median_step_s']:.0f}",
                f"{row['first_step_s']:.1f}",
                f"{row['sequences_per_s'] * flops / 1e9:.1f}",
                # A float32 product rate is no ceiling for the bfloat16 and int8 rows.
                f"{100 * row['sequences_per_s'] * flops / matmul_rate:.0f}%"
                if matmul_rate and label not in other_forms
                else "-",
                f"{row['sequences_per_s'] / peers[fastest]:.2f}x" if fastest and label not in other_forms else "-",
            ]
            for label, row in rows.items()
        ],
    )
    lines += _common.closing_lines({label: result.get("errors") for label, result in results.items()}, ours, peers, 1.1)
    if matmul_rate and fastest:
        ceiling = matmul_rate / flops
        lines += [
            "",
            f"Ceiling: a float32 encoder whose products all ran at the matmul rate would do {ceiling:.1f} "
            f"sequences/s, {ceiling / peers[fastest]:.2f}x the fastest peer: no float32 implementation can beat "
            "it by more on this machine.",
        ]
    reference = rows.get(FLOAT32_SAVED_MODEL, {}).get("sequences_per_s")
    ratios = [
        f"{label}: {rows[label]['sequences_per_s'] / reference:.2f}x"
        for label in other_forms
        if reference and label in rows and rows[label]["sequences_per_s"]
    ]
    if ratios:
        lines += [
            "",
            f"Cheaper forms against our float32 SavedModel, same rounds (no peer runs them): {'; '.join(ratios)}.",
        ]
    _common.publish(SECTION, "inference_throughput: encoder forward, ours vs peers", lines, args.write)


if __name__ == "__main__":
    main()
