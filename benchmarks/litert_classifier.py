r"""The LiteRT classifier (raw text in, tokenizer inside) against the float32 SavedModel classifier.

    python -m experiments.demo --output_dir=runs/demo     # once: the fine-tuned all-MiniLM-L6-v2
    python benchmarks/litert_classifier.py --model_dir=runs/demo/classifier_real_weights/model \
        --test_file=data/fine_foods_test.tsv --train_file=data/fine_foods_train.tsv

For a fine-tuned classification directory, in one run: the servable SavedModel classifier
(`bert_tf.export.classifier_module`, what `experiments.export` writes as `classifier/`) and the LiteRT classifier
in each of --forms (`bert_tf.export.litert`, what `experiments.export --litert=FORM` writes; full_int8 calibrated
on --calibration_examples texts of --train_file), written to --work_dir (a temporary directory by default). Then:

- size: the .tflite file, and the SavedModel directory;
- accuracy on --test_file (the labels of its recorded label column), the largest |score difference| from the
  SavedModel's and how many labels agree with it, and how many packed token-id rows equal the in-graph
  preprocessor's;
- single-text latency: each contender called with one text at a time on --latency_texts texts of --test_file,
  the median call in milliseconds; once in a process with one thread and once in one with every core
  (TensorFlow fixes its threads at start-up, so each setting is a fresh process). Within a process the
  contenders take turns text by text for --rounds rounds (A B C A B C ...), so a change in the machine's load
  falls on all of them alike.

The table goes to stdout and, unless --no-write, into the `litert_classifier` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _common

SCRIPT = os.path.abspath(__file__)
SECTION = "litert_classifier"
SAVED_MODEL = "SavedModel float32"
FORMS = ("float32", "dynamic_int8", "full_int8")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="A fine-tuned classification (or student) directory.")
    parser.add_argument("--test_file", default=os.path.join(_common.ROOT, "data", "fine_foods_test.tsv"))
    parser.add_argument("--train_file", default=os.path.join(_common.ROOT, "data", "fine_foods_train.tsv"))
    parser.add_argument("--calibration_examples", type=int, default=200)
    parser.add_argument("--forms", default=",".join(FORMS), help=f"Comma-separated, of {', '.join(FORMS)}.")
    parser.add_argument("--latency_texts", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work_dir", default=None, help="Where the exports go (default: a temporary directory).")
    parser.add_argument("--timeout", type=int, default=3600, help="Seconds a latency process may run.")
    parser.add_argument("--no-write", dest="write", action="store_false", help="Do not update RESULTS.md.")
    parser.add_argument("--child_threads", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    unknown = [f for f in forms if f not in FORMS]
    if unknown or not forms:
        parser.error(f"--forms: {unknown or 'none'} not among {', '.join(FORMS)}")
    for name in ("calibration_examples", "latency_texts", "rounds", "timeout"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("test_file", "train_file"):
        if not os.path.isfile(getattr(args, name)):
            parser.error(f"--{name}: file not found: {getattr(args, name)}")
    if not os.path.isfile(os.path.join(args.model_dir, "task_config.json")):
        parser.error(f"--model_dir: {args.model_dir} has no task_config.json (not a fine-tuned directory)")
    args.forms = forms
    return args


def read_examples(task_config: dict, path: str, phase: str) -> list:
    """The `TextExample`s of `path`, read with the columns fine-tuning recorded."""
    from bert_tf.data.finetuning_data import TextExamplesReader
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig

    settings = ("text_a_column", "text_b_column", "label_column", "file_format", "has_header")
    recorded = {k: v for k, v in (task_config.get("data") or {}).items() if k in settings}
    pairs = bool(task_config.get("sentence_pair"))
    regression = task_config["task"] == "regression"
    reader = TextExamplesReader(task_config["task"], FinetuningDataConfig(**recorded), pairs, regression)
    return reader.read(phase, path)


def export_all(args, task_config: dict, work_dir: str) -> dict:
    """Writes the SavedModel classifier and each LiteRT form; returns {contender: path}."""
    from bert_tf.checkpoints.model_dir import load_task_model
    from bert_tf.export import litert
    from bert_tf.export.classifier_module import ClassifierModule
    from bert_tf.models import BertClassifier
    from bert_tf.tokenization import BertPreprocessor

    labels = task_config.get("label_list")
    classifier = load_task_model(args.model_dir, lambda e: BertClassifier(e, num_classes=len(labels or [0])))
    vocab_file = os.path.join(args.model_dir, "vocab.txt")
    lower_case = task_config.get("do_lower_case", True)
    seq_length = int(task_config["max_seq_length"])
    preprocessor = BertPreprocessor(vocab_file, lower_case=lower_case, default_seq_length=seq_length)
    paths = {SAVED_MODEL: os.path.join(work_dir, "classifier")}
    module = ClassifierModule(classifier, preprocessor, labels, seq_length, bool(task_config.get("sentence_pair")))
    module.save(paths[SAVED_MODEL])
    for form in args.forms:
        texts = ()
        if form == "full_int8":
            texts = litert.calibration_texts(task_config, args.train_file, args.calibration_examples)
        path = os.path.join(work_dir, f"litert_{form}")
        litert.export_litert(classifier, task_config, vocab_file, lower_case, path, litert.LiteRTConfig(form, texts))
        paths[f"LiteRT {form}"] = os.path.join(path, litert.MODEL_NAME)
    return paths


def _callers(paths: dict, pair: bool) -> dict:
    """{contender: f(texts, text_b) -> numpy outputs} for a batch of texts."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    from bert_tf.export import litert

    callers = {}
    signature = tf.saved_model.load(paths[SAVED_MODEL]).signatures["serving_default"]

    def saved_model(texts, text_b):
        inputs = {"text": tf.constant(texts)} | ({"text_b": tf.constant(text_b)} if pair else {})
        return {name: value.numpy() for name, value in signature(**inputs).items()}

    callers[SAVED_MODEL] = saved_model
    for name, path in paths.items():
        if name == SAVED_MODEL:
            continue
        runner = litert.interpreter(path, num_threads=_threads()).get_signature_runner("serving_default")

        def call(texts, text_b, runner=runner):
            inputs = {"text": np.array(texts, object)} | ({"text_b": np.array(text_b, object)} if pair else {})
            return runner(**inputs)

        callers[name] = call
    return callers


def _threads():
    return int(os.environ.get("LITERT_BENCH_THREADS", "0")) or None


def quality(paths: dict, task_config: dict, examples: list, seq_length: int, vocab_file: str) -> dict:
    """{contender: accuracy (or None for regression), max |score diff| from the SavedModel, labels agreeing, ids}."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.tokenization import BertPreprocessor

    pair = bool(task_config.get("sentence_pair"))
    texts = [e.text_a for e in examples]
    text_b = [e.text_b for e in examples] if pair else None
    outputs = {}
    for name, call in _callers(paths, pair).items():
        batches = [call(texts[i : i + 32], text_b[i : i + 32] if pair else None) for i in range(0, len(texts), 32)]
        kept = [k for k in batches[0] if k in ("scores", "label_id", "input_word_ids")]
        outputs[name] = {k: np.concatenate([b[k] for b in batches]) for k in kept}
    lower_case = task_config.get("do_lower_case", True)
    preprocessor = BertPreprocessor(vocab_file, lower_case=lower_case, default_seq_length=seq_length)

    segments = [preprocessor.tokenize(tf.constant(t)) for t in ([texts, text_b] if pair else [texts])]
    expected_ids = preprocessor.bert_pack_inputs(segments)["input_word_ids"].numpy()
    labels = task_config.get("label_list")
    reference = outputs[SAVED_MODEL]
    rows = {}
    for name, out in outputs.items():
        row = {"max_diff": float(np.max(np.abs(out["scores"] - reference["scores"])))}
        if labels:
            truth = np.array([labels.index(str(e.label)) for e in examples])
            row["accuracy"] = float(np.mean(out["label_id"] == truth))
            row["agree"] = int(np.sum(out["label_id"] == reference["label_id"]))
        if "input_word_ids" in out:
            row["ids_equal"] = int(np.sum(np.all(out["input_word_ids"] == expected_ids, axis=1)))
        rows[name] = row
    return rows


def child_latency(args) -> None:
    """One process at `--child_threads`: every contender, text by text in turns; prints JSON {name: [ms]}."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.child_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.child_threads)
    with open(os.path.join(args.work_dir, "latency_input.json"), encoding="utf-8") as f:
        spec = json.load(f)
    callers = _callers(spec["paths"], spec["pair"])
    texts, text_b = spec["texts"], spec["text_b"]
    times = {name: [] for name in callers}
    for name, call in callers.items():  # untimed: the first call of each prepares it
        call(texts[:1], text_b[:1] if text_b else None)
    for _ in range(args.rounds):
        for i, text in enumerate(texts):
            for name, call in callers.items():
                start = time.perf_counter()
                call([text], [text_b[i]] if text_b else None)
                times[name].append((time.perf_counter() - start) * 1000)
    print("RESULT " + json.dumps(times))


def latency(args, paths, examples, pair, work_dir) -> dict:
    """{threads label: {contender: median ms}} from one fresh process per thread setting."""
    spec = {
        "paths": paths,
        "pair": pair,
        "texts": [e.text_a for e in examples[: args.latency_texts]],
        "text_b": [e.text_b for e in examples[: args.latency_texts]] if pair else None,
    }
    with open(os.path.join(work_dir, "latency_input.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f)
    results = {}
    for label, threads in (("1 thread", 1), (f"{os.cpu_count()} cores", os.cpu_count())):
        env = dict(
            os.environ,
            TF_NUM_INTRAOP_THREADS=str(threads),
            TF_NUM_INTEROP_THREADS=str(threads),
            LITERT_BENCH_THREADS=str(threads),
            TF_CPP_MIN_LOG_LEVEL="2",
        )
        argv = [f"--model_dir={args.model_dir}", f"--work_dir={work_dir}", f"--rounds={args.rounds}"]
        argv += [f"--test_file={args.test_file}", f"--train_file={args.train_file}", f"--child_threads={threads}"]
        times = _common.run_child(sys.executable, SCRIPT, argv, env=env, timeout=args.timeout)
        if "error" in times:
            raise SystemExit(f"litert_classifier: the {label} latency process failed:\n{times['error']}")
        results[label] = {name: statistics.median(values) for name, values in times.items()}
    return results


def _size_mb(path: str) -> float:
    if os.path.isfile(path):
        return os.path.getsize(path) / 1e6
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files) / 1e6


def table(paths, rows, latencies, num_examples) -> list:
    settings = list(latencies)
    headers = ["size MB", "accuracy", "max Δscore vs SavedModel", "labels = SavedModel's", "ids = preprocessor's"]
    headers += [f"ms/text, {s}" for s in settings] + [f"vs SavedModel, {s}" for s in settings]
    columns = [("contender", "<")] + [(header, ">") for header in headers]
    body = []
    for name, path in paths.items():
        row = rows[name]
        cells = [name, f"{_size_mb(path):.1f}", f"{row['accuracy']:.4f}" if "accuracy" in row else "-"]
        cells += [f"{row['max_diff']:.1e}", f"{row.get('agree', '-')}/{num_examples}"]
        cells += [f"{row['ids_equal']}/{num_examples}" if "ids_equal" in row else "-"]
        cells += [f"{latencies[s][name]:.2f}" for s in settings]
        cells += [f"{latencies[s][SAVED_MODEL] / latencies[s][name]:.2f}x" for s in settings]
        body.append(cells)
    return _common.table_lines(columns, body)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child_threads:
        child_latency(args)
        return
    from bert_tf.checkpoints.model_source import read_task_config

    task_config = read_task_config(args.model_dir)
    load_before = _common.load_average()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="litert_bench_")
    os.makedirs(work_dir, exist_ok=True)
    paths = export_all(args, task_config, work_dir)
    examples = read_examples(task_config, args.test_file, "eval")
    seq_length = int(task_config["max_seq_length"])
    rows = quality(paths, task_config, examples, seq_length, os.path.join(args.model_dir, "vocab.txt"))
    latencies = latency(args, paths, examples, bool(task_config.get("sentence_pair")), work_dir)
    import ai_edge_litert
    import tensorflow as tf

    command = "python benchmarks/litert_classifier.py " + " ".join(argv if argv is not None else sys.argv[1:])
    versions = {"tensorflow": tf.__version__, "ai-edge-litert": getattr(ai_edge_litert, "__version__", "?")}
    lines = _common.header_lines(command, load_before, _common.load_average(), versions)
    lines += [
        f"- Model: {args.model_dir} ({task_config['task']}, length {seq_length}); test: {args.test_file} "
        f"({len(examples)} examples); latency: {args.latency_texts} texts x {args.rounds} rounds, one text a call",
        "",
    ]
    lines += table(paths, rows, latencies, len(examples))
    _common.publish(SECTION, "LiteRT classifier (raw text in) against the SavedModel classifier", lines, args.write)


if __name__ == "__main__":
    main()
