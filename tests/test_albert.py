"""ALBERT's parameter reduction as `BertConfig` fields: factorised embedding (`embedding_size`) and cross-layer
sharing (`share_layer_weights`): parameter counts, bert_config.json, model directory, weights file, export,
and the refusal of TF1/HF conversion. The layer contract of such models: tests/test_layer_contract.py."""

import dataclasses
import json

import numpy as np
import pytest

from bert_tf import BertConfig, BertEncoder, BertPretrainer
from bert_tf.checkpoints import model_dir as model_dir_lib
from bert_tf.checkpoints import weight_mapping, weights_file

ALBERT = BertConfig(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=3,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=16,
    embedding_size=8,
    share_layer_weights=True,
)


def _batch(batch_size=2, seq_length=5):
    rng = np.random.default_rng(0)
    mask = np.ones((batch_size, seq_length), "int32")
    mask[1, 3:] = 0
    word_ids = rng.integers(1, ALBERT.vocab_size, (batch_size, seq_length)).astype("int32") * mask
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": np.zeros_like(mask)}


BATCH = _batch()
POSITIONS = np.array([[1, 3], [0, 2]], "int32")


def _block_parameters(h, i):
    # q, k, v, output projections with biases; two LayerNorms; the feed-forward network.
    return 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)


def _expected_encoder_parameters(config: BertConfig) -> int:
    e, h = config.factorized_embedding_size, config.hidden_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * e + 2 * e
    projection = e * h + h if config.embedding_size is not None else 0
    blocks = 1 if config.share_layer_weights else config.num_hidden_layers
    return embeddings + projection + blocks * _block_parameters(h, config.intermediate_size) + h * h + h


def test_parameter_counts_albert_base_against_bert_base():
    albert = BertEncoder(BertConfig.from_preset("albert_base"))
    bert_count = _expected_encoder_parameters(BertConfig.from_preset("bert_base"))
    assert albert.count_params() == _expected_encoder_parameters(albert.config)
    # ALBERT's paper: 12M for ALBERT-Base (E=128, shared) against BERT-Base's 108-110M.
    assert 11.5e6 < albert.count_params() < 12.5e6
    assert 108e6 < bert_count < 111e6
    for config in (
        ALBERT,
        dataclasses.replace(ALBERT, share_layer_weights=False),
        dataclasses.replace(ALBERT, embedding_size=None),
        dataclasses.replace(ALBERT, embedding_size=None, share_layer_weights=False),
    ):
        assert BertEncoder(config).count_params() == _expected_encoder_parameters(config), config


def test_shared_layers_are_one_block_applied_every_layer():
    encoder = BertEncoder(ALBERT)
    assert len(encoder.transformer_layers) == 3
    assert all(block is encoder.transformer_layers[0] for block in encoder.transformer_layers)
    outputs = encoder(BATCH)
    layers = [np.asarray(x) for x in outputs["encoder_outputs"]]
    assert tuple(outputs["embedding_output"].shape) == (2, 5, 16)  # projected to hidden_size
    assert not np.allclose(layers[0], layers[1]) and not np.allclose(layers[1], layers[2])
    # Cross-layer sharing: applying the one block to layer 1's output gives layer 2's.
    from bert_tf.layers.attention import padding_attention_bias

    again = encoder.transformer_layers[0](
        layers[1], attention_bias=padding_attention_bias(BATCH["input_mask"]), training=False
    )
    np.testing.assert_allclose(np.asarray(again), layers[2], atol=1e-6)


def test_bert_config_json_keeps_the_originals_fields_and_round_trips_albert(tmp_path):
    bert = BertConfig.from_preset("bert_tiny")
    assert "embedding_size" not in bert.to_dict() and "share_layer_weights" not in bert.to_dict()
    path = tmp_path / "bert_config.json"
    ALBERT.to_json_file(str(path))
    assert json.loads(path.read_text())["embedding_size"] == 8
    assert BertConfig.from_json_file(str(path)) == ALBERT
    with pytest.raises(ValueError, match="embedding_size must be a positive integer or None"):
        dataclasses.replace(ALBERT, embedding_size=0)
    with pytest.raises(ValueError, match="share_layer_weights must be true or false"):
        dataclasses.replace(ALBERT, share_layer_weights="yes")


def test_model_directory_weights_file_and_export_of_an_albert_style_pretrainer(tmp_path):
    from bert_tf.export import export_encoder

    pretrainer = BertPretrainer(BertEncoder(ALBERT))
    inputs = dict(BATCH, masked_lm_positions=POSITIONS)
    expected = pretrainer(inputs)
    assert tuple(expected["mlm_logits"].shape) == (2, 2, ALBERT.vocab_size)
    model_dir = tmp_path / "model"
    model_dir_lib.write_model_dir(str(model_dir), pretrainer)
    tensors, _ = weights_file.read_weights_file(str(model_dir))
    # One set of block weights, and the projection.
    assert "encoder/transformer_layer/attention/query/kernel" in tensors
    assert not any("transformer_layer_1" in key for key in tensors)
    assert tensors["encoder/embedding_projection/kernel"].shape == (8, 16)
    assert tensors["heads/masked_lm/transform/kernel"].shape == (16, 8)

    loaded = model_dir_lib.load_pretrainer(str(model_dir))
    np.testing.assert_array_equal(np.asarray(loaded(inputs)["mlm_logits"]), np.asarray(expected["mlm_logits"]))
    fresh = BertPretrainer(BertEncoder(ALBERT))
    weights_file.load_weights_file(fresh, str(model_dir))
    np.testing.assert_array_equal(np.asarray(fresh(inputs)["mlm_logits"]), np.asarray(expected["mlm_logits"]))

    # export_encoder verifies that the SavedModel reproduces the Keras outputs (mlm included).
    export_encoder(pretrainer, str(tmp_path / "export"))


def test_conversion_of_albert_style_configs_is_refused_clearly():
    for source_format in ("tf1", "hf"):
        with pytest.raises(ValueError, match="ALBERT's embedding_size=8 / share_layer_weights=True: converting"):
            weight_mapping.convert_weights(ALBERT, None, source_format, config_description="bert_config.json")
