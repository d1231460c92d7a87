"""The main job end to end on a few hundred lines of the bundled data.

The real-weights steps run on the tiny HuggingFace fixture (`--real_weights_dir`)
so that the test stays fast; tests/test_real_weights.py runs that path on the
installed all-MiniLM-L6-v2 itself.
"""

import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_HF = os.path.join(REPO_ROOT, "tests", "fixtures", "convert", "tiny_bert_for_pretraining")
TRAIN_EXAMPLES, TEST_EXAMPLES = 160, 80
TINY_FLAGS = [
    "--corpus_lines=300",
    f"--train_examples={TRAIN_EXAMPLES}",
    f"--test_examples={TEST_EXAMPLES}",
    "--vocab_size=800",
    "--num_layers=2",
    "--hidden_size=64",
    "--pretrain_steps=10",
    "--pretrain_batch_size=8",
    "--small_encoder_epochs=1",
    "--max_seq_length=64",
    f"--real_weights_dir={TINY_HF}",
    "--real_weights_seq_length=32",
    "--probe_sentences=40",
    # The tiny fixture has 2 layers: a 1-layer student, at the length step 5 fine-tuned at.
    "--distill_student_layers=1",
    "--distill_seq_length=32",
    "--distill_speed_examples=32",
]
LIFE_CYCLE_KEYS = [
    "vocab",
    "tfrecords",
    "pretrain",
    "real_weights",
    "classifier_real_weights",
    "export",
    "serve",
    "classifier_random_init",
    "classifier_from_scratch",
]


def run_demo(*args):
    result = subprocess.run(
        [sys.executable, "-m", "experiments.demo", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, result.stderr


def _next_sentence_labels(path):
    import tensorflow as tf

    return [
        tf.train.Example.FromString(record.numpy()).features.feature["next_sentence_labels"].int64_list.value[0]
        for record in tf.data.TFRecordDataset(path)
    ]


def _labels(path, limit):
    with open(path, encoding="utf-8") as f:
        rows = f.read().splitlines()[1 : limit + 1]
    return [int(row.rsplit("\t", 1)[1]) for row in rows]


def test_default_run_is_the_life_cycle_and_prints_the_tours_commands(tmp_path):
    output_dir = tmp_path / "demo"
    stdout, stderr = run_demo(f"--output_dir={output_dir}", *TINY_FLAGS)
    for title in (
        "1. learn a WordPiece vocabulary",
        "2. write pretraining TFRecords",
        "3. pretrain",
        "4. convert real published weights",
        "5. fine-tune the real encoder (experiments.finetune, packed rows)",
        "6. export SavedModels",
        "7. classify new sentences with the exported classifier",
        "8a. fine-tune a randomly initialised small encoder through hub.KerasLayer",
        "8b. the same, from the small encoder pretrained",
        "== Summary",
    ):
        assert title in stdout
    # TensorFlow's CPU start-up notes are kept off the console (bert_tf/tensorflow_startup.py).
    for noise in ("cuInit", "Could not find cuda drivers", "oneDNN custom operations"):
        assert noise not in stdout + stderr

    # The tours did not run; each was announced with the command that runs it, which the summary repeats.
    assert "experiments.probe_layers" not in stdout and "experiments.distill_frontier" not in stdout
    summary = json.loads((output_dir / "summary.json").read_text())
    assert summary["probe_layers"] is None and summary["distillation"] is None
    assert set(summary["skipped_tours"]) == {"probes", "distillation"}
    for tour, command in [*summary["skipped_tours"].items(), ("probes,distillation", summary["all_tours_command"])]:
        words = shlex.split(command)
        # The same flags as this run (so every finished step is reused), and the tour.
        assert words[:3] == ["python", "-m", "experiments.demo"] and words[-1] == f"--tours={tour}"
        assert sorted(words[3:-1]) == sorted([f"--output_dir={output_dir}", *TINY_FLAGS])
    for tour in ("probes", "distillation"):
        assert "skipped (an option" in stdout and f"   {summary['skipped_tours'][tour]}\n" in stdout
        assert f"  {summary['skipped_tours'][tour]}\n" in stdout.split("== Summary")[1]
    assert not (output_dir / "probe_layers").exists() and not (output_dir / "distill").exists()

    assert set(summary["seconds"]) == set(LIFE_CYCLE_KEYS) and all(s > 0 for s in summary["seconds"].values())
    # The majority class is the training set's most frequent label, scored on the held-out reviews.
    train_labels = _labels(os.path.join(REPO_ROOT, "data", "fine_foods_train.tsv"), TRAIN_EXAMPLES)
    test_labels = _labels(os.path.join(REPO_ROOT, "data", "fine_foods_test.tsv"), TEST_EXAMPLES)
    majority_label = int(2 * sum(train_labels) >= len(train_labels))
    assert summary["majority_accuracy"] == test_labels.count(majority_label) / TEST_EXAMPLES
    assert (summary["test_examples"], summary["train_examples"]) == (TEST_EXAMPLES, TRAIN_EXAMPLES)
    for label in ("real_weights", "random_init", "from_scratch"):
        classifier = json.loads((output_dir / f"classifier_{label}" / "result.json").read_text())
        assert summary[f"{label}_accuracy"] == classifier["test_accuracy"]
        assert classifier["test_examples"] == TEST_EXAMPLES and classifier["train_examples"] == TRAIN_EXAMPLES
        # Accuracy on 80 reviews is a multiple of 1/80.
        assert (
            abs(classifier["test_accuracy"] * TEST_EXAMPLES - round(classifier["test_accuracy"] * TEST_EXAMPLES)) < 1e-4
        )
    # The real encoder was fine-tuned by experiments.finetune on packed rows, and evaluated on the 80 reviews.
    real_dir = output_dir / "classifier_real_weights" / "model"
    assert summary["real_weights_packing"] is True
    assert "Packed rows, training" in (output_dir / "classifier_real_weights" / "finetune.log").read_text()
    evaluation = json.loads((real_dir / "eval_results.json").read_text())
    assert evaluation["accuracy"] == summary["real_weights_accuracy"] and evaluation["num_examples"] == TEST_EXAMPLES
    # New sentences, served by the exported classifier: the probability of "1" (great) decides the label.
    served = json.loads((output_dir / "serve" / "predictions.json").read_text())
    assert (
        [p["text"] for p in summary["new_sentences"]]
        == [p["text"] for p in served]
        == [
            "Absolutely delicious, I will order this again.",
            "The coffee was stale and tasted like cardboard.",
            "My dog loves these treats.",
            "Too sweet and the package arrived damaged.",
        ]
    )
    for shown, raw in zip(summary["new_sentences"], served):
        assert shown["score"] == raw["scores"]["1"] == pytest.approx(1 - raw["scores"]["0"], abs=1e-6)
        assert shown["label"] == ("great" if raw["label"] == "1" else "other")
        assert (shown["score"] >= 0.5) == (shown["label"] == "great")

    data = json.loads((output_dir / "tfrecords" / "result.json").read_text())
    assert summary["mlm_unigram_accuracy"] == data["mlm_unigram_accuracy"]
    assert summary["mlm_unigram_loss"] == data["mlm_unigram_loss"]
    # The next-sentence baselines, recomputed from the held-out records' labels.
    train_labels, eval_labels = _next_sentence_labels(data["train_file"]), _next_sentence_labels(data["eval_file"])
    assert (len(train_labels), len(eval_labels)) == (data["train_instances"], data["eval_instances"])
    share = float(np.mean(eval_labels))
    assert summary["nsp_majority_accuracy"] == data["nsp_majority_accuracy"] == pytest.approx(max(share, 1 - share))
    entropy = -(share * np.log(share) + (1 - share) * np.log(1 - share))
    assert summary["nsp_prior_loss"] == data["nsp_prior_loss"] == pytest.approx(entropy, abs=1e-5)
    pretrain = json.loads((output_dir / "pretrain" / "result.json").read_text())
    assert len(pretrain["eval_mlm_accuracy"]) >= 2 and len(pretrain["eval_nsp_accuracy"]) >= 2
    assert summary["mlm_accuracy"] == pretrain["eval_mlm_accuracy"][-1][1]
    assert summary["nsp_accuracy"] == pretrain["eval_nsp_accuracy"][-1][1]
    assert summary["nsp_loss"] == pretrain["eval_nsp_loss"][-1][1]
    # Pretraining runs without dropout; the exported encoder fine-tunes with BERT's 0.1.
    pretrain_config = json.loads((output_dir / "pretrain" / "model" / "bert_config.json").read_text())
    assert pretrain_config["hidden_dropout_prob"] == pretrain_config["attention_probs_dropout_prob"] == 0.0
    exported_config = json.loads(
        (output_dir / "export" / "from_scratch" / "encoder" / "assets.extra" / "bert_config.json").read_text()
    )
    assert exported_config["hidden_dropout_prob"] == exported_config["attention_probs_dropout_prob"] == 0.1
    assert {k: v for k, v in exported_config.items() if "dropout" not in k} == {
        k: v for k, v in pretrain_config.items() if "dropout" not in k
    }
    # The real classifier is the converted HuggingFace model fine-tuned, exported with its encoder.
    real_config = json.loads(
        (output_dir / "export" / "real_weights" / "encoder" / "assets.extra" / "bert_config.json").read_text()
    )
    with open(os.path.join(TINY_HF, "config.json"), encoding="utf-8") as f:
        hf_config = json.load(f)
    assert (real_config["hidden_size"], real_config["num_hidden_layers"], real_config["vocab_size"]) == (
        hf_config["hidden_size"],
        hf_config["num_hidden_layers"],
        hf_config["vocab_size"],
    )
    for label, parts in (
        ("real_weights", ("encoder", "preprocess", "classifier")),
        ("from_scratch", ("encoder", "preprocess")),
        ("random_init", ("encoder", "preprocess")),
    ):
        for part in parts:
            assert (output_dir / "export" / label / part / "saved_model.pb").exists()
    curves = output_dir / "curves.png"
    assert curves.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and curves.stat().st_size > 10_000


def test_the_tours_are_checked_once_in_the_config():
    from bert_tf import errors
    from experiments.demo.config import DemoConfig

    assert DemoConfig().tours == ()
    assert DemoConfig(tours=[" distillation", "probes", "distillation", ""]).tours == ("distillation", "probes")
    assert DemoConfig(tours=("probes",)).runs("probes") and not DemoConfig(tours=("probes",)).runs("distillation")
    with pytest.raises(errors.BadInputError, match="--tours: unknown tour 'probe'; the tours are probes, distillation"):
        DemoConfig(tours=("probe",))
    with pytest.raises(errors.BadInputError, match="--train_examples must be 0 or more"):
        DemoConfig(train_examples=-1)
