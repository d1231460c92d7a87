"""The int8 form's matrix products on oneDNN's uint8 x int8 kernel (TensorFlow on x86 CPUs).

    from bert_tf.distillation.onednn_int8 import onednn_int8_available, use_onednn_int8
    model.quantize("int8")
    if onednn_int8_available():
        use_onednn_int8(model)   # the same numbers, on oneDNN's int8 kernel

Keras' int8 `Dense` quantizes its input per token (abs-max, q in [-127, 127]) and multiplies it by its int8
kernel with `ops.matmul`, which TensorFlow's CPU runs on its generic integer `MatMul`: slower than float32.
oneDNN, which TensorFlow uses for float32 and bfloat16 on x86, has fast int8 kernels (AVX-512 VNNI, AMX) for
*unsigned* activations times signed weights, behind `QuantizedMatMulWithBiasAndDequantize`. `OneDnnInt8Dense`
computes Keras' product through it: the quantized input shifted by 128 into uint8, and the shift's share
(128 times each kernel column's sum) subtracted through the product's int32 bias, so the integer result is
Keras' own; the de-scaling is Keras'. Inference only (no gradient).

The op has a kernel only where TensorFlow runs oneDNN (x86 Linux and Windows builds, unless
`TF_ENABLE_ONEDNN_OPTS=0`); a SavedModel that uses it loads and runs only there.
"""

from __future__ import annotations

import functools

import keras


@keras.saving.register_keras_serializable(package="bert_tf")
class OneDnnInt8Dense(keras.layers.Dense):
    """`keras.layers.Dense` whose int8 mode runs on oneDNN's uint8 x int8 kernel (TensorFlow backend).

    Inputs `[..., input_dim]`, outputs `[..., units]`, as `Dense`; other modes are `Dense`'s. Made by
    `use_onednn_int8` from the `Dense` layers of a model quantized with `quantize("int8")`.

    Example:

    >>> import numpy as np
    >>> dense = keras.layers.Dense(4)
    >>> dense.build((None, 8))
    >>> dense.quantize("int8")
    >>> x = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
    >>> keras_int8 = keras.ops.convert_to_numpy(dense(x))
    >>> use_onednn_int8(dense) if onednn_int8_available() else 0
    1
    >>> bool(np.allclose(keras.ops.convert_to_numpy(dense(x)), keras_int8, atol=1e-5))
    True
    """

    def _int8_call(self, inputs, training=None):
        if self.lora_enabled:
            return super()._int8_call(inputs, training=training)
        import tensorflow as tf

        kernel = tf.convert_to_tensor(self._kernel)
        kernel_scale = tf.reshape(tf.cast(self.kernel_scale, self.compute_dtype), [-1])
        inputs = tf.convert_to_tensor(inputs, self.compute_dtype)
        rows = tf.reshape(inputs, [-1, kernel.shape[0]])
        # Keras' AbsMaxQuantizer, per row (token); |rows * input_scale| <= 127 needs no clipping.
        input_scale = 127.0 / (tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True) + keras.config.epsilon())
        product = integer_product(tf.cast(tf.round(rows * input_scale) + 128.0, tf.uint8), kernel)
        outputs = product / (input_scale * kernel_scale)
        outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [kernel.shape[1]]], axis=0))
        if self.bias is not None:
            outputs = outputs + self.bias
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


def integer_product(shifted, kernel):
    """`(shifted - 128) @ kernel`, exactly, as float32: uint8 `[m, k]` by int8 `[k, n]` on oneDNN's kernel."""
    import tensorflow as tf

    column_sums = tf.reduce_sum(tf.cast(kernel, tf.int32), axis=0)
    # Scales of 1 (0..255 for the uint8 input, -127..127 for the int8 kernel): the integer product itself.
    return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=tf.bitcast(shifted, tf.quint8),
        b=tf.bitcast(kernel, tf.qint8),
        bias=tf.bitcast(-128 * column_sums, tf.qint32),
        min_a=0.0,
        max_a=255.0,
        min_b=-127.0,
        max_b=127.0,
        min_freezed_output=0.0,
        max_freezed_output=0.0,
        Toutput=tf.float32,
        input_quant_mode="MIN_FIRST",
    )


@functools.cache
def onednn_int8_available() -> bool:
    """Whether this process's TensorFlow runs `integer_product` and gets the exact integer product."""
    if keras.backend.backend() != "tensorflow":
        return False
    import numpy as np
    import tensorflow as tf

    shifted = np.array([[0, 128, 255], [7, 200, 1]], np.uint8)
    kernel = np.array([[1, -127], [127, 0], [-3, 5]], np.int8)
    expected = (shifted.astype(np.int64) - 128) @ kernel.astype(np.int64)
    try:
        got = tf.function(integer_product)(tf.constant(shifted), tf.constant(kernel)).numpy()
    except (tf.errors.OpError, ValueError, TypeError):
        return False
    return bool(np.array_equal(got, expected))


def use_onednn_int8(model: keras.layers.Layer) -> int:
    """Makes every int8 `Dense` in `model` (or `model` itself) a `OneDnnInt8Dense`; returns how many.

    Only the class changes: the weights, their values and the layers' configs stay as they are.
    """
    layers = [model, *model._flatten_layers(include_self=False)]
    count = 0
    for layer in layers:
        if type(layer) is keras.layers.Dense and layer.quantization_mode == "int8":
            layer.__class__ = OneDnnInt8Dense
            count += 1
    return count
