"""`BertEncoder`: the bidirectional Transformer encoder of BERT."""

from __future__ import annotations

import keras
from keras import ops

from bert_tf.config import BertConfig
from bert_tf.layers import packed_examples
from bert_tf.layers.attention import padding_attention_bias
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.transformer_encoder_block import TransformerEncoderBlock

ENCODER_INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
#: The input of packed rows: int32 [batch, seq_length], 0 for padding and 1..k for the row's examples.
EXAMPLE_IDS_KEY = "input_example_ids"


def encoder_inputs(name_prefix: str = "", packed: bool = False) -> dict:
    """Symbolic int32 [batch, seq_length] inputs with TF Hub's BERT names (and `input_example_ids` if `packed`)."""
    names = ENCODER_INPUT_NAMES + ((EXAMPLE_IDS_KEY,) if packed else ())
    return {name: keras.Input(shape=(None,), dtype="int32", name=name_prefix + name) for name in names}


def _encode(embeddings, embedding_projection, blocks, inputs, training=None):
    """(embedding_output, [each block's output]) of the encoder's layers on `inputs`, packed or not.

    `training`: None inside a functional model (Keras passes the model's); True or False on a direct call."""
    example_ids = inputs.get(EXAMPLE_IDS_KEY)
    position_ids = None
    if example_ids is None:
        # Once for all layers, not once per layer.
        attention_bias = padding_attention_bias(inputs["input_mask"])
    else:
        example_ids = ops.cast(example_ids, "int32") * ops.cast(inputs["input_mask"], "int32")
        attention_bias = packed_examples.example_attention_bias(example_ids)
        position_ids = packed_examples.example_position_ids(example_ids)
    embedding_output = embeddings(
        inputs["input_word_ids"], inputs["input_type_ids"], position_ids=position_ids, training=training
    )
    if embedding_projection is not None:
        embedding_output = embedding_projection(embedding_output)
    hidden_states, encoder_outputs = embedding_output, []
    for block in blocks:
        hidden_states = block(hidden_states, attention_bias=attention_bias, training=training)
        encoder_outputs.append(hidden_states)
    return embedding_output, encoder_outputs


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
        embedding_output, encoder_outputs = _encode(embeddings, embedding_projection, blocks, inputs)
        hidden_states = encoder_outputs[-1]
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

    def packed_outputs(self, inputs: dict, num_slots: int | None = None, training=None) -> dict:
        """The encoder's outputs for rows that pack several examples, each computed as if alone.

        `inputs` holds the three encoder inputs and `input_example_ids` (int [batch, seq_length]: 0 for
        padding, 1..k for the row's examples, each contiguous and starting with its [CLS]); tensors or
        `keras.Input`s (to build a packed task model on these weights). Each example attends only to itself
        and its position ids restart at 0 (`bert_tf.layers.packed_examples`), so its states equal those of the
        example alone to float rounding. Returns the encoder's output dict, except that `pooled_output` is
        [batch, num_slots, hidden_size]: the pooler on each example's own [CLS] (an empty slot pools zeros:
        mask it); without `num_slots`, there is no `pooled_output` (a tagger reads the sequence alone).
        `training`: True for dropout when called on tensors (a functional model passes its own).

        Example (the second example of a packed row pools as it does alone):

        >>> import numpy as np
        >>> from bert_tf import BertConfig, BertEncoder
        >>> encoder = BertEncoder(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1,
        ...                                  num_attention_heads=2, intermediate_size=32))
        >>> alone = np.array([[2, 40, 41, 3]], "int32")
        >>> row = np.array([[2, 17, 3, 2, 40, 41, 3, 0]], "int32")
        >>> packed = encoder.packed_outputs({"input_word_ids": row, "input_mask": np.int32(row > 0),
        ...     "input_type_ids": np.zeros_like(row),
        ...     "input_example_ids": np.array([[1, 1, 1, 2, 2, 2, 2, 0]], "int32")}, num_slots=3)
        >>> single = encoder({"input_word_ids": alone, "input_mask": np.ones_like(alone),
        ...                   "input_type_ids": np.zeros_like(alone)})
        >>> bool(np.allclose(packed["pooled_output"][0, 1], single["pooled_output"][0], atol=1e-5))
        True
        """
        embedding_output, encoder_outputs = _encode(
            self.embeddings, getattr(self, "embedding_projection", None), self.transformer_layers, inputs, training
        )
        outputs = {
            "sequence_output": encoder_outputs[-1],
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }
        if num_slots is not None:
            example_ids = ops.cast(inputs[EXAMPLE_IDS_KEY], "int32") * ops.cast(inputs["input_mask"], "int32")
            first_states = packed_examples.example_first_token_states(encoder_outputs[-1], example_ids, num_slots)
            outputs["pooled_output"] = self.pooler(first_states)
        return outputs

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
