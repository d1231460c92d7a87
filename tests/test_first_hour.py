"""A newcomer's first hour, end to end, on a small plain-text "book" (issue 33).

Help of an installed command; a vocabulary; the corpus step with a held-out split; TFRecords; pretraining from
a preset with the vocabulary's size; evaluate-only with its baselines; the export loaded with hub.KerasLayer
(the snippet of `bert_tf_export --help`, run as written, in its own process: tf_keras needs
TF_USE_LEGACY_KERAS before TensorFlow is imported); fine-tuning on a small TSV; prediction later with only
the directory; the export of the fine-tuned classifier and a call of its serving signature with raw strings.
Every tool runs in this process through its `main` (tests/helpers/absl_flags.run_main), with a tiny model
and a few steps.
"""

import csv
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
from absl import logging

from experiments import export, finetune, pretrain
from tests.helpers import absl_flags, training_data
from tests.helpers.absl_flags import run_help
from tfrecords_tools import create_pretraining_data, make_vocab, prepare_corpus

ROOT = training_data.ROOT
SEQ, PREDICTIONS = 64, 10
RECORD_FLAGS = [f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}"]


def _write_book(path):
    """~500 of Austen's sentences as a book: chapters of three wrapped paragraphs of five sentences."""
    sentences = [
        line.strip() for line in (ROOT / "data" / "austen_corpus.txt").read_text("utf-8").splitlines() if line.strip()
    ][:480]
    paragraphs = [" ".join(sentences[i : i + 5]) for i in range(0, len(sentences), 5)]
    parts = []
    for index, paragraph in enumerate(paragraphs):
        if index % 3 == 0:
            parts.append(f"CHAPTER {index // 3 + 1}")
        parts.append(textwrap.fill(paragraph, 72))
    path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return path


def _write_reviews(path, rows, header):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t"))


def _hub_snippet(export_dir) -> str:
    """The hub.KerasLayer snippet of experiments/export.py's help, as written, on `export_dir`."""
    doc = export.__doc__
    start = doc.index("    import os\n")
    end = doc.index("\n", doc.index("outputs = encoder(preprocess("))
    code = textwrap.dedent(doc[start:end]).replace("runs/export", str(export_dir))
    return code + "\nprint('pooled', tuple(outputs['pooled_output'].shape), len(encoder.trainable_weights))\n"


def run_main(module, argv) -> int:
    """`absl_flags.run_main` with absl's INFO lines on, as a tool's command line shows them.

    Unparsing a tool's flags resets absl's verbosity to its flag's default (warnings only).
    """
    logging.set_verbosity(logging.INFO)
    return absl_flags.run_main(module, argv)


def test_the_first_hour(tmp_path, capsys, caplog):
    caplog.set_level("INFO", logger="absl")

    # Help of an installed command: the program's description and its own flags.
    assert run_help(make_vocab, "/venv/bin/bert_tf_make_vocab") == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith("Learns a BERT WordPiece vocabulary") and "--min_count:" in help_text

    # The corpus step: a raw book -> one sentence per line, chapters as documents, a held-out fraction.
    book = _write_book(tmp_path / "book.txt")
    corpus = tmp_path / "corpus"
    assert (
        run_main(
            prepare_corpus,
            [
                f"--input_file={book}",
                f"--output_train={corpus / 'train.txt'}",
                f"--output_heldout={corpus / 'heldout.txt'}",
                "--heldout_fraction=0.2",
                "--document_start_regex=^CHAPTER ",
            ],
        )
        == 0
    )
    train_docs = (corpus / "train.txt").read_text("utf-8").strip().split("\n\n")
    heldout_docs = (corpus / "heldout.txt").read_text("utf-8").strip().split("\n\n")
    assert len(train_docs) + len(heldout_docs) == 32 and len(heldout_docs) == round(32 * 0.2)
    assert all(doc.startswith("CHAPTER ") for doc in train_docs + heldout_docs)

    # A vocabulary: asked for more pieces than the text has; one line says why there are fewer.
    vocab_file = tmp_path / "vocab.txt"
    flags = [f"--input_file={corpus / 'train.txt'}", f"--output_file={vocab_file}", "--vocab_size=8000"]
    assert run_main(make_vocab, [*flags, "--min_count=3", "--num_iterations=2"]) == 0
    vocab_size = len(vocab_file.read_text("utf-8").splitlines())
    assert 100 < vocab_size < 8000
    assert re.search(rf"{vocab_size} tokens, fewer than --vocab_size=8000: .*--min_count=3", caplog.text)

    # TFRecords of both parts.
    data = tmp_path / "data"
    for part, dupe in (("train", 2), ("heldout", 1)):
        flags = [f"--input_file={corpus / (part + '.txt')}", f"--output_file={data / (part + '.tfrecord')}"]
        flags += [f"--vocab_file={vocab_file}", f"--dupe_factor={dupe}", "--num_workers=1", *RECORD_FLAGS]
        assert run_main(create_pretraining_data, flags) == 0

    # Pretraining from a preset: the vocabulary's size, said in one line. A config of another size is refused.
    pretrained = tmp_path / "pretrained"
    data_flags = [f"--input_file={data / 'train.tfrecord'}", f"--eval_input_file={data / 'heldout.tfrecord'}"]
    data_flags += [*RECORD_FLAGS, "--train_batch_size=8", "--eval_batch_size=8", "--max_eval_steps=0"]
    schedule = ["--num_train_steps=6", "--num_warmup_steps=2", "--steps_per_loop=3", "--learning_rate=1e-3"]
    big = tmp_path / "bert_config.json"
    big.write_text(json.dumps(dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64)), encoding="utf-8")  # fmt: skip
    flags = [f"--bert_config_file={big}", f"--vocab_file={vocab_file}", f"--output_dir={tmp_path / 'refused'}"]
    assert run_main(pretrain, [*flags, *data_flags, *schedule]) == 2
    refusal = capsys.readouterr().err.strip().splitlines()[-1]
    assert refusal.startswith("pretrain: error: --vocab_file: ") and f"has {vocab_size} tokens" in refusal
    assert "vocab_size=30522" in refusal and not (tmp_path / "refused").exists()
    flags = ["--preset=bert_tiny", f"--vocab_file={vocab_file}", f"--output_dir={pretrained}"]
    assert run_main(pretrain, [*flags, *data_flags, *schedule]) == 0
    assert json.loads((pretrained / "bert_config.json").read_text("utf-8"))["vocab_size"] == vocab_size
    assert f"--preset=bert_tiny: vocab_size={vocab_size} from --vocab_file" in caplog.text

    # Evaluate only: no schedule flag; the held-out figures beside their baselines.
    caplog.clear()
    assert run_main(pretrain, ["--eval_only", f"--output_dir={pretrained}", *data_flags]) == 0
    results = json.loads((pretrained / "eval_results.json").read_text("utf-8"))
    assert results["step"] == 6
    for name in ("mlm_accuracy", "nsp_accuracy", "mlm_unigram_accuracy", "nsp_majority_accuracy"):
        assert 0.0 <= results[name] <= 1.0, name
    assert results["nsp_majority_accuracy"] >= 0.5 and results["mlm_unigram_loss"] > 0
    assert re.search(r"Held-out: MLM accuracy [0-9.]+ \(unigram baseline [0-9.]+\).*NSP accuracy", caplog.text)
    assert "Resumed from" in caplog.text and "step 3/" not in caplog.text  # nothing was trained

    # The export, loaded with hub.KerasLayer by the snippet of the help, as written.
    assert run_main(export, [f"--model_dir={pretrained}", f"--export_dir={tmp_path / 'export'}"]) == 0
    assert "verified:   encoder reproduces the Keras model" in capsys.readouterr().out
    # Not TensorFlow's note about the ids of captured variables ("input name(s) 3162, ... will be renamed").
    assert "unsupported characters" not in caplog.text
    # Its own process (tf_keras), run while this one fine-tunes; every wait on it is bounded.
    hub = subprocess.Popen(
        [sys.executable, "-c", _hub_snippet(tmp_path / "export")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
        env=training_data.subprocess_env(),
    )
    try:
        _fine_tune_predict_and_serve(tmp_path, pretrained, capsys)
        hub_out, hub_err = hub.communicate(timeout=240)
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.communicate(timeout=60)
    assert hub.returncode == 0, hub_err[-3000:]
    assert "pooled (1, 128) " in hub_out


def _fine_tune_predict_and_serve(tmp_path, pretrained, capsys):
    # Fine-tuning on a small TSV with its own column names.
    reviews = _read_tsv(ROOT / "data" / "fine_foods_train.tsv")[1:]
    names = {"0": "negative", "1": "positive"}
    train_rows = [(text, names[label]) for text, label in reviews[:48]]
    train_file = _write_reviews(tmp_path / "train.tsv", train_rows, ["review", "sentiment"])
    new_texts = [text for text, _ in reviews[100:106]]
    predict_file = _write_reviews(tmp_path / "new.tsv", [(text,) for text in new_texts], ["review"])
    classifier_dir = tmp_path / "classifier"
    flags = ["--task=classification", f"--train_file={train_file}", "--text_a_column=review"]
    flags += ["--label_column=sentiment", f"--model_dir={pretrained}", f"--output_dir={classifier_dir}"]
    flags += ["--do_train", "--num_train_steps=4", "--train_batch_size=8", "--max_seq_length=32", "--steps_per_loop=2"]
    assert run_main(finetune, flags) == 0

    # Prediction later with only the directory: the recorded task and columns; the text beside each label.
    later = [f"--output_dir={classifier_dir}", "--do_predict", f"--predict_file={predict_file}"]
    assert run_main(finetune, later) == 0
    rows = _read_tsv(classifier_dir / "predictions.tsv")
    assert rows[0] == ["guid", "text_a", "prediction", "probability_negative", "probability_positive"]
    assert [row[1] for row in rows[1:]] == new_texts
    assert {row[2] for row in rows[1:]} <= {"negative", "positive"}
    before = (classifier_dir / "predictions.tsv").read_text("utf-8")
    capsys.readouterr()
    assert run_main(finetune, later) == 2
    assert f"{classifier_dir / 'predictions.tsv'} exists" in capsys.readouterr().err.strip().splitlines()[-1]
    assert (classifier_dir / "predictions.tsv").read_text("utf-8") == before
    assert run_main(finetune, [*later, "--overwrite_predictions"]) == 0

    # The servable classifier: raw strings in, the fine-tuned model's scores and label names out.
    served = tmp_path / "served"
    assert run_main(export, [f"--model_dir={classifier_dir}", f"--export_dir={served}"]) == 0
    verified = [line for line in capsys.readouterr().out.splitlines() if line.startswith("verified:")]
    # Most reviews are longer than the window (30 pieces): fine-tuning read them in windows (the default for
    # such texts), and the servable cuts a raw text into the same windows.
    assert len(verified) == 1 and "classifier serving_default(text), --long_text=windows (" in verified[0]
    assert "on 4 texts reproduces" in verified[0]  # the 3 checked texts and one of several windows
    assert "NormalizeUTF8" in (served / "classifier" / "assets.extra" / "required_ops.txt").read_text("utf-8")
    import tensorflow as tf

    signature = tf.saved_model.load(str(served / "classifier")).signatures["serving_default"]
    outputs = signature(text=tf.constant(new_texts))
    expected = np.array([[float(p) for p in row[3:]] for row in rows[1:]])
    np.testing.assert_allclose(outputs["scores"].numpy(), expected, atol=1e-5)
    assert [label.decode() for label in outputs["label"].numpy()] == [row[2] for row in rows[1:]]
    assert outputs["classes"].numpy()[0].tolist() == [b"negative", b"positive"]


def test_prediction_later_without_a_recorded_task_asks_for_task(tmp_path, capsys):
    flags = [f"--output_dir={tmp_path}", "--do_predict", f"--predict_file={tmp_path / 'new.tsv'}"]
    assert absl_flags.run_main(finetune, flags) == 2
    assert capsys.readouterr().err.strip() == (
        f"finetune: error: --task is required (--output_dir={tmp_path} holds no task_config.json)"
    )
