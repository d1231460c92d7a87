"""Every command-line tool against one shared set of bad inputs.

Each row runs a tool's `main` in this process (flags parsed as absl would; a
subprocess would pay a TensorFlow import per row) and expects: exit status 2,
stderr (all of it, captured at the file-descriptor level) exactly one line
`<tool>: error: ...` naming the file, line or flag (no log line, warning or
traceback before or after it), and every file that existed before under the tool's output
path byte-identical afterwards (the tools write to temporary names and
rename, and check before they write).

Rows that do not apply to a tool are left out: `inspect_tfrecords` reads an
empty file as an empty shard (0 records, not an error), `demo` reads no input
file, and only `convert`/`export`/`pretrain`/`finetune`/`probe_layers` refuse an existing
output (the others replace their output file atomically, as the originals do).
"""

import importlib
import json
import os
import pathlib
import shutil

import pytest

from tests.fixtures.finetune import synthetic
from tests.helpers import training_data
from tests.helpers.absl_flags import run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY_HF = ROOT / "tests" / "fixtures" / "convert" / "tiny_bert_for_pretraining"

MODULES = {
    "create_pretraining_data": "tfrecords_tools.create_pretraining_data",
    "make_vocab": "tfrecords_tools.make_vocab",
    "inspect_tfrecords": "tfrecords_tools.inspect_tfrecords",
    "pretrain": "experiments.pretrain",
    "finetune": "experiments.finetune",
    "extract_features": "experiments.extract_features",
    "probe_layers": "experiments.probe_layers",
    "export": "experiments.export",
    "convert": "experiments.convert",
    "classify_with_hub": "experiments.classify_with_hub",
    "demo": "experiments.demo",
}


def _write_vocab(path, tokens):
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The shared bad inputs, and the good inputs each row combines them with."""
    root = tmp_path_factory.mktemp("bad_input")
    f = {"root": root}
    f["missing"] = str(root / "missing.txt")
    (root / "empty.txt").write_bytes(b"")
    f["empty"] = str(root / "empty.txt")
    # Not UTF-8 from the first byte, with a NUL and no newline structure: what `cat /bin/ls` gives.
    (root / "garbage.bin").write_bytes(bytes(range(255, -1, -1)) * 8)
    f["garbage"] = str(root / "garbage.bin")
    (root / "latin1.txt").write_bytes(b"A first line.\nA second one.\nCaf\xe9 au lait.\n")
    f["latin1"] = str(root / "latin1.txt")
    f["corpus"] = str(training_data.SAMPLE_TEXT)

    # Pretraining data, and the same file cut in the middle of a later record.
    records = training_data.write_pretraining_records(root / "records")
    f["records"], f["vocab"] = records["train"], records["vocab"]
    data = pathlib.Path(f["records"]).read_bytes()
    (root / "truncated.tfrecord").write_bytes(data[: len(data) * 2 // 3])
    f["truncated"] = str(root / "truncated.tfrecord")
    vocab = pathlib.Path(f["vocab"]).read_text(encoding="utf-8").split("\n")[:-1]
    no_special = [t if not t.startswith("[") else f"x{i}" for i, t in enumerate(vocab)]
    f["vocab_no_special"] = _write_vocab(root / "vocab_no_special.txt", no_special)
    (root / "vocab_latin1.txt").write_bytes(pathlib.Path(f["vocab"]).read_bytes().replace(b"\nthe\n", b"\nth\xe9\n"))
    f["vocab_latin1"] = str(root / "vocab_latin1.txt")
    line = vocab.index("the") + 1
    f["vocab_latin1_line"] = f"vocab_latin1.txt:{line}"

    config = dict(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    (root / "bert_config.json").write_text(json.dumps(config))
    f["bert_config"] = str(root / "bert_config.json")
    (root / "bad_heads.json").write_text(json.dumps(dict(config, num_attention_heads=5)))
    f["bad_heads"] = str(root / "bad_heads.json")
    (root / "other_config.json").write_text(json.dumps(dict(config, num_hidden_layers=2)))
    f["other_config"] = str(root / "other_config.json")

    # A tiny fine-tuning model directory, its data, and a vocabulary of its size without specials.
    (root / "model").mkdir()
    f["model_dir"] = synthetic.make_model_dir(str(root / "model" / "model_dir"))
    f["train_tsv"] = synthetic.write_tsv(str(root / "train.tsv"), ["text_a", "label"], synthetic.sentiment_rows(8, 1))
    f["ft_vocab_no_special"] = _write_vocab(
        root / "ft_vocab_no_special.txt", [f"x{i}" if t.startswith("[") else t for i, t in enumerate(synthetic.VOCAB)]
    )
    with open(os.path.join(f["model_dir"], "bert_config.json")) as src:
        model_config = json.load(src)
    (root / "ft_bad_heads.json").write_text(json.dumps(dict(model_config, num_attention_heads=5)))
    f["ft_bad_heads"] = str(root / "ft_bad_heads.json")

    # HF source directories for convert: one whose vocabulary is not UTF-8, one with an impossible config.
    for name in ("hf_latin1", "hf_bad_heads"):
        shutil.copytree(TINY_HF, root / name)
    vocab_path = root / "hf_latin1" / "vocab.txt"
    vocab_path.write_bytes(vocab_path.read_bytes().replace(b"[MASK]\n", b"[MASK]\n\xff", 1))
    hf_config = json.loads((root / "hf_bad_heads" / "config.json").read_text())
    hf_config["num_attention_heads"] = hf_config["hidden_size"] + 1
    (root / "hf_bad_heads" / "config.json").write_text(json.dumps(hf_config))
    f["hf"] = str(TINY_HF)

    # probe_layers' token (word<TAB>tag) and sentence (text<TAB>label) files, good and malformed.
    (root / "probe_tokens.conll").write_text("alice\tX\nsaw\tV\n\nbob\tX\nwalked\tV\n", encoding="utf-8")
    f["probe_tokens"] = str(root / "probe_tokens.conll")
    (root / "probe_no_tab.conll").write_text("alice\tX\nsaw V\n", encoding="utf-8")
    f["probe_no_tab"] = str(root / "probe_no_tab.conll")
    rows = [(text, label) for text, label in synthetic.sentiment_rows(8, 1)]
    f["probe_sentences"] = synthetic.write_tsv(str(root / "probe_sentences.tsv"), ["text", "label"], rows)
    f["probe_no_label"] = synthetic.write_tsv(str(root / "probe_no_label.tsv"), ["text", "polarity"], rows)

    # An export directory as classify_with_hub checks it (only the two SavedModel folders' presence).
    for name in ("encoder", "preprocess"):
        (root / "export" / name).mkdir(parents=True)
    f["export"] = str(root / "export")
    (root / "earlier_task_model").mkdir()
    (root / "earlier_task_model" / "bert_config.json").write_text("{}\n", encoding="utf-8")
    f["earlier_task_model"] = str(root / "earlier_task_model")
    return f


def _snapshot(path):
    """{relative path: bytes} of every file under `path` (or of `path` itself)."""
    path = pathlib.Path(path)
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _existing_output(root, row_id, kind):
    """An output as an earlier run left it: a file, or a directory holding one."""
    path = root / "outputs" / row_id
    if kind == "file":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"an earlier run's output\n")
    else:
        path.mkdir(parents=True)
        (path / "earlier.txt").write_bytes(b"an earlier run's output\n")
    return str(path)


def _finetuned_output(root, row_id, files):
    """An output directory holding a fine-tuned run (checkpoint, config, task config) of a smaller model."""
    import tensorflow as tf

    path = root / "outputs" / row_id
    path.mkdir(parents=True)
    tf.train.CheckpointManager(tf.train.Checkpoint(step=tf.Variable(4)), str(path), 1).save(checkpoint_number=4)
    with open(os.path.join(files["model_dir"], "bert_config.json")) as f:
        config = json.load(f)
    (path / "bert_config.json").write_text(json.dumps(dict(config, num_hidden_layers=1)))
    shutil.copy(os.path.join(files["model_dir"], "vocab.txt"), path / "vocab.txt")
    (path / "task_config.json").write_text(json.dumps({"task": "classification", "label_list": ["neg", "pos"]}))
    return str(path)


# (tool, case, argv builder(files, out) -> flags, expected text in the error line (formatted with files),
#  output kind: "file", "dir", "finetuned" or None).
ROWS = [
    # make_vocab
    (
        "make_vocab",
        "missing_file",
        lambda f, o: [f"--input_file={f['missing']}", f"--output_file={o}"],
        "missing.txt",
        "file",
    ),
    (
        "make_vocab",
        "empty_file",
        lambda f, o: [f"--input_file={f['empty']}", f"--output_file={o}"],
        "empty.txt",
        "file",
    ),
    (
        "make_vocab",
        "binary_garbage",
        lambda f, o: [f"--input_file={f['garbage']}", f"--output_file={o}"],
        "garbage.bin:1",
        "file",
    ),
    (
        "make_vocab",
        "non_utf8_line",
        lambda f, o: [f"--input_file={f['latin1']}", f"--output_file={o}"],
        "latin1.txt:3",
        "file",
    ),
    (
        "make_vocab",
        "impossible_config",
        lambda f, o: [f"--input_file={f['corpus']}", f"--output_file={o}", "--vocab_size=5"],
        "--vocab_size",
        "file",
    ),
    (
        "make_vocab",
        "alphabet_too_big",
        lambda f, o: [f"--input_file={f['corpus']}", f"--output_file={o}", "--vocab_size=20", "--min_count=1"],
        "--vocab_size",
        "file",
    ),
    # create_pretraining_data
    *[
        (
            "create_pretraining_data",
            case,
            (
                lambda key, vocab: (
                    lambda f, o: [
                        f"--input_file={f[key]}",
                        f"--vocab_file={f[vocab]}",
                        f"--output_file={o}",
                        "--max_seq_length=32",
                        "--max_predictions_per_seq=5",
                        "--num_workers=1",
                    ]
                )
            )(key, vocab),
            expected,
            "file",
        )
        for case, key, vocab, expected in [
            ("missing_file", "missing", "vocab", "missing.txt"),
            ("empty_file", "empty", "vocab", "empty.txt"),
            ("binary_garbage", "garbage", "vocab", "garbage.bin"),
            ("non_utf8_line", "latin1", "vocab", "latin1.txt:3"),
            ("vocab_without_special_tokens", "corpus", "vocab_no_special", "vocab_no_special.txt"),
            ("non_utf8_vocab", "corpus", "vocab_latin1", "vocab_latin1.txt"),
        ]
    ],
    (
        "create_pretraining_data",
        "impossible_config",
        lambda f, o: [
            f"--input_file={f['corpus']}",
            f"--vocab_file={f['vocab']}",
            f"--output_file={o}",
            "--max_seq_length=4",
        ],
        "--max_seq_length",
        "file",
    ),
    # inspect_tfrecords (writes nothing)
    *[
        ("inspect_tfrecords", case, (lambda key: lambda f, o: [f"--input_file={f[key]}"])(key), expected, None)
        for case, key, expected in [
            ("missing_file", "missing", "missing.txt"),
            ("binary_garbage", "garbage", "garbage.bin"),
            ("not_tf_examples", "latin1", "latin1.txt"),
            ("truncated_tfrecord", "truncated", "truncated.tfrecord"),
        ]
    ],
    (
        "inspect_tfrecords",
        "non_utf8_vocab",
        lambda f, o: [f"--input_file={f['records']}", f"--vocab_file={f['vocab_latin1']}"],
        "{vocab_latin1_line}",
        None,
    ),
    # pretrain
    *[
        (
            "pretrain",
            case,
            (
                lambda extra: (
                    lambda f, o: [
                        f"--output_dir={o}",
                        "--max_seq_length=32",
                        "--max_predictions_per_seq=5",
                        "--train_batch_size=2",
                        "--num_train_steps=2",
                        "--num_warmup_steps=0",
                        "--steps_per_loop=1",
                        "--shuffle_buffer_size=4",
                        *[a.format(**f) for a in extra],
                    ]
                )
            )(extra),
            expected,
            kind,
        )
        for case, extra, expected, kind in [
            ("missing_file", ["--input_file={missing}", "--bert_config_file={bert_config}"], "missing.txt", "dir"),
            ("empty_file", ["--input_file={empty}", "--bert_config_file={bert_config}"], "empty.txt", "dir"),
            ("binary_garbage", ["--input_file={garbage}", "--bert_config_file={bert_config}"], "garbage.bin", "dir"),
            # A shuffle buffer over the whole file reads past the damage at the first step.
            (
                "truncated_tfrecord",
                ["--input_file={truncated}", "--bert_config_file={bert_config}", "--shuffle_buffer_size=100000"],
                "truncated.tfrecord",
                "dir",
            ),
            (
                "non_utf8_vocab",
                ["--input_file={records}", "--bert_config_file={bert_config}", "--vocab_file={vocab_latin1}"],
                "{vocab_latin1_line}",
                "dir",
            ),
            (
                "vocab_without_special_tokens",
                ["--input_file={records}", "--bert_config_file={bert_config}", "--vocab_file={vocab_no_special}"],
                "vocab_no_special.txt",
                "dir",
            ),
            (
                "negative_preemption_grace",
                ["--input_file={records}", "--bert_config_file={bert_config}", "--preemption_grace_seconds=-5"],
                "--preemption_grace_seconds",
                "dir",
            ),
            (
                "heads_do_not_divide_hidden",
                ["--input_file={records}", "--bert_config_file={bad_heads}"],
                "--bert_config_file",
                "dir",
            ),
            (
                "seq_length_above_positions",
                ["--input_file={records}", "--bert_config_file={bert_config}", "--max_seq_length=128"],
                "--max_seq_length",
                "dir",
            ),
            (
                "microbatches_do_not_divide_the_batch",
                ["--input_file={records}", "--bert_config_file={bert_config}", "--num_microbatches=3"],
                "--num_microbatches=3 must divide",
                "dir",
            ),
        ]
    ],
    (
        "pretrain",
        "output_of_another_model",
        lambda f, o: [
            f"--output_dir={o}",
            f"--input_file={f['records']}",
            f"--bert_config_file={f['bert_config']}",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--num_warmup_steps=0",
        ],
        "--output_dir",
        "other_model",
    ),
    # finetune
    *[
        (
            "finetune",
            case,
            (
                lambda extra: (
                    lambda f, o: [
                        "--task=classification",
                        f"--output_dir={o}",
                        "--do_train",
                        "--max_seq_length=16",
                        "--num_train_steps=1",
                        *[a.format(**f) for a in extra],
                    ]
                )
            )(extra),
            expected,
            kind,
        )
        for case, extra, expected, kind in [
            ("missing_file", ["--train_file={missing}", "--model_dir={model_dir}"], "missing.txt", "dir"),
            ("empty_file", ["--train_file={empty}", "--model_dir={model_dir}"], "empty.txt", "dir"),
            (
                "negative_bucket_width",
                ["--train_file={train_tsv}", "--model_dir={model_dir}", "--bucket_width=-1"],
                "--bucket_width",
                "dir",
            ),
            (
                "packing_with_group_by_length",
                ["--train_file={train_tsv}", "--model_dir={model_dir}", "--packing", "--group_by_length"],
                "--packing",
                "dir",
            ),
            (
                "packing_with_microbatches",
                ["--train_file={train_tsv}", "--model_dir={model_dir}", "--packing", "--num_microbatches=2"],
                "--packing",
                "dir",
            ),
            (
                "binary_garbage",
                ["--train_file={garbage}", "--file_format=tsv", "--model_dir={model_dir}"],
                "garbage.bin",
                "dir",
            ),
            (
                "non_utf8_line",
                ["--train_file={latin1}", "--file_format=tsv", "--has_header=false", "--model_dir={model_dir}"],
                "latin1.txt:3",
                "dir",
            ),
            (
                "vocab_without_special_tokens",
                ["--train_file={train_tsv}", "--model_dir={model_dir}", "--vocab_file={ft_vocab_no_special}"],
                "ft_vocab_no_special.txt",
                "dir",
            ),
            (
                "vocab_size_differs",
                ["--train_file={train_tsv}", "--model_dir={model_dir}", "--vocab_file={vocab}"],
                "vocab_size",
                "dir",
            ),
            (
                "heads_do_not_divide_hidden",
                ["--train_file={train_tsv}", "--model_dir={model_dir}", "--bert_config_file={ft_bad_heads}"],
                "ft_bad_heads.json",
                "dir",
            ),
            (
                "seq_length_above_positions",
                ["--train_file={train_tsv}", "--model_dir={model_dir}", "--max_seq_length=128"],
                "--max_seq_length",
                "dir",
            ),
            (
                "output_of_another_model",
                ["--train_file={train_tsv}", "--model_dir={model_dir}"],
                "--output_dir",
                "finetuned",
            ),
        ]
    ],
    # extract_features
    *[
        (
            "extract_features",
            case,
            (
                lambda extra: (
                    lambda f, o: [
                        f"--output_file={o}.npy",
                        "--max_seq_length=16",
                        "--layers=-1",
                        *[a.format(**f) for a in extra],
                    ]
                )
            )(extra),
            expected,
            "npy",
        )
        for case, extra, expected in [
            ("missing_file", ["--input_file={missing}", "--model_dir={model_dir}"], "missing.txt"),
            ("empty_file", ["--input_file={empty}", "--model_dir={model_dir}"], "empty.txt"),
            ("binary_garbage", ["--input_file={garbage}", "--model_dir={model_dir}"], "garbage.bin"),
            ("non_utf8_line", ["--input_file={latin1}", "--model_dir={model_dir}"], "latin1.txt:3"),
            (
                "vocab_without_special_tokens",
                ["--input_file={corpus}", "--model_dir={model_dir}", "--vocab_file={ft_vocab_no_special}"],
                "ft_vocab_no_special.txt",
            ),
            (
                "non_utf8_vocab",
                ["--input_file={corpus}", "--model_dir={model_dir}", "--vocab_file={vocab_latin1}"],
                "vocab_latin1.txt",
            ),
            (
                "heads_do_not_divide_hidden",
                ["--input_file={corpus}", "--model_dir={model_dir}", "--bert_config_file={ft_bad_heads}"],
                "ft_bad_heads.json",
            ),
            (
                "seq_length_above_positions",
                ["--input_file={corpus}", "--model_dir={model_dir}", "--max_seq_length=128"],
                "max_seq_length",
            ),
        ]
    ],
    # probe_layers
    *[
        (
            "probe_layers",
            case,
            (
                lambda extra: (
                    lambda f, o: [
                        f"--output_dir={o}",
                        "--max_seq_length=16",
                        "--nofinetune",
                        *[
                            a.format(**f)
                            for a in [
                                "--model_dir={model_dir}",
                                "--token_train_file={probe_tokens}",
                                "--token_test_file={probe_tokens}",
                                "--sentence_train_file={probe_sentences}",
                                "--sentence_test_file={probe_sentences}",
                                *extra,
                            ]
                        ],
                    ]
                )
            )(extra),
            expected,
            kind,
        )
        for case, extra, expected, kind in [
            ("missing_file", ["--token_train_file={missing}"], "--token_train_file: file not found: {missing}", None),
            ("empty_file", ["--token_test_file={empty}"], "empty.txt: no sentences", None),
            ("binary_garbage", ["--sentence_train_file={garbage}"], "garbage.bin:1: not valid UTF-8", None),
            ("non_utf8_line", ["--token_train_file={latin1}"], "latin1.txt:3: not valid UTF-8", None),
            ("token_line_without_tab", ["--token_train_file={probe_no_tab}"], "probe_no_tab.conll:2", None),
            ("sentence_file_without_label", ["--sentence_test_file={probe_no_label}"], "no label column", None),
            ("missing_model", ["--model_dir={missing}"], "missing.txt", None),
            ("unknown_task", ["--tasks=token,parsing"], "--tasks", None),
            ("impossible_dev_fraction", ["--dev_fraction=0.9"], "--dev_fraction", None),
            ("microbatches_do_not_divide_the_batch", ["--finetune_microbatches=5"], "--finetune_microbatches=5", None),
            ("seq_length_above_positions", ["--max_seq_length=128"], "max_position_embeddings", None),
            ("output_exists", [], "--output_dir", "dir"),
        ]
    ],
    # export
    *[
        (
            "export",
            case,
            (
                lambda extra: (
                    lambda f, o: [
                        f"--export_dir={o}",
                        "--max_seq_length=16",
                        "--noverify",
                        *[a.format(**f) for a in extra],
                    ]
                )
            )(extra),
            expected,
            kind,
        )
        for case, extra, expected, kind in [
            ("missing_file", ["--model_dir={missing}"], "missing.txt", "dir"),
            (
                "vocab_without_special_tokens",
                ["--model_dir={model_dir}", "--vocab_file={ft_vocab_no_special}"],
                "ft_vocab_no_special.txt",
                None,
            ),
            ("non_utf8_vocab", ["--model_dir={model_dir}", "--vocab_file={vocab_latin1}"], "vocab_latin1.txt", None),
            ("empty_vocab", ["--model_dir={model_dir}", "--vocab_file={empty}"], "empty.txt", None),
            (
                "heads_do_not_divide_hidden",
                ["--model_dir={model_dir}", "--bert_config_file={ft_bad_heads}"],
                "ft_bad_heads.json",
                None,
            ),
            ("seq_length_above_positions", ["--model_dir={model_dir}", "--max_seq_length=100"], "max_seq_length", None),
            ("output_exists", ["--model_dir={model_dir}"], "already exists", "dir"),
        ]
    ],
    # convert
    *[
        (
            "convert",
            case,
            (lambda extra: lambda f, o: [f"--output_dir={o}", *[a.format(**f) for a in extra]])(extra),
            expected,
            kind,
        )
        for case, extra, expected, kind in [
            ("missing_file", ["--from=hf", "--input={missing}"], "missing.txt", None),
            (
                "binary_garbage",
                ["--from=tf1", "--input={garbage}", "--bert_config_file={bert_config}", "--vocab_file={vocab}"],
                "garbage.bin",
                None,
            ),
            ("non_utf8_vocab", ["--from=hf", "--input={root}/hf_latin1"], "hf_latin1/vocab.txt:6", None),
            ("empty_vocab", ["--from=hf", "--input={hf}", "--vocab_file={empty}"], "empty.txt", None),
            ("heads_do_not_divide_hidden", ["--from=hf", "--input={root}/hf_bad_heads"], "hf_bad_heads", None),
            ("output_exists", ["--from=hf", "--input={hf}"], "not empty", "dir"),
        ]
    ],
    # classify_with_hub
    *[
        (
            "classify_with_hub",
            case,
            (
                lambda extra: (
                    lambda f, o: [f"--output_dir={o}", f"--eval_file={f['train_tsv']}", *[a.format(**f) for a in extra]]
                )
            )(extra),
            expected,
            "dir",
        )
        for case, extra, expected in [
            ("missing_file", ["--export_dir={export}", "--train_file={missing}"], "missing.txt"),
            ("empty_file", ["--export_dir={export}", "--train_file={empty}"], "empty.txt"),
            ("binary_garbage", ["--export_dir={export}", "--train_file={garbage}"], "garbage.bin:1"),
            ("non_utf8_line", ["--export_dir={export}", "--train_file={latin1}"], "latin1.txt:3"),
            ("missing_export", ["--export_dir={missing}", "--train_file={train_tsv}"], "--export_dir"),
            (
                "negative_bucket_width",
                ["--export_dir={export}", "--train_file={train_tsv}", "--bucket_width=-1"],
                "--bucket_width",
            ),
            (
                "task_model_dir_exists",
                ["--export_dir={export}", "--train_file={train_tsv}", "--task_model_dir={earlier_task_model}"],
                "--task_model_dir",
            ),
        ]
    ],
    # demo
    ("demo", "impossible_config", lambda f, o: [f"--output_dir={o}", "--hidden_size=100"], "--hidden_size", "dir"),
    ("demo", "unknown_tour", lambda f, o: [f"--output_dir={o}", "--tours=probes,distill"], "--tours", "dir"),
]


# Rows whose bad input is only met once training has started: the run's own files may be new, the
# earlier ones stay as they were.
STOPS_DURING_TRAINING = {"pretrain-truncated_tfrecord"}


def _run(tool, argv):
    """Runs `tool`'s main as its console script would; returns the exit status."""
    return run_main(importlib.import_module(MODULES[tool]), argv, program=tool)


@pytest.fixture(autouse=True)
def _legacy_keras_stays_off(monkeypatch):
    # Importing classify_with_hub sets TF_USE_LEGACY_KERAS=1 for the process; keep it out of later tests.
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", os.environ.get("TF_USE_LEGACY_KERAS", "0"))


@pytest.mark.parametrize("tool,case,make_argv,expected,output", ROWS, ids=[f"{r[0]}-{r[1]}" for r in ROWS])
def test_bad_input_exits_2_with_one_line_and_keeps_earlier_output(
    files, capfd, tool, case, make_argv, expected, output
):
    row_id = f"{tool}-{case}"
    root = files["root"]
    if output == "finetuned":
        out = _finetuned_output(root, row_id, files)
    elif output == "other_model":
        out = _existing_output(root, row_id, "dir")
        shutil.copy(files["other_config"], os.path.join(out, "bert_config.json"))
    elif output == "npy":
        out = str(root / "outputs" / row_id)
        _existing_output(root, row_id + ".npy", "file")
    elif output is not None:
        out = _existing_output(root, row_id, output)
    else:
        out = str(root / "outputs" / row_id)
    watched = out + ".npy" if output == "npy" else out
    before = _snapshot(watched) if os.path.exists(watched) else None

    capfd.readouterr()
    code = _run(tool, make_argv(files, out))
    err = capfd.readouterr().err  # everything written to stderr, by Python or at the file-descriptor level

    assert code == 2, err[-3000:]
    # The whole of stderr is the one error line: no log line, warning or traceback before or after it.
    assert err.endswith("\n") and err.count("\n") == 1, err[-3000:]
    assert err.startswith(f"{tool}: error: "), err[-3000:]
    assert expected.format(**files) in err
    if before is None:
        assert not os.path.exists(watched), f"{watched} was created"
    elif row_id in STOPS_DURING_TRAINING:
        after = _snapshot(watched)
        assert {k: after.get(k) for k in before} == before
    else:
        assert _snapshot(watched) == before
