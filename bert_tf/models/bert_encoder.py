"""`BertEncoder`: the bidirectional Transformer encoder of BERT."""

from __future__ import annotations

import keras

from bert_tf.config import BertConfig
from bert_tf.layers.attention import padding_attention_bias
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.transformer_encoder_block import TransformerEncoderBlock

ENCODER_INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(name_prefix: str = "") -> dict:
    """Symbolic int32 [batch, seq_length] inputs with TF Hub's BERT names."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name_prefix + name) for name in ENCODER_INPUT_NAMES}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(keras.Model):
    """The BERT encoder with TF Hub's input and output signature.

    Args:
      config: a `BertConfig` (or its dict form).

    Inputs: a dict of int32 [batch, seq_length] tensors, any seq_length up to
      `config.max_position_embeddings`:
      `input_word_ids`, `input_mask` (1 = real token, 0 = padding) and
      `input_type_ids` (segment ids).

    Outputs: a dict with
      `sequence_output`: [batch, seq_length, hidden_size], the last layer;
      `pooled_output`: [batch, hidden_size], dense + tanh on the [CLS] state;
      `encoder_outputs`: a list with every Transformer layer's [batch, seq_length, hidden_size];
      `embedding_output`: [batch, seq_length, hidden_size], the embedding layer's output (after its
        LayerNorm and dropout, and ALBERT's projection when `config.embedding_size` is set), the input of the
        first Transformer layer ("layer 0" when probing layers).

    The SavedModel export keeps TF Hub's keys (`sequence_output`, `pooled_output`,
    `encoder_outputs`, `default`).

    Example:

    >>> import numpy as np
    >>> from bert_tf import BertConfig, BertEncoder
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> encoder = BertEncoder(config)
    >>> word_ids = np.array([[2, 17, 42, 3, 0]], "int32")  # [CLS] ... [SEP] [PAD]
    >>> outputs = encoder({"input_word_ids": word_ids, "input_mask": np.int32(word_ids > 0),
    ...                    "input_type_ids": np.zeros_like(word_ids)})
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 32), (1, 32))
    >>> len(outputs["encoder_outputs"]), tuple(outputs["embedding_output"].shape)
    (2, (1, 5, 32))
    """

    def __init__(self, config: BertConfig | dict, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        initializer = keras.initializers.TruncatedNormal(stddev=config.initializer_range)

        embeddings = BertEmbeddings(
            vocab_size=config.vocab_size,
            hidden_size=config.factorized_embedding_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps,
            dropout_rate=config.hidden_dropout_prob,
            dtype=dtype,
            name="embeddings",
        )
        # ALBERT's factorised embedding: E-wide embeddings, then a projection to the hidden size.
        embedding_projection = None
        if config.embedding_size is not None:
            embedding_projection = keras.layers.Dense(
                config.hidden_size, kernel_initializer=initializer, dtype=dtype, name="embedding_projection"
            )

        def block(name):
            return TransformerEncoderBlock(
                hidden_size=config.hidden_size,
                num_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size,
                activation=config.hidden_act,
                hidden_dropout_rate=config.hidden_dropout_prob,
                attention_dropout_rate=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range,
                layer_norm_eps=config.layer_norm_eps,
                dtype=dtype,
                name=name,
            )

        if config.share_layer_weights:
            # ALBERT's cross-layer sharing: one block, applied num_hidden_layers times.
            blocks = [block("transformer_layer")] * config.num_hidden_layers
        else:
            blocks = [block(f"transformer_layer_{i}") for i in range(config.num_hidden_layers)]
        pooler = keras.layers.Dense(
            config.hidden_size, activation="tanh", kernel_initializer=initializer, dtype=dtype, name="pooler"
        )

        inputs = encoder_inputs()
        embedding_output = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
        if embedding_projection is not None:
            embedding_output = embedding_projection(embedding_output)
        hidden_states = embedding_output
        # Once for all layers, not once per layer.
        attention_bias = padding_attention_bias(inputs["input_mask"])
        encoder_outputs = []
        for block in blocks:
            hidden_states = block(hidden_states, attention_bias=attention_bias)
            encoder_outputs.append(hidden_states)
        pooled_output = pooler(hidden_states[:, 0, :])
        outputs = {
            "sequence_output": hidden_states,
            "pooled_output": pooled_output,
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        self.config = config
        self.embeddings = embeddings
        if embedding_projection is not None:
            self.embedding_projection = embedding_projection
        # With `share_layer_weights`, the same block num_hidden_layers times.
        self.transformer_layers = blocks
        self.pooler = pooler

    @property
    def token_embedding(self) -> keras.layers.Embedding:
        """The word-embedding layer (its matrix is tied to the masked-LM output)."""
        return self.embeddings.token_embedding

    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("dtype") is not None:
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)
