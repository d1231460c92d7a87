"""The end-to-end demo on a few hundred lines of the bundled data."""

import json
import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY_FLAGS = ["--corpus_lines=300", "--train_examples=160", "--test_examples=80", "--vocab_size=800",
              "--num_layers=2", "--hidden_size=64", "--pretrain_steps=10", "--pretrain_batch_size=8",
              "--finetune_epochs=1", "--max_seq_length=64", "--nocompare_random_init"]


def run_demo(output_dir):
    result = subprocess.run([sys.executable, "-m", "experiments.demo", f"--output_dir={output_dir}", *TINY_FLAGS],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_demo_runs_the_life_cycle_and_reuses_finished_steps(tmp_path):
    output_dir = tmp_path / "demo"
    stdout = run_demo(output_dir)
    for title in ("1. learn a WordPiece vocabulary", "2. write pretraining TFRecords", "3. pretrain",
                  "4. export", "5. fine-tune a sentiment classifier via hub.KerasLayer", "6. classify new sentences",
                  "== Summary"):
        assert title in stdout

    vocab_lines = (output_dir / "vocab" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert vocab_lines[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    data = json.loads((output_dir / "tfrecords" / "result.json").read_text())
    assert data["train_instances"] > 100 and data["eval_instances"] > 0
    pretrain = json.loads((output_dir / "pretrain" / "result.json").read_text())
    assert len(pretrain["eval_mlm_accuracy"]) >= 2 and len(pretrain["eval_nsp_accuracy"]) >= 2
    # Pretraining runs without dropout; the exported encoder fine-tunes with BERT's 0.1.
    pretrain_config = json.loads((output_dir / "pretrain" / "model" / "bert_config.json").read_text())
    assert pretrain_config["hidden_dropout_prob"] == pretrain_config["attention_probs_dropout_prob"] == 0.0
    exported_config = json.loads(
        (output_dir / "export" / "pretrained" / "encoder" / "assets.extra" / "bert_config.json").read_text())
    assert exported_config["hidden_dropout_prob"] == exported_config["attention_probs_dropout_prob"] == 0.1
    assert {k: v for k, v in exported_config.items() if "dropout" not in k} == \
        {k: v for k, v in pretrain_config.items() if "dropout" not in k}
    assert (output_dir / "export" / "pretrained" / "encoder" / "saved_model.pb").exists()
    assert (output_dir / "export" / "pretrained" / "preprocess" / "saved_model.pb").exists()
    classifier = json.loads((output_dir / "classifier_pretrained" / "result.json").read_text())
    assert classifier["test_examples"] == 80 and 0.0 <= classifier["test_accuracy"] <= 1.0
    assert len(classifier["predictions"]) == 4
    assert all(0.0 <= p["score"] <= 1.0 for p in classifier["predictions"])
    curves = output_dir / "curves.png"
    assert curves.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and curves.stat().st_size > 10_000
    assert list((output_dir / "pretrain" / "model" / "summaries" / "train").glob("events.out*"))

    # A second run reuses every finished step instead of rebuilding it.
    stdout = run_demo(output_dir)
    assert stdout.count("reusing") == 5
    assert "$ python -m" not in stdout
