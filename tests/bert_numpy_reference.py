"""An independent NumPy forward pass of BERT, to check the Keras layers against.

Written from the paper's equations and the original checkpoint layout, not
from the Keras code: weights are read through the model's public attributes.
"""

import math

import numpy as np

_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def dense(x, layer):
    return x @ layer.kernel.numpy() + layer.bias.numpy()


def encoder_forward(encoder, inputs):
    """Returns (sequence_output, pooled_output, encoder_outputs) in float64."""
    config = encoder.config
    word_ids, mask, type_ids = (np.asarray(inputs[k]) for k in ("input_word_ids", "input_mask", "input_type_ids"))
    seq_length = word_ids.shape[1]
    emb = encoder.embeddings
    x = (
        emb.token_embedding.embeddings.numpy()[word_ids]
        + emb.type_embedding.embeddings.numpy()[type_ids]
        + emb.position_embeddings.numpy()[:seq_length][None]
    )
    x = layer_norm(
        x.astype(np.float64), emb.layer_norm.gamma.numpy(), emb.layer_norm.beta.numpy(), config.layer_norm_eps
    )
    heads, head_size = config.num_attention_heads, config.head_size
    all_layers = []
    for block in encoder.transformer_layers:
        att = block.attention

        def split(t):
            return t.reshape(t.shape[0], seq_length, heads, head_size).transpose(0, 2, 1, 3)

        q, k, v = split(dense(x, att.query)), split(dense(x, att.key)), split(dense(x, att.value))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_size)
        scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = layer_norm(
            x + dense(context, att.output_dense),
            block.attention_layer_norm.gamma.numpy(),
            block.attention_layer_norm.beta.numpy(),
            config.layer_norm_eps,
        )
        ffn = dense(gelu(dense(x, block.intermediate_dense)), block.output_dense)
        x = layer_norm(
            x + ffn, block.output_layer_norm.gamma.numpy(), block.output_layer_norm.beta.numpy(), config.layer_norm_eps
        )
        all_layers.append(x)
    pooled = np.tanh(dense(x[:, 0], encoder.pooler))
    return x, pooled, all_layers


def mlm_logits(pretrainer, sequence_output, positions):
    head = pretrainer.masked_lm
    eps = pretrainer.encoder.config.layer_norm_eps
    gathered = np.take_along_axis(sequence_output, positions[:, :, None], axis=1)
    h = layer_norm(
        gelu(dense(gathered, head.transform)), head.layer_norm.gamma.numpy(), head.layer_norm.beta.numpy(), eps
    )
    return h @ pretrainer.encoder.token_embedding.embeddings.numpy().T + head.output_bias.numpy()
