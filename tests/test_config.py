import dataclasses
import json

import pytest

from bert_tf.config import PRESETS, BertConfig


def test_bert_config_json_round_trip(tmp_path):
    config = BertConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=128,
        hidden_act="gelu_new",
        layer_norm_eps=1e-6,
    )
    path = tmp_path / "bert_config.json"
    config.to_json_file(str(path))
    assert BertConfig.from_json_file(str(path)) == config
    assert not list(tmp_path.glob("*.tmp-*"))


def test_reads_original_google_research_config(tmp_path):
    original = {
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 768,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "type_vocab_size": 2,
        "vocab_size": 30522,
    }
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(original))
    config = BertConfig.from_json_file(str(path))
    assert config == PRESETS["bert_base"]
    assert config.layer_norm_eps == 1e-12
    written = json.loads(config.to_json_string())
    assert {k: written[k] for k in original} == original


def test_reads_huggingface_config(tmp_path):
    hf = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "vocab_size": 30522,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "transformers_version": "4.8.2",
        "use_cache": True,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    config = BertConfig.from_hf_json_file(str(path))
    assert config.hidden_size == 384 and config.num_hidden_layers == 6 and config.hidden_act == "gelu_new"
    with pytest.raises(ValueError, match="model_type"):
        BertConfig.from_hf_config(dict(hf, model_type="roberta"))


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("num_attention_heads", 5, "divisible"),
        ("hidden_size", 0, "hidden_size"),
        ("num_hidden_layers", -1, "num_hidden_layers"),
        ("vocab_size", 2.5, "vocab_size"),
        ("hidden_act", "swish", "hidden_act"),
        ("hidden_dropout_prob", 1.5, "hidden_dropout_prob"),
        ("layer_norm_eps", 0, "layer_norm_eps"),
    ],
)
def test_invalid_config_names_the_field(field, value, match):
    values = dict(vocab_size=100, hidden_size=64, num_attention_heads=4, intermediate_size=128)
    values[field] = value
    with pytest.raises(ValueError, match=match):
        BertConfig(**values)


def test_unknown_and_missing_fields_are_errors(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({"vocab_size": 10, "hiden_size": 64}))
    with pytest.raises(ValueError, match="hiden_size"):
        BertConfig.from_json_file(str(path))
    path.write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(ValueError, match="vocab_size"):
        BertConfig.from_json_file(str(path))
    path.write_text("{not json")
    with pytest.raises(ValueError, match=str(path)):
        BertConfig.from_json_file(str(path))
    with pytest.raises(FileNotFoundError, match="missing.json"):
        BertConfig.from_json_file(str(tmp_path / "missing.json"))


def test_presets():
    small = [f"bert_L{l}_H{h}" for l in (2, 4, 6, 8, 10, 12) for h in (128, 256, 512, 768)]
    assert len(small) == 24 and all(name in PRESETS for name in small)
    for name in small:
        config = PRESETS[name]
        assert config.num_attention_heads == config.hidden_size // 64
        assert config.intermediate_size == 4 * config.hidden_size
        assert config.vocab_size == 30522
    assert PRESETS["bert_tiny"] == PRESETS["bert_L2_H128"]
    assert PRESETS["bert_mini"] == PRESETS["bert_L4_H256"]
    assert PRESETS["bert_small"] == PRESETS["bert_L4_H512"]
    assert PRESETS["bert_medium"] == PRESETS["bert_L8_H512"]
    large = PRESETS["bert_large"]
    assert (large.num_hidden_layers, large.hidden_size, large.num_attention_heads) == (24, 1024, 16)
    assert BertConfig.from_preset("bert_tiny", vocab_size=500).vocab_size == 500
    with pytest.raises(ValueError, match="bert_huge"):
        BertConfig.from_preset("bert_huge")
    with pytest.raises(dataclasses.FrozenInstanceError):
        large.hidden_size = 1
