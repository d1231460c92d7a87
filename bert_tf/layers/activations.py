"""Activation functions by their `bert_config.json` names."""

import keras


def gelu(x):
    """Exact (erf-based) GELU, as in the original BERT."""
    return keras.activations.gelu(x, approximate=False)


def gelu_new(x):
    """The tanh approximation of GELU (HuggingFace's "gelu_new")."""
    return keras.activations.gelu(x, approximate=True)


_ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_new, "relu": keras.activations.relu}


def get_activation(name: str):
    """Returns the activation function that `hidden_act` names."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}.") from None
