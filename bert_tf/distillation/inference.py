"""Cheaper inference forms of a trained model: bfloat16 weights and compute, or int8 weights (Keras' quantizer).

    from bert_tf.distillation.inference import inference_form
    fast = inference_form(classifier, "bfloat16")   # a new model; `classifier` is left as it is
    small = inference_form(classifier, "int8")

`"bfloat16"` rebuilds the model with the `bfloat16` dtype policy (weights and compute; LayerNorm and softmax
still in float32 inside Keras' layers) and copies the weights, rounded. On CPUs with AVX-512 BF16 or AMX, oneDNN
runs its matrix products at up to twice the float32 rate; elsewhere (AVX2) TensorFlow emulates it, slower.

`"int8"` is Keras' post-training `Model.quantize("int8")`: every `Dense` and `Embedding` kernel becomes int8
with a per-output-channel scale, and each `Dense` quantizes its input per token on the fly (abs-max) and runs
an int8 x int8 -> int32 matrix product. The model is 4x smaller in its kernels. On TensorFlow the products run
on oneDNN's int8 kernel where the running process has oneDNN on (fast with AVX-512 VNNI or AMX) and as exact
float32 products elsewhere, chosen where the model runs (`bert_tf.distillation.onednn_int8`), since
TensorFlow's own integer `MatMul` is slower than float32; on other backends they are the backend's `matmul`.
`bert_tf.cpu_features.form_cost_warning(form)` says when this CPU lacks what makes a form fast.

Either form exports as a SavedModel through `bert_tf.export` (`experiments.export --quantize=...`), whose
outputs stay float32. Backend-free (Keras), but for the oneDNN products on TensorFlow.
"""

from __future__ import annotations

import warnings

import keras

INFERENCE_FORMS = ("float32", "bfloat16", "int8")


def inference_form(model: keras.Model, form: str) -> keras.Model:
    """`model` (a `BertEncoder` or a task model on one) in `form`: float32 (itself), bfloat16 or int8 (new models).

    Example:

    >>> from bert_tf import BertConfig, BertEncoder
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=64)
    >>> encoder = BertEncoder(config)
    >>> inference_form(encoder, "bfloat16").embeddings.dtype_policy.name
    'bfloat16'
    >>> inference_form(encoder, "int8").get_layer("transformer_layer_0").output_dense.kernel.dtype
    'int8'
    """
    if form not in INFERENCE_FORMS:
        raise ValueError(f"Unknown inference form {form!r}; expected one of {', '.join(INFERENCE_FORMS)}.")
    if form == "float32":
        return model
    clone = _rebuild(model, "bfloat16" if form == "bfloat16" else "float32")
    # Keras rounds the float32 values into the clone's variables' dtype.
    clone.set_weights(model.get_weights())
    if form == "int8":
        with warnings.catch_warnings():
            # Keras warns for every layer without weights to quantize (inputs, LayerNorm, dropout).
            warnings.filterwarnings("ignore", message=".*does not have a `quantize` method.*")
            clone.quantize("int8")
        if keras.backend.backend() == "tensorflow":
            from bert_tf.distillation.onednn_int8 import use_onednn_int8

            use_onednn_int8(clone)
    return clone


def _rebuild(model: keras.Model, dtype: str) -> keras.Model:
    """A model of `model`'s class and config whose encoder (and hence head) has the dtype policy `dtype`."""
    config = model.get_config()
    dtype = keras.saving.serialize_keras_object(keras.DTypePolicy(dtype))
    if "encoder" in config:  # a TaskModel: the encoder is serialized inside; the head takes the encoder's policy
        encoder_config = dict(config["encoder"])
        encoder_config["config"] = dict(encoder_config["config"], dtype=dtype)
        config = dict(config, encoder=encoder_config)
    else:
        config = dict(config, dtype=dtype)
    return type(model).from_config(config)
