"""Tests of bert_tf.checkpoints.{tf1,huggingface,weight_mapping}: name mapping, layouts and errors.

Numerical parity with HuggingFace transformers and the CLI are in test_convert.py.
"""

import importlib.util
import json
import os
import shutil
import struct

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from bert_tf import BertConfig, BertEncoder, BertPretrainer
from bert_tf.checkpoints import (
    CheckpointMismatchError,
    convert_hf_directory,
    convert_tf1_checkpoint,
    read_hf_directory,
    write_model_dir,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "convert")
TINY_HF = os.path.join(FIXTURES, "tiny_bert_for_pretraining")


def _load_helper(name):
    spec = importlib.util.spec_from_file_location(f"convert_fixtures_{name}", os.path.join(FIXTURES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tf1_checkpoints = _load_helper("tf1_checkpoints")

CONFIG = BertConfig(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=20,
    type_vocab_size=3,
)


def _expected_pairs(model, config):
    """(TF1 name, our variable) for every weight, written out by hand from the layer attributes."""
    encoder = model.encoder if isinstance(model, BertPretrainer) else model
    emb = encoder.embeddings
    pairs = [
        ("bert/embeddings/word_embeddings", emb.token_embedding.embeddings),
        ("bert/embeddings/token_type_embeddings", emb.type_embedding.embeddings),
        ("bert/embeddings/position_embeddings", emb.position_embeddings),
        ("bert/embeddings/LayerNorm/gamma", emb.layer_norm.gamma),
        ("bert/embeddings/LayerNorm/beta", emb.layer_norm.beta),
        ("bert/pooler/dense/kernel", encoder.pooler.kernel),
        ("bert/pooler/dense/bias", encoder.pooler.bias),
    ]
    for n, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/layer_{n}"
        for tf1_dense, dense in [
            ("attention/self/query", block.attention.query),
            ("attention/self/key", block.attention.key),
            ("attention/self/value", block.attention.value),
            ("attention/output/dense", block.attention.output_dense),
            ("intermediate/dense", block.intermediate_dense),
            ("output/dense", block.output_dense),
        ]:
            pairs += [(f"{prefix}/{tf1_dense}/kernel", dense.kernel), (f"{prefix}/{tf1_dense}/bias", dense.bias)]
        for tf1_norm, norm in [
            ("attention/output/LayerNorm", block.attention_layer_norm),
            ("output/LayerNorm", block.output_layer_norm),
        ]:
            pairs += [(f"{prefix}/{tf1_norm}/gamma", norm.gamma), (f"{prefix}/{tf1_norm}/beta", norm.beta)]
    if isinstance(model, BertPretrainer):
        mlm, nsp = model.masked_lm, model.next_sentence
        pairs += [
            ("cls/predictions/transform/dense/kernel", mlm.transform.kernel),
            ("cls/predictions/transform/dense/bias", mlm.transform.bias),
            ("cls/predictions/transform/LayerNorm/gamma", mlm.layer_norm.gamma),
            ("cls/predictions/transform/LayerNorm/beta", mlm.layer_norm.beta),
            ("cls/predictions/output_bias", mlm.output_bias),
            ("cls/seq_relationship/output_bias", nsp.dense.bias),
        ]
    return pairs


def _write(tmp_path, arrays, name="bert_model.ckpt"):
    return tf1_checkpoints.write_tf1_checkpoint(str(tmp_path / name), arrays)


@pytest.fixture(scope="module")
def tf1_arrays():
    return tf1_checkpoints.random_arrays(tf1_checkpoints.original_variable_shapes(CONFIG), seed=7)


@pytest.fixture(scope="module")
def tf1_pretraining_checkpoint(tmp_path_factory, tf1_arrays):
    directory = tmp_path_factory.mktemp("tf1")
    prefix = _write(directory, tf1_checkpoints.with_optimizer_state(tf1_arrays))
    CONFIG.to_json_file(str(directory / "bert_config.json"))
    return prefix


# --- TF1 -------------------------------------------------------------------------


def test_tf1_round_trip_is_exact(tf1_pretraining_checkpoint, tf1_arrays):
    model = convert_tf1_checkpoint(tf1_pretraining_checkpoint, CONFIG)
    assert isinstance(model, BertPretrainer)
    pairs = _expected_pairs(model, CONFIG)
    for name, variable in pairs:
        np.testing.assert_array_equal(np.asarray(variable), tf1_arrays[name], err_msg=name)
    # The NSP matrix is [2, H] in TF1 and [H, 2] in a Keras Dense kernel.
    np.testing.assert_array_equal(
        np.asarray(model.next_sentence.dense.kernel), tf1_arrays["cls/seq_relationship/output_weights"].T
    )
    # Every weight of the model came from the checkpoint (the MLM output matrix is the tied embedding).
    covered = {id(v) for _, v in pairs} | {id(model.next_sentence.dense.kernel)}
    assert {id(v) for v in model.weights} == covered
    assert len(pairs) + 1 == len(tf1_arrays)


def test_tf1_config_and_vocab_default_to_the_checkpoint_directory(tf1_pretraining_checkpoint, tf1_arrays):
    # bert_config=None reads bert_config.json beside the checkpoint; a directory resolves to bert_model.ckpt.
    model = convert_tf1_checkpoint(os.path.dirname(tf1_pretraining_checkpoint))
    assert model.encoder.config == CONFIG
    np.testing.assert_array_equal(
        np.asarray(model.encoder.embeddings.position_embeddings), tf1_arrays["bert/embeddings/position_embeddings"]
    )


def test_tf1_encoder_only_checkpoint_gives_an_encoder(tmp_path):
    arrays = tf1_checkpoints.random_arrays(
        tf1_checkpoints.original_variable_shapes(CONFIG, masked_lm=False, next_sentence=False), seed=3
    )
    model = convert_tf1_checkpoint(_write(tmp_path, arrays), CONFIG)
    assert type(model) is BertEncoder
    for name, variable in _expected_pairs(model, CONFIG):
        np.testing.assert_array_equal(np.asarray(variable), arrays[name], err_msg=name)


def test_tf1_heads_none_leaves_heads_out(tf1_pretraining_checkpoint, tf1_arrays):
    model = convert_tf1_checkpoint(tf1_pretraining_checkpoint, CONFIG, heads="none")
    assert type(model) is BertEncoder
    np.testing.assert_array_equal(np.asarray(model.pooler.kernel), tf1_arrays["bert/pooler/dense/kernel"])


def test_tf1_missing_extra_and_misshapen_variables_are_all_named(tmp_path, tf1_arrays):
    arrays = dict(tf1_arrays)
    del arrays["bert/encoder/layer_1/attention/self/key/bias"]
    del arrays["cls/predictions/transform/LayerNorm/beta"]
    arrays["bert/encoder/layer_0/attention/self/query/kernel"] = np.zeros((16, 8), np.float32)
    arrays["cls/seq_relationship/output_weights"] = np.zeros((16, 2), np.float32)  # not transposed
    arrays["output_weights"] = np.zeros((3, 16), np.float32)  # a fine-tuned classifier
    arrays["bert/encoder/layer_0/attention/self/query/kernel/adam_m"] = np.zeros((16, 16), np.float32)
    with pytest.raises(CheckpointMismatchError) as error:
        convert_tf1_checkpoint(_write(tmp_path, arrays), CONFIG)
    message = str(error.value)
    assert "Missing from the checkpoint (2)" in message
    assert "bert/encoder/layer_1/attention/self/key/bias" in message
    assert "cls/predictions/transform/LayerNorm/beta" in message
    assert "Unexpected in the checkpoint, not used by the model (1)" in message
    assert "    output_weights" in message
    assert "Shape mismatches (2)" in message
    assert "bert/encoder/layer_0/attention/self/query/kernel: checkpoint shape [16, 8]" in message
    assert (
        "cls/seq_relationship/output_weights: checkpoint shape [16, 2], model weight "
        "next_sentence.dense.kernel expects [16, 2] (after transposing)" in message
    )
    assert "adam_m" not in message


def test_tf1_config_disagreement_is_explained(tf1_pretraining_checkpoint):
    wrong = BertConfig(**{**CONFIG.to_dict(), "vocab_size": 50, "num_hidden_layers": 1})
    with pytest.raises(CheckpointMismatchError) as error:
        convert_tf1_checkpoint(tf1_pretraining_checkpoint, wrong)
    message = str(error.value)
    assert "config vocab_size=50 but bert/embeddings/word_embeddings has 40 rows" in message
    assert "config num_hidden_layers=1 but the checkpoint has 2 layers" in message
    assert "bert/encoder/layer_1/output/dense/kernel" in message  # listed as unexpected


def test_tf1_missing_pooler_needs_explicit_permission(tmp_path):
    arrays = tf1_checkpoints.random_arrays(
        tf1_checkpoints.original_variable_shapes(CONFIG, pooler=False, masked_lm=False, next_sentence=False)
    )
    prefix = _write(tmp_path, arrays)
    with pytest.raises(
        CheckpointMismatchError, match="no pooler weights.*bert/pooler/dense/kernel.*allow_missing_pooler"
    ):
        convert_tf1_checkpoint(prefix, CONFIG)
    with pytest.warns(UserWarning, match="NO POOLER"):
        model = convert_tf1_checkpoint(prefix, CONFIG, allow_missing_pooler=True)
    np.testing.assert_array_equal(
        np.asarray(model.embeddings.layer_norm.beta), arrays["bert/embeddings/LayerNorm/beta"]
    )


def test_tf1_one_pretraining_head_alone_is_an_error(tmp_path):
    arrays = tf1_checkpoints.random_arrays(tf1_checkpoints.original_variable_shapes(CONFIG, next_sentence=False))
    prefix = _write(tmp_path, arrays)
    with pytest.raises(CheckpointMismatchError, match="no next_sentence weights.*cls/seq_relationship/output_weights"):
        convert_tf1_checkpoint(prefix, CONFIG)
    with pytest.raises(CheckpointMismatchError, match="cls/seq_relationship/output_bias"):
        convert_tf1_checkpoint(prefix, CONFIG, heads="pretraining")
    assert type(convert_tf1_checkpoint(prefix, CONFIG, heads="none")) is BertEncoder


def test_tf1_bad_paths_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere/bert_model.ckpt"):
        convert_tf1_checkpoint(str(tmp_path / "nowhere" / "bert_model.ckpt"), CONFIG)
    (tmp_path / "broken.ckpt.index").write_bytes(b"not a checkpoint index")
    with pytest.raises(ValueError, match="Cannot read TF1 checkpoint .*broken.ckpt"):
        convert_tf1_checkpoint(str(tmp_path / "broken.ckpt"), CONFIG)
    # A TF2 object-based checkpoint is a different format.
    model_dir = tmp_path / "tf2"
    checkpoint = write_model_dir(str(model_dir), BertEncoder(CONFIG))
    with pytest.raises(ValueError, match="object-based TF2 checkpoint"):
        convert_tf1_checkpoint(checkpoint, CONFIG)


# --- HuggingFace -----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_state():
    return load_file(os.path.join(TINY_HF, "model.safetensors"))


@pytest.fixture(scope="module")
def tiny_pretrainer():
    return convert_hf_directory(TINY_HF)


def _hf_dir(tmp_path, state, name="hf", config_updates=None):
    directory = tmp_path / name
    directory.mkdir()
    with open(os.path.join(TINY_HF, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(config_updates or {})
    (directory / "config.json").write_text(json.dumps(config))
    if state is not None:
        save_file(state, str(directory / "model.safetensors"))
    return str(directory)


def _assert_same_weights(a, b):
    assert len(a.weights) == len(b.weights)
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=x.path)


def test_hf_pretraining_weights_map_with_transposes(tiny_pretrainer, tiny_state):
    model = tiny_pretrainer
    assert isinstance(model, BertPretrainer)
    block = model.encoder.transformer_layers[1]
    np.testing.assert_array_equal(
        np.asarray(block.attention.value.kernel), tiny_state["bert.encoder.layer.1.attention.self.value.weight"].T
    )
    np.testing.assert_array_equal(
        np.asarray(block.intermediate_dense.kernel), tiny_state["bert.encoder.layer.1.intermediate.dense.weight"].T
    )
    np.testing.assert_array_equal(
        np.asarray(block.output_layer_norm.gamma), tiny_state["bert.encoder.layer.1.output.LayerNorm.weight"]
    )
    np.testing.assert_array_equal(np.asarray(model.masked_lm.output_bias), tiny_state["cls.predictions.bias"])
    np.testing.assert_array_equal(
        np.asarray(model.next_sentence.dense.kernel), tiny_state["cls.seq_relationship.weight"].T
    )
    np.testing.assert_array_equal(
        np.asarray(model.encoder.embeddings.position_embeddings),
        tiny_state["bert.embeddings.position_embeddings.weight"],
    )


def test_hf_encoder_without_prefix_with_old_layer_norm_names_and_buffers(tmp_path, tiny_state, tiny_pretrainer):
    state = {}
    for name, value in tiny_state.items():
        if name.startswith("cls."):
            continue
        name = name[len("bert.") :]
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[name] = value
    state["embeddings.position_ids"] = np.arange(64, dtype=np.int64)[None]
    state["embeddings.token_type_ids"] = np.zeros((1, 64), dtype=np.int64)
    model = convert_hf_directory(_hf_dir(tmp_path, state))
    assert type(model) is BertEncoder
    _assert_same_weights(model, tiny_pretrainer.encoder)


def test_hf_decoder_copies_of_tied_weights(tmp_path, tiny_state, tiny_pretrainer):
    state = dict(tiny_state)
    state["cls.predictions.decoder.bias"] = state.pop("cls.predictions.bias")
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].copy()
    _assert_same_weights(convert_hf_directory(_hf_dir(tmp_path, state, "alias")), tiny_pretrainer)

    state["cls.predictions.bias"] = state["cls.predictions.decoder.bias"].copy()
    _assert_same_weights(convert_hf_directory(_hf_dir(tmp_path, state, "both")), tiny_pretrainer)

    untied = dict(state, **{"cls.predictions.decoder.weight": state["cls.predictions.decoder.weight"] + 1})
    with pytest.raises(
        ValueError, match="cls.predictions.decoder.weight differs from bert.embeddings.word_embeddings.weight"
    ):
        convert_hf_directory(_hf_dir(tmp_path, untied, "untied"))
    two_biases = dict(state, **{"cls.predictions.bias": state["cls.predictions.bias"] + 1})
    with pytest.raises(ValueError, match="cls.predictions.decoder.bias differs from cls.predictions.bias"):
        convert_hf_directory(_hf_dir(tmp_path, two_biases, "two_biases"))


def test_hf_mismatches_are_named_by_their_file_names(tmp_path, tiny_state):
    state = dict(tiny_state)
    del state["bert.encoder.layer.0.output.LayerNorm.weight"]
    state["classifier.weight"] = np.zeros((3, 32), np.float32)
    state["bert.pooler.dense.weight"] = np.zeros((32, 16), np.float32)
    with pytest.raises(CheckpointMismatchError) as error:
        convert_hf_directory(_hf_dir(tmp_path, state))
    message = str(error.value)
    assert "Missing from the checkpoint (1):\n    bert.encoder.layer.0.output.LayerNorm.weight" in message
    assert "Unexpected in the checkpoint, not used by the model (1):\n    classifier.weight" in message
    assert (
        "bert.pooler.dense.weight: checkpoint shape [32, 16], model weight encoder.pooler.kernel "
        "expects [32, 32] (after transposing)" in message
    )


def test_hf_config_disagreement_is_explained(tmp_path, tiny_state):
    with pytest.raises(
        CheckpointMismatchError,
        match=r"config vocab_size=120 but "
        r"bert.embeddings.word_embeddings.weight has 100 rows",
    ):
        convert_hf_directory(_hf_dir(tmp_path, tiny_state, config_updates={"vocab_size": 120}))
    with pytest.raises(ValueError, match="is_decoder"):
        convert_hf_directory(_hf_dir(tmp_path, tiny_state, "decoder", config_updates={"is_decoder": True}))


def test_hf_missing_pooler_and_single_head(tmp_path, tiny_state):
    no_pooler = {k: v for k, v in tiny_state.items() if not k.startswith(("bert.pooler.", "cls."))}
    directory = _hf_dir(tmp_path, no_pooler, "no_pooler")
    with pytest.raises(
        CheckpointMismatchError, match="missing: bert.pooler.dense.weight, bert.pooler.dense.bias.*allow_missing_pooler"
    ):
        convert_hf_directory(directory)
    with pytest.warns(UserWarning, match="NO POOLER"):
        assert type(convert_hf_directory(directory, allow_missing_pooler=True)) is BertEncoder

    masked_lm_only = {k: v for k, v in tiny_state.items() if not k.startswith("cls.seq_relationship.")}
    directory = _hf_dir(tmp_path, masked_lm_only, "masked_lm_only")
    with pytest.raises(CheckpointMismatchError, match="no next_sentence weights"):
        convert_hf_directory(directory)
    assert type(convert_hf_directory(directory, heads="none")) is BertEncoder


def test_hf_sharded_and_bfloat16_files(tmp_path, tiny_state, tiny_pretrainer):
    directory = _hf_dir(tmp_path, None, "sharded")
    names = sorted(tiny_state)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file_name, shard_names in shards.items():
        save_file({n: tiny_state[n] for n in shard_names}, os.path.join(directory, file_name))
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {n: f_ for f_, ns in shards.items() for n in ns}}, f)
    _assert_same_weights(convert_hf_directory(directory), tiny_pretrainer)

    # BF16 (which numpy lacks), written in the safetensors layout by hand: 8-byte header size, JSON, data.
    header, blobs, offset = {}, [], 0
    for name in names:
        blob = (tiny_state[name].astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {
            "dtype": "BF16",
            "shape": list(tiny_state[name].shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    header_bytes = json.dumps(header).encode()
    directory = _hf_dir(tmp_path, None, "bf16")
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(blobs))
    model = convert_hf_directory(directory)
    truncated = (tiny_state["bert.embeddings.word_embeddings.weight"].view(np.uint32) & 0xFFFF0000).view(np.float32)
    np.testing.assert_array_equal(np.asarray(model.encoder.token_embedding.embeddings), truncated)


def test_hf_weights_given_as_tf1_are_reported_as_such(tmp_path):
    directory = tmp_path / "hf_as_tf1"
    directory.mkdir()
    state = load_file(os.path.join(TINY_HF, "model.safetensors"))
    prefix = _write(directory, {name: value for name, value in list(state.items())[:3]})
    with pytest.raises(CheckpointMismatchError) as error:
        convert_tf1_checkpoint(prefix, CONFIG)
    message = str(error.value)
    assert "holds none of the encoder weights; is it a google-research TF1 BERT checkpoint?" in message
    assert "bert/pooler/dense/kernel" in message and "bert.embeddings.LayerNorm.bias" in message


def test_hf_pickle_only_directory_is_refused(tmp_path):
    directory = _hf_dir(tmp_path, None)
    with open(os.path.join(directory, "pytorch_model.bin"), "wb") as f:
        f.write(b"\x80\x04 would be unpickled")
    with pytest.raises(FileNotFoundError, match="pytorch_model.bin, which is not read: only safetensors are"):
        convert_hf_directory(directory)
    with pytest.raises(FileNotFoundError, match="HuggingFace model directory not found"):
        read_hf_directory(str(tmp_path / "absent"))


def test_hf_corrupt_safetensors_is_named(tmp_path):
    directory = _hf_dir(tmp_path, None)
    shutil.copyfile(os.path.join(TINY_HF, "config.json"), os.path.join(directory, "config.json"))
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(b"garbage")
    with pytest.raises(ValueError, match="Cannot read safetensors file .*model.safetensors"):
        convert_hf_directory(directory)
