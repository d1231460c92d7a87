"""Activation functions by their `bert_config.json` names."""

import functools
import math

import keras


def gelu(x):
    """Exact (erf-based) GELU, as in the original BERT."""
    return keras.activations.gelu(x, approximate=False)


def gelu_new(x):
    """The tanh approximation of GELU (HuggingFace's "gelu_new").

    On JAX its gradient is written out (`_gelu_tanh_keeping_only_its_input`): the backward pass recomputes the
    tanh from the input instead of keeping it, which lets XLA:GPU fold bias and GELU into the matrix product's
    cuBLASLt epilogue. Other backends differentiate Keras' GELU.
    """
    if keras.backend.backend() == "jax":
        return _gelu_tanh_keeping_only_its_input()(x)
    return keras.activations.gelu(x, approximate=True)


@functools.cache
def _gelu_tanh_keeping_only_its_input():
    """`jax.nn.gelu(x, approximate=True)` with a custom VJP whose only residual is `x`.

    Autodiff of the formula keeps both `x` and `tanh(...)`, an extra [tokens, intermediate] array written
    forward and read backward; and with that second use of the product's output XLA cannot hand the
    activation to cuBLASLt, which writes GELU(x + bias) and keeps x + bias for the backward pass itself.
    The derivative is computed in float32 and returned in the input's dtype.
    """
    import jax
    import jax.numpy as jnp

    sqrt_2_over_pi = math.sqrt(2.0 / math.pi)

    @jax.custom_vjp
    def gelu_tanh(x):
        return jax.nn.gelu(x, approximate=True)

    def forward(x):
        return gelu_tanh(x), x

    def backward(x, upstream):
        x = x.astype(jnp.float32)
        tanh = jnp.tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x))
        derivative = 0.5 * (1.0 + tanh) + 0.5 * x * (1.0 - tanh * tanh) * sqrt_2_over_pi * (1.0 + 0.134145 * x * x)
        return ((upstream.astype(jnp.float32) * derivative).astype(upstream.dtype),)

    gelu_tanh.defvjp(forward, backward)
    return gelu_tanh


_ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_new, "relu": keras.activations.relu}


def get_activation(name: str):
    """Returns the activation function that `hidden_act` names."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}.") from None
