"""`python -m experiments.export` and `export_model_dir`: model dirs, explicit files, errors."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export import export_model_dir
from experiments import export as export_cli
from tests.helpers import export_fixtures
from tests.helpers.absl_flags import temporary_flags

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def run_cli(*args):
    with temporary_flags(export_cli.define_flags, ["export", *args]):
        export_cli.main(["export"])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny pretrainer's model dir: bert_config.json, vocab.txt, ckpt-0 with MLM/NSP heads."""
    path = tmp_path_factory.mktemp("model") / "model_dir"
    model, _ = export_fixtures.write_tiny_model_dir(str(path), with_heads=True)
    return str(path), model


def test_cli_exports_encoder_with_mlm_and_preprocess(model_dir, tmp_path, capsys):
    path, pretrainer = model_dir
    export_dir = tmp_path / "export"
    run_cli(f"--model_dir={path}", f"--export_dir={export_dir}", "--max_seq_length=16")
    assert str(export_dir / "encoder") in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path)) == ["export"]  # no temporary directory left
    assert sorted(os.listdir(export_dir)) == ["encoder", "preprocess"]

    encoder = tf.saved_model.load(str(export_dir / "encoder"))
    preprocess = tf.saved_model.load(str(export_dir / "preprocess"))
    inputs = preprocess(tf.constant(export_fixtures.SENTENCES[:3]))
    assert inputs["input_word_ids"].shape == (3, 16)
    inputs = {k: inputs[k] for k in ENCODER_KEYS}
    expected = pretrainer.encoder(inputs)["pooled_output"]
    assert np.max(np.abs(encoder(inputs)["pooled_output"].numpy() - np.asarray(expected))) <= 1e-6
    mlm_inputs = dict(inputs, masked_lm_positions=tf.constant([[1, 2]] * 3))
    expected_logits = np.asarray(pretrainer(mlm_inputs)["mlm_logits"])
    assert np.max(np.abs(encoder.mlm(mlm_inputs)["mlm_logits"].numpy() - expected_logits)) <= 1e-5
    with (
        open(os.path.join(path, "vocab.txt")) as source,
        open(export_dir / "encoder" / "assets.extra" / "vocab.txt") as copy,
    ):
        assert source.read() == copy.read()

    # An existing export is refused before any work.
    with pytest.raises(SystemExit, match="already exists"):
        run_cli(f"--model_dir={path}", f"--export_dir={export_dir}", "--max_seq_length=16")


def test_explicit_files_encoder_only_checkpoint_and_overwrite(model_dir, tmp_path):
    path, pretrainer = model_dir
    # An encoder-only checkpoint (as `experiments.convert` writes for BertModel weights).
    checkpoint = tf.train.Checkpoint(encoder=pretrainer.encoder).save(str(tmp_path / "encoder_only" / "weights"))
    export_dir = tmp_path / "export"
    (export_dir / "old").mkdir(parents=True)
    run_cli(
        f"--init_checkpoint={checkpoint}",
        f"--bert_config_file={os.path.join(path, 'bert_config.json')}",
        f"--vocab_file={os.path.join(path, 'vocab.txt')}",
        f"--export_dir={export_dir}",
        "--max_seq_length=8",
        "--overwrite",
        "--noverify",
    )
    assert sorted(os.listdir(export_dir)) == ["encoder", "preprocess"]
    encoder = tf.saved_model.load(str(export_dir / "encoder"))
    assert not hasattr(encoder, "mlm")
    inputs = tf.saved_model.load(str(export_dir / "preprocess"))(tf.constant(["great taste, great price"]))
    assert inputs["input_word_ids"].shape == (1, 8)
    inputs = {k: inputs[k] for k in ENCODER_KEYS}
    expected = pretrainer.encoder(inputs)["sequence_output"]
    assert np.max(np.abs(encoder(inputs)["sequence_output"].numpy() - np.asarray(expected))) <= 1e-6


def test_random_init_exports_the_configs_encoder_with_the_seeds_weights(model_dir, tmp_path):
    import keras

    from bert_tf.config import BertConfig
    from bert_tf.models import BertEncoder

    path, pretrainer = model_dir
    files = [f"--bert_config_file={os.path.join(path, 'bert_config.json')}", f"--vocab_file={path}/vocab.txt"]
    run_cli(*files, f"--export_dir={tmp_path / 'random'}", "--max_seq_length=8", "--init_from=random", "--seed=5")
    encoder = tf.saved_model.load(str(tmp_path / "random" / "encoder"))
    assert not hasattr(encoder, "mlm")  # no checkpoint, no masked-LM head
    inputs = tf.saved_model.load(str(tmp_path / "random" / "preprocess"))(tf.constant(["great taste"]))
    inputs = {k: inputs[k] for k in ENCODER_KEYS}
    exported = encoder(inputs)["sequence_output"].numpy()
    keras.utils.set_random_seed(5)
    fresh = BertEncoder(BertConfig.from_json_file(os.path.join(path, "bert_config.json")))
    assert np.max(np.abs(exported - np.asarray(fresh(inputs)["sequence_output"]))) <= 1e-6
    assert np.max(np.abs(exported - np.asarray(pretrainer.encoder(inputs)["sequence_output"]))) > 1e-2
    with pytest.raises(SystemExit, match="--init_from=random: pass --model_dir, or --bert_config_file"):
        run_cli(files[0], f"--export_dir={tmp_path / 'e'}", "--init_from=random")
    with pytest.raises(SystemExit, match="--init_from=random reads no checkpoint"):
        run_cli(
            f"--model_dir={path}", f"--init_checkpoint={path}", f"--export_dir={tmp_path / 'e'}", "--init_from=random"
        )


def test_usage_errors_name_the_flags(tmp_path):
    with pytest.raises(SystemExit, match="--export_dir is required"):
        run_cli("--model_dir=x")
    with pytest.raises(SystemExit, match="--bert_config_file, --vocab_file"):
        run_cli("--init_checkpoint=x", f"--export_dir={tmp_path / 'e'}")
    with pytest.raises(SystemExit, match="--max_seq_length"):
        run_cli("--model_dir=x", f"--export_dir={tmp_path / 'e'}", "--max_seq_length=1")


def test_missing_and_inconsistent_files_fail_before_writing(model_dir, tmp_path):
    path, _ = model_dir
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    export_dir = tmp_path / "export"

    with pytest.raises(SystemExit, match="--model_dir: directory not found: .*nowhere"):
        run_cli(f"--model_dir={tmp_path / 'nowhere'}", f"--export_dir={export_dir}")
    with pytest.raises(ValueError, match="--model_dir: directory not found: .*nowhere"):
        export_model_dir(str(tmp_path / "nowhere"), str(export_dir))

    with pytest.raises(SystemExit, match="--vocab_file: file not found: .*other_vocab.txt"):
        run_cli(f"--model_dir={broken}", f"--vocab_file={tmp_path / 'other_vocab.txt'}", f"--export_dir={export_dir}")

    with pytest.raises(SystemExit, match="max_seq_length=100 exceeds .*max_position_embeddings=64"):
        run_cli(f"--model_dir={broken}", f"--export_dir={export_dir}", "--max_seq_length=100")

    big_vocab = export_fixtures.write_vocab(
        export_fixtures.SPECIAL_TOKENS + [f"w{i}" for i in range(500)], tmp_path / "big_vocab.txt"
    )
    with pytest.raises(SystemExit, match=r"big_vocab.txt has 505 tokens but .*bert_config.json has vocab_size="):
        run_cli(f"--model_dir={broken}", f"--vocab_file={big_vocab}", f"--export_dir={export_dir}")

    no_special = export_fixtures.write_vocab(["a", "b", "c"], tmp_path / "no_special.txt")
    with pytest.raises(SystemExit, match=r"no_special.txt.*\[PAD\]|no_special.txt.*\[CLS\]"):
        run_cli(f"--model_dir={broken}", f"--vocab_file={no_special}", f"--export_dir={export_dir}")

    for name in os.listdir(broken):
        if name.startswith("ckpt") or name in ("checkpoint", "weights.safetensors"):
            os.remove(broken / name)
    with pytest.raises(SystemExit, match="No TF2 checkpoint found in directory .*broken"):
        run_cli(f"--model_dir={broken}", f"--export_dir={export_dir}")

    os.remove(broken / "bert_config.json")  # missing from the model dir: reported by the library
    with pytest.raises(SystemExit, match="--model_dir: file not found: .*broken/bert_config.json"):
        run_cli(f"--model_dir={broken}", f"--export_dir={export_dir}")
    assert not export_dir.exists()


def test_module_entry_point_reports_errors_without_traceback(tmp_path):
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.export",
            f"--model_dir={tmp_path / 'missing'}",
            f"--export_dir={tmp_path / 'export'}",
        ],
        cwd=export_fixtures.REPO_ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 2
    assert "--model_dir: directory not found: " + str(tmp_path / "missing") in process.stderr
    assert "Traceback" not in process.stderr
