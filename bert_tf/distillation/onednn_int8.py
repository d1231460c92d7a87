"""The int8 form's matrix products on oneDNN's uint8 x int8 kernel where TensorFlow runs oneDNN, exact elsewhere.

    from bert_tf.distillation.onednn_int8 import use_onednn_int8
    model.quantize("int8")
    use_onednn_int8(model)   # the same numbers; oneDNN's int8 kernel wherever the process has it

Keras' int8 `Dense` quantizes its input per token (abs-max, q in [-127, 127]) and multiplies it by its int8
kernel with `ops.matmul`, which TensorFlow's CPU runs on its generic integer `MatMul`: slower than float32.
oneDNN has fast int8 kernels (AVX-512 VNNI, AMX) for *unsigned* activations times signed weights, behind
`QuantizedMatMulWithBiasAndDequantize`; `OneDnnInt8Dense` computes Keras' product through it (the input shifted
by 128 into uint8, the shift's share subtracted through the op's int32 bias) and de-scales as Keras does.

That op runs only where TensorFlow switched oneDNN on, which it does by default only on some CPUs
(`bert_tf.cpu_features.ONEDNN_DEFAULT_FLAGS`; an AVX2 server has it off) and never with
`TF_ENABLE_ONEDNN_OPTS=0`. So the choice is made where the model runs, not where it was exported: every
product carries both forms, and `onednn_enabled()` picks one at each call, in the graph; the other form is
the same integers as a float32 product (exact while a sum stays below 2**24, within float32 rounding beyond).
A SavedModel of the int8 form therefore loads and runs on every CPU. Inference only (no gradient).
"""

from __future__ import annotations

import functools
import re
import weakref

import keras

from bert_tf.cpu_features import ONEDNN_DEFAULT_FLAGS


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
    >>> use_onednn_int8(dense)
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
        quantized = tf.round(rows * input_scale)
        product = tf.cond(
            onednn_enabled(),
            lambda: integer_product(tf.cast(quantized + 128.0, tf.uint8), kernel),
            lambda: tf.matmul(quantized, tf.cast(kernel, quantized.dtype)),
        )
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
        with tf.init_scope():  # eagerly, also when first asked while a graph is being traced
            got = tf.function(integer_product)(tf.constant(shifted), tf.constant(kernel)).numpy()
    except (tf.errors.OpError, ValueError, TypeError):
        return False
    return bool(np.array_equal(got, expected))


_ENABLED_IN_GRAPH = weakref.WeakKeyDictionary()


def onednn_enabled():
    """A scalar bool tensor: whether the process running the graph has TensorFlow's oneDNN on.

    TensorFlow's own rule, from what a graph can read where it runs: `TF_ENABLE_ONEDNN_OPTS` in the process's
    environment (`/proc/self/environ`; "0"/"false" off, "1"/"true" on), else on for the CPUs of
    `ONEDNN_DEFAULT_FLAGS` (`/proc/cpuinfo`); without /proc (not Linux) False. A process that set the variable
    from Python (`os.environ`, invisible in /proc) traces the constant False instead, the form that runs
    everywhere. Eagerly, the probe's answer. Read once per traced graph.
    """
    import tensorflow as tf

    if tf.executing_eagerly():
        return tf.constant(onednn_int8_available())
    if onednn_rule_from_proc() and not onednn_int8_available():
        return tf.constant(False)
    graph = tf.compat.v1.get_default_graph()
    if graph not in _ENABLED_IN_GRAPH:
        _ENABLED_IN_GRAPH[graph] = _read_onednn_rule()
    return _ENABLED_IN_GRAPH[graph]


_ENVIRON_SETTING = "(?is).*(^|\\x00)TF_ENABLE_ONEDNN_OPTS=({})(\\x00|$).*"
_CPU_FLAGS = "(?s).*\\b({})\\b.*".format("|".join(ONEDNN_DEFAULT_FLAGS))


def onednn_rule_from_proc() -> bool:
    """`onednn_enabled()`'s rule evaluated in Python, in this process (for tests and the trace-time check)."""
    return _rule(
        _read_proc("/proc/self/environ"),
        _read_proc("/proc/cpuinfo"),
        lambda pattern, text: re.fullmatch(pattern, text) is not None,
    )


def _read_proc(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _rule(environ, cpuinfo, matches, logical=(lambda a, b: a and b, lambda a, b: a or b, lambda a: not a)):
    both, either, negate = logical
    off = matches(_ENVIRON_SETTING.format("0|false"), environ)
    on = matches(_ENVIRON_SETTING.format("1|true"), environ)
    return both(negate(off), either(on, matches(_CPU_FLAGS, cpuinfo)))


def _read_onednn_rule():
    import tensorflow as tf

    def read(path):
        exists = tf.size(tf.io.matching_files(path)) > 0
        return tf.cond(exists, lambda: tf.io.read_file(path), lambda: tf.constant(""))

    def matches(pattern, text):
        return tf.strings.regex_full_match(text, pattern)

    logical = (tf.logical_and, tf.logical_or, tf.logical_not)
    return _rule(read("/proc/self/environ"), read("/proc/cpuinfo"), matches, logical)


def use_onednn_int8(model: keras.layers.Layer) -> int:
    """Makes every int8 `Dense` in `model` (or `model` itself) a `OneDnnInt8Dense`; returns how many.

    Safe on every machine (each layer picks its kernel where it runs). Only the class changes: the weights,
    their values and the layers' configs stay as they are.
    """
    layers = [model, *model._flatten_layers(include_self=False)]
    count = 0
    for layer in layers:
        if type(layer) is keras.layers.Dense and layer.quantization_mode == "int8":
            layer.__class__ = OneDnnInt8Dense
            count += 1
    return count
