import keras
import numpy as np
import pytest

from bert_tf import layers

LAYER_FACTORIES = {
    "embeddings": lambda: layers.BertEmbeddings(
        vocab_size=50,
        hidden_size=16,
        max_position_embeddings=20,
        type_vocab_size=3,
        layer_norm_eps=1e-6,
        dropout_rate=0.2,
    ),
    "attention": lambda: layers.MultiHeadSelfAttention(num_heads=4, hidden_size=16, dropout_rate=0.05),
    "block": lambda: layers.TransformerEncoderBlock(
        hidden_size=16, num_heads=2, intermediate_size=24, activation="relu", hidden_dropout_rate=0.0
    ),
    "next_sentence": lambda: layers.NextSentenceHead(initializer_range=0.05),
    "classification": lambda: layers.ClassificationHead(num_classes=4, dropout_rate=0.3),
    "span": lambda: layers.SpanHead(initializer_range=0.01),
}


@pytest.mark.parametrize("name", sorted(LAYER_FACTORIES))
def test_get_config_round_trip(name):
    layer = LAYER_FACTORIES[name]()
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config


def test_masked_lm_head_config_without_the_shared_embedding():
    embedding = keras.layers.Embedding(30, 8)
    embedding.build()
    head = layers.MaskedLMHead(embedding, activation="gelu_new", layer_norm_eps=1e-7)
    config = head.get_config()
    assert config["activation"] == "gelu_new" and config["layer_norm_eps"] == 1e-7
    assert "token_embedding" not in config
    clone = layers.MaskedLMHead.from_config(dict(config, token_embedding=embedding))
    assert clone.vocab_size == 30 and clone.hidden_size == 8


def test_attention_ignores_padded_keys():
    attention = layers.MultiHeadSelfAttention(num_heads=2, hidden_size=8, dropout_rate=0.0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 5, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0]], "int32")
    y = np.asarray(attention(x, mask))
    x2 = x.copy()
    x2[:, 3:] = rng.normal(size=(1, 2, 8))
    np.testing.assert_allclose(np.asarray(attention(x2, mask))[:, :3], y[:, :3], atol=1e-6)


def test_gather_positions():
    sequence = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
    positions = np.array([[3, 0], [1, 1]], "int32")
    gathered = np.asarray(layers.gather_positions(sequence, positions))
    np.testing.assert_array_equal(gathered, np.take_along_axis(sequence, positions[:, :, None], axis=1))


def test_activations():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0], "float32")
    exact = np.asarray(layers.get_activation("gelu")(x))
    approx = np.asarray(layers.get_activation("gelu_new")(x))
    np.testing.assert_allclose(exact, [-0.04550026, -0.15426877, 0.0, 0.34573123, 1.95449974], atol=1e-6)
    assert np.abs(exact - approx).max() < 1e-3 and np.abs(exact - approx).max() > 0
    with pytest.raises(ValueError, match="swish"):
        layers.get_activation("swish")


def test_classification_head_on_pooled_and_sequence_states():
    # One head for a label per sequence (BertClassifier) and a label per token (BertTokenClassifier).
    head = layers.ClassificationHead(num_classes=3, dropout_rate=0.0, name="classifier")
    rng = np.random.default_rng(0)
    sequence = rng.normal(size=(2, 4, 8)).astype("float32")
    per_token = np.asarray(head(sequence))
    assert per_token.shape == (2, 4, 3) and per_token.dtype == np.float32
    np.testing.assert_allclose(np.asarray(head(sequence[:, 1])), per_token[:, 1], atol=1e-6)
    assert [w.path for w in head.weights] == ["classifier/logits/kernel", "classifier/logits/bias"]
    with pytest.raises(ValueError, match="num_classes"):
        layers.ClassificationHead(num_classes=0)


def test_two_logit_heads_share_their_projection():
    sequence = np.random.default_rng(1).normal(size=(2, 4, 8)).astype("float32")
    span = layers.SpanHead(name="span")
    start, end = span(sequence)
    next_sentence = layers.NextSentenceHead()
    next_sentence.build(sequence.shape)
    next_sentence.dense.set_weights(span.dense.get_weights())
    both = np.asarray(next_sentence(sequence))
    np.testing.assert_allclose(np.stack([np.asarray(start), np.asarray(end)], -1), both, atol=1e-6)
    # The converter and the checkpoints address the projection as `<head>.dense`.
    assert {w.path for w in span.weights} == {"span/logits/kernel", "span/logits/bias"}
