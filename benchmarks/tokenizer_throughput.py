r"""Tokenizer throughput: our in-graph BertTokenizer vs HuggingFace's BertTokenizerFast.

Both tokenize the same sentences with the same vocabulary (no [CLS]/[SEP]),
in batches, and report sentences per second (best of --repeats passes after
a warm-up pass). Ours runs two ways: a `tf.function` called per batch, and a
`tf.data` pipeline (batch -> map(tokenizer) with parallel calls), which is how
training input pipelines use it. HuggingFace's slow Python tokenizer (the
reference of the parity tests) is timed on a slice of the text for scale.

HuggingFace runs in a child process of --hf_python, so `transformers` need
not be installed in the project's environment (benchmark-only requirement):

  python -m venv /tmp/hfref && /tmp/hfref/bin/pip install transformers
  python benchmarks/tokenizer_throughput.py --hf_python=/tmp/hfref/bin/python

Default text: the 1,050 real sentences of tests/fixtures/tokenization/texts.json
(Austen, KJV, Amazon fine-food reviews, Tate titles) repeated to
--num_sentences. Updates its section of benchmarks/RESULTS.md.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "tokenization")
SECTION = "tokenizer_throughput"

# Runs under --hf_python; prints one JSON line of timings.
_HF_SCRIPT = r"""
import json, sys, time
from transformers import BertTokenizerFast, __version__
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
args = json.loads(sys.argv[1])
with open(args["text_file"], encoding="utf-8") as f:
    texts = json.load(f)
batches = [texts[i:i + args["batch_size"]] for i in range(0, len(texts), args["batch_size"])]
import inspect
with open(args["vocab_file"], encoding="utf-8") as f:
    vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
options = dict(do_lower_case=args["lower_case"], tokenize_chinese_chars=True, strip_accents=None)
if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters:
    fast = BertTokenizerFast(vocab=vocab, **options)  # transformers 5 ignores vocab_file
else:
    fast = BertTokenizerFast(vocab_file=args["vocab_file"], **options)
if len(fast.get_vocab()) != len(vocab):
    raise SystemExit(f"BertTokenizerFast loaded {len(fast.get_vocab())} tokens, expected {len(vocab)}")
def run():
    ids = []
    for batch in batches:
        ids.extend(fast(batch, add_special_tokens=False)["input_ids"])
    return ids
def run_raw():
    for batch in batches:
        fast.backend_tokenizer.encode_batch(batch, add_special_tokens=False)
def best_of(fn):
    fn()
    times = []
    for _ in range(args["repeats"]):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
ids = run()
best = best_of(run)
best_raw = best_of(run_raw)
slow = BertTokenizerLegacy(args["vocab_file"], do_lower_case=args["lower_case"])
subset = texts[:args["slow_sentences"]]
t0 = time.perf_counter()
for t in subset:
    slow.convert_tokens_to_ids(slow.tokenize(t))
slow_seconds = time.perf_counter() - t0
print(json.dumps({"version": __version__, "fast_seconds": best, "raw_seconds": best_raw,
                  "slow_seconds": slow_seconds,
                  "slow_sentences": len(subset), "ids": ids}))
"""


def load_texts(args):
    if args.input_file:
        with open(args.input_file, encoding="utf-8") as f:
            base = [line.rstrip("\n") for line in f if line.strip()]
    else:
        with open(os.path.join(FIXTURES, "texts.json"), encoding="utf-8") as f:
            base = [t["text"] for t in json.load(f)["texts"] if t["source"] != "edge_case"]
    if not base:
        raise ValueError(f"No text in {args.input_file}")
    return (base * (args.num_sentences // len(base) + 1))[: args.num_sentences]


def time_ours(texts, args):
    sys.path.insert(0, ROOT)
    import tensorflow as tf

    from bert_tf.tokenization import BertTokenizer

    tokenizer = BertTokenizer(args.vocab_file, lower_case=args.lower_case)
    batches = [tf.constant(texts[i : i + args.batch_size]) for i in range(0, len(texts), args.batch_size)]
    step = tf.function(lambda s: tokenizer(s).flat_values, reduce_retracing=True)

    def loop():
        for b in batches:
            step(b)

    dataset = (
        tf.data.Dataset.from_tensor_slices(texts)
        .batch(args.batch_size)
        .map(lambda s: tokenizer(s).flat_values, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    def pipeline():
        for _ in dataset:
            pass

    results = {}
    for name, fn in (("tf.function", loop), ("tf.data", pipeline)):
        fn()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        results[name] = min(times)
    ids = tokenizer(tf.constant(texts)).to_list()
    return results, ids


def time_hf(texts, args):
    with tempfile.TemporaryDirectory() as tmp:
        text_file = os.path.join(tmp, "texts.json")
        with open(text_file, "w", encoding="utf-8") as f:
            json.dump(texts, f)
        config = dict(
            text_file=text_file,
            vocab_file=args.vocab_file,
            lower_case=args.lower_case,
            batch_size=args.batch_size,
            repeats=args.repeats,
            slow_sentences=args.slow_sentences,
        )
        proc = subprocess.run(
            [args.hf_python, "-c", _HF_SCRIPT, json.dumps(config)],
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"HuggingFace timing failed under {args.hf_python}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab_file", default=os.path.join(FIXTURES, "vocab_uncased.txt"))
    parser.add_argument("--lower_case", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--input_file", default=None, help="one sentence per line")
    parser.add_argument("--num_sentences", type=int, default=21000)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slow_sentences", type=int, default=2000)
    parser.add_argument("--hf_python", default=sys.executable, help="Python with `transformers` installed")
    parser.add_argument("--no-write", dest="write", action="store_false")
    args = parser.parse_args()

    texts = load_texts(args)
    ours, our_ids = time_ours(texts, args)
    hf = time_hf(texts, args)
    same = sum(a == b for a, b in zip(our_ids, hf["ids"]))
    n = len(texts)
    words = sum(len(t.split()) for t in texts)
    rows = [
        ("bert_tf BertTokenizer, tf.function per batch", n / ours["tf.function"]),
        ("bert_tf BertTokenizer, tf.data map (AUTOTUNE)", n / ours["tf.data"]),
        (f"HuggingFace BertTokenizerFast (Rust), transformers {hf['version']}", n / hf["fast_seconds"]),
        ("HuggingFace `tokenizers` encode_batch directly (no BatchEncoding)", n / hf["raw_seconds"]),
        ("HuggingFace slow BertTokenizer (Python reference)", hf["slow_sentences"] / hf["slow_seconds"]),
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    command = "python benchmarks/tokenizer_throughput.py " + " ".join(sys.argv[1:])
    lines = [
        f"{datetime.date.today().isoformat()}, {os.cpu_count()}-core CPU ({_common.cpu_name()}), "
        f"1-min load average {load:.1f} at the end, {_common.gpu_note()}, commit {_common.git_commit()}. "
        f"Command: `{command}`",
        "",
        f"{n} sentences ({words} whitespace words, {n / max(1, len(set(texts))):.0f}x repeats of "
        f"real sentences), vocabulary `{os.path.relpath(args.vocab_file, ROOT)}`, "
        f"lower_case={args.lower_case}, batch size {args.batch_size}, best of {args.repeats} "
        "passes after a warm-up.",
        "",
        "| tokenizer | sentences/s |",
        "| --- | ---: |",
    ]
    lines += [f"| {name} | {rate:,.0f} |" for name, rate in rows]
    lines += [
        "",
        f"Identical ids, ours vs BertTokenizerFast, on these sentences: {same}/{n}. "
        "(BertTokenizerFast is not the parity reference: the tests compare with the slow one.)",
    ]
    print("\n".join(lines))
    if args.write:
        _common.write_section(SECTION, "Tokenizer throughput", lines)


if __name__ == "__main__":
    main()
