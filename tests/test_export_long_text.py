"""`experiments.export` of a classifier fine-tuned with --long_text=windows or head_tail: the servable classifier
reads a raw text of any length as fine-tuning did, and its scores equal `experiments.finetune --do_predict`'s."""

import csv
import json
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks import long_text
from experiments import export as export_cli
from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import run_main
from tests.helpers.jobs import finetune

SEQ_LENGTH = 16  # a window holds 14 pieces; a word of the tiny vocabulary is one piece
WORDS = synthetic.FILLER + synthetic.POSITIVE + synthetic.NEGATIVE
# Texts of 0, 1, 5, 14 (the window), 15, 27, 37, 120 and 400 pieces: with a stride of 5 and 3 windows at most,
# 27 pieces need 4 windows (slots 0, 1.5 -> 2, 3) and 37 need 6 (slots 0, 2.5 -> 2 rounded half to even, 5).
LENGTHS = (0, 1, 5, 14, 15, 27, 37, 120, 400)
# The exported directories: (name, --long_text settings). Max pooling serves through the same graph and the
# model's own WindowPooling layer (tests/test_long_text.py covers both poolings' padding slots); attention pools
# the windows' [CLS] vectors before the head, with its learned weights.
MODES = {
    "windows_mean": long_text.LongTextConfig("windows", window_stride=5, window_pooling="mean", max_windows=3),
    "windows_attention": long_text.LongTextConfig(
        "windows", window_stride=5, window_pooling="attention", max_windows=3
    ),
    "head_tail": long_text.LongTextConfig("head_tail"),
}


def _texts() -> list:
    rng = random.Random(7)
    return [" ".join(rng.choice(WORDS) for _ in range(length)) for length in LENGTHS]


def _train_rows(n: int, seed: int) -> list:
    """Sentiment documents of 5 to 60 words (several windows); the label's words anywhere in them."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        words = [rng.choice(synthetic.FILLER) for _ in range(rng.randint(5, 60))]
        for _ in range(3):
            polarity = synthetic.POSITIVE if label == "pos" else synthetic.NEGATIVE
            words.insert(rng.randint(0, len(words)), rng.choice(polarity))
        rows.append((" ".join(words), label))
    return rows


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    # An id column first: an empty text is then an empty field, not an empty line.
    return {
        # Weights drawn wide (initializer_range 0.5): each text gets scores of its own after a few steps, so a
        # window cut otherwise than fine-tuning's shows in them.
        "model_dir": synthetic.make_model_dir(str(root / "model"), initializer_range=0.5),
        "train_file": synthetic.write_tsv(str(root / "train.tsv"), ["sentence", "label"], _train_rows(64, 1)),
        "predict_file": synthetic.write_tsv(
            str(root / "test.tsv"), ["id", "sentence"], [(i, text) for i, text in enumerate(_texts())]
        ),
    }


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory, data):
    """{mode: fine-tuned directory}, each trained two steps, with --do_predict's predictions.tsv."""
    root = tmp_path_factory.mktemp("finetuned")
    dirs = {}
    for name, config in MODES.items():
        output_dir = str(root / name)
        finetune(
            "classification",
            output_dir,
            text_a_column="sentence",
            model_dir=data["model_dir"],
            train_file=data["train_file"],
            predict_file=data["predict_file"],
            long_text_config=config,
            max_seq_length=SEQ_LENGTH,
            train_batch_size=16,
            learning_rate=1e-3,
            num_train_steps=2,
            steps_per_loop=2,
            do_train=True,
            do_predict=True,
            seed=1,
        )
        dirs[name] = output_dir
    return dirs


def _predictions(output_dir) -> tuple:
    with open(os.path.join(output_dir, "predictions.tsv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    probabilities = np.array([[float(row["probability_neg"]), float(row["probability_pos"])] for row in rows])
    return [row["text_a"] for row in rows], [row["prediction"] for row in rows], probabilities


@pytest.mark.parametrize("mode", list(MODES))
def test_servable_scores_equal_do_predicts_on_texts_of_any_length(mode, finetuned, tmp_path, capsys):
    export_dir = tmp_path / "export"
    verify = mode == "windows_mean"  # the export's own check (a text of several windows included), once: slow
    argv = [f"--model_dir={finetuned[mode]}", f"--export_dir={export_dir}", f"--max_seq_length={SEQ_LENGTH}"]
    assert run_main(export_cli, argv + ([] if verify else ["--noverify"])) == 0
    if verify:
        verified = [line for line in capsys.readouterr().out.splitlines() if line.startswith("verified:")]
        assert "--long_text=windows (--window_stride=5, --window_pooling=mean, --max_windows=3)" in verified[0]
        assert "on 4 texts reproduces" in verified[0]

    texts, labels, probabilities = _predictions(finetuned[mode])
    assert texts == _texts()  # the id column kept the empty text a row of its own
    loaded = tf.saved_model.load(str(export_dir / "classifier"))
    serve = loaded.signatures["serving_default"]
    got = serve(text=tf.constant(texts))
    assert sorted(got) == ["classes", "label", "label_id", "scores"]  # truncate's outputs, per document
    assert got["scores"].shape == (len(texts), 2)
    # predictions.tsv has 6 decimals: 5e-7 of rounding within the 1e-5.
    np.testing.assert_allclose(got["scores"].numpy(), probabilities, atol=1e-5, rtol=0)
    assert [label.decode() for label in got["label"].numpy()] == labels
    # The scores differ between texts (the check has teeth), and a document's do not depend on its batch.
    assert np.ptp(probabilities[:, 1]) > 0.05
    alone = serve(text=tf.constant(texts[-2:-1]))["scores"].numpy()
    np.testing.assert_allclose(alone[0], got["scores"].numpy()[-2], atol=1e-6, rtol=0)
    if mode == "windows_attention":  # learned scores of the windows: not the plain mean the untrained one gives
        checkpoint = tf.train.load_checkpoint(tf.train.latest_checkpoint(finetuned[mode]))
        kernel = checkpoint.get_tensor("task_model/window_pooling/score/_kernel/.ATTRIBUTES/VARIABLE_VALUE")
        assert np.abs(kernel).sum() > 0.05  # [CLS] vectors in [-1, 1]: window scores differ by up to 0.1

    config = {name: value.numpy() for name, value in loaded.long_text_config().items()}
    expected = MODES[mode]
    assert config["long_text"].decode() == expected.long_text and config["window"] == SEQ_LENGTH - 2
    assert config["window_pooling"].decode() == expected.window_pooling
    assert config["window_stride"] == expected.stride(SEQ_LENGTH - 2)
    assert config["max_windows"] == expected.max_windows
    with open(export_dir / "classifier" / "assets.extra" / "task_config.json", encoding="utf-8") as f:
        assert json.load(f)["long_text"] == expected.recorded()


def test_windows_in_the_graph_are_the_python_rules():
    from bert_tf.tasks import long_text_ops

    lengths = np.arange(0, 90)
    for window, stride, max_windows in [(14, 14, 16), (14, 5, 3), (14, 1, 4), (6, 4, 1), (5, 2, 2)]:
        got = long_text_ops.window_starts(tf.constant(lengths), window, stride, max_windows).to_list()
        expected = [
            long_text.capped_starts(long_text.window_starts(int(n), window, stride), max_windows) for n in lengths
        ]
        assert got == expected, (window, stride, max_windows)
    pieces = tf.ragged.constant([[], [7], list(range(10, 40))], dtype=tf.int32)
    windows = long_text_ops.document_windows(pieces, window=14, stride=7, max_windows=3).to_list()
    # 30 pieces: starts 0, 7, 14, 16; three kept: 0, 14 (slot 1.5 rounds to 2) and 16.
    assert windows == [[[]], [[7]], [list(range(10, 24)), list(range(24, 38)), list(range(26, 40))]]
    kept = long_text_ops.head_and_tail(pieces, budget=14).to_list()
    head, tail = long_text.head_tail_split(14)
    assert kept == [[], [7], list(range(10, 10 + head)) + list(range(40 - tail, 40))]


def _run_export(argv, capfd) -> tuple:
    status = run_main(export_cli, [*argv, f"--max_seq_length={SEQ_LENGTH}"])
    return status, capfd.readouterr().err.strip().splitlines()[-1]


def test_bad_input_exits_2_naming_the_flag_or_file(finetuned, tmp_path, capfd):
    windows = finetuned["windows_mean"]
    # LiteRT reads a text's first pieces only: refused before any work.
    export_dir = tmp_path / "litert"
    status, err = _run_export([f"--model_dir={windows}", f"--export_dir={export_dir}", "--litert=float32"], capfd)
    assert status == 2 and "--long_text=windows" in err and "--litert" in err, err
    assert not export_dir.exists()
    head_tail = finetuned["head_tail"]
    status, err = _run_export([f"--model_dir={head_tail}", f"--export_dir={export_dir}", "--litert=float32"], capfd)
    assert status == 2 and "--long_text=head_tail" in err, err

    # A task_config.json whose long_text no fine-tuning wrote.
    for bad, named in [({"long_text": "sliding"}, "--long_text"), ({"window_stride": 15}, "--window_stride=15")]:
        broken = tmp_path / "broken"
        shutil.copytree(windows, broken, dirs_exist_ok=True)
        path = broken / "task_config.json"
        task_config = json.loads(path.read_text("utf-8"))
        task_config["long_text"].update(bad)
        path.write_text(json.dumps(task_config), "utf-8")
        status, err = _run_export([f"--model_dir={broken}", f"--export_dir={export_dir}"], capfd)
        assert status == 2 and str(path) in err and named in err, err
        assert not export_dir.exists()
