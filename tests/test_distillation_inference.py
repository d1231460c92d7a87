"""bfloat16 and int8 inference forms (`bert_tf.distillation.inference`) and their SavedModels (`--quantize`)."""

import os

import numpy as np
import pytest

from tests.helpers import export_fixtures
from tests.helpers.absl_flags import run_main


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A tiny random encoder's model directory, exported as bfloat16 and int8 SavedModels."""
    from experiments import export

    root = tmp_path_factory.mktemp("quantized_export")
    model, _ = export_fixtures.write_tiny_model_dir(str(root / "model"), with_heads=False)
    # int8 through the command line; bfloat16 through the library (the encoder alone: half the time).
    argv = [f"--model_dir={root / 'model'}", f"--export_dir={root / 'int8'}", "--max_seq_length=32", "--quantize=int8"]
    assert run_main(export, argv) == 0
    from bert_tf.distillation.inference import inference_form
    from bert_tf.export import export_encoder

    paths = {
        "int8": str(root / "int8" / "encoder"),
        "bfloat16": export_encoder(inference_form(model, "bfloat16"), str(root / "bfloat16")),
    }
    rng = np.random.default_rng(0)
    inputs = {
        "input_word_ids": rng.integers(5, model.config.vocab_size, (4, 12)).astype(np.int32),
        "input_mask": np.ones((4, 12), np.int32),
        "input_type_ids": np.zeros((4, 12), np.int32),
    }
    inputs["input_mask"][1, 6:] = 0
    return dict(root=root, model=model, paths=paths, inputs=inputs)


@pytest.mark.parametrize("form", ["bfloat16", "int8"])
def test_quantized_export_agrees_with_float_within_less_than_the_outputs_spread(exports, form):
    import tensorflow as tf

    from bert_tf.export import load_tfsm_layer

    inputs = exports["inputs"]
    expected = np.asarray(exports["model"](inputs, training=False)["sequence_output"])
    loaded = tf.saved_model.load(exports["paths"][form])
    got = loaded(inputs)["sequence_output"].numpy()
    assert got.dtype == np.float32
    spread = expected.std()
    difference = np.abs(got - expected).max()
    # A cheaper model, not another one: far closer to the float outputs than they are to each other ...
    assert difference < 0.1 * spread, (difference, spread)
    # ... and really rounded (an export of the float model would agree to ~1e-7).
    assert difference > 1e-4
    # Keras 3 loads it too, with the same outputs.
    layer_outputs = load_tfsm_layer(exports["paths"][form], trainable=False)(inputs)
    np.testing.assert_allclose(np.asarray(layer_outputs["sequence_output"]), got, atol=1e-6)
    kinds = {v.dtype for v in loaded.variables}
    assert (tf.int8 in kinds) == (form == "int8") and (tf.bfloat16 in kinds) == (form == "bfloat16")


def test_int8_export_loads_in_hub_keras_layer(exports, tmp_path):
    import tensorflow as tf

    inputs_path, output_path = str(tmp_path / "inputs.npz"), str(tmp_path / "pooled.npy")
    np.savez(inputs_path, **exports["inputs"])
    result = export_fixtures.run_legacy_keras_script(
        "hub_load_check.py", exports["paths"]["int8"], inputs_path, output_path, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = tf.saved_model.load(exports["paths"]["int8"])(exports["inputs"])["pooled_output"].numpy()
    np.testing.assert_allclose(np.load(output_path), expected, atol=1e-6)


def test_inference_form_of_a_task_model_keeps_its_head_and_float_model():
    import keras

    from bert_tf.distillation.inference import inference_form
    from bert_tf.models import BertClassifier, BertEncoder

    keras.utils.set_random_seed(0)
    classifier = BertClassifier(BertEncoder(export_fixtures.tiny_config(50)), num_classes=3)
    before = [w.copy() for w in classifier.get_weights()]
    inputs = {
        "input_word_ids": np.arange(2, 22, dtype=np.int32).reshape(2, 10),
        "input_mask": np.ones((2, 10), np.int32),
        "input_type_ids": np.zeros((2, 10), np.int32),
    }
    expected = np.asarray(classifier(inputs))
    for form in ("bfloat16", "int8"):
        logits = np.asarray(keras.ops.cast(inference_form(classifier, form)(inputs), "float32"))
        assert logits.shape == (2, 3)
        assert np.abs(logits - expected).max() < 0.1 * np.abs(expected).max()
    assert all(np.array_equal(a, b) for a, b in zip(before, classifier.get_weights()))
    with pytest.raises(ValueError, match="float16"):
        inference_form(classifier, "float16")


def _tensorflow_runs_onednn():
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def test_onednn_int8_is_available_exactly_where_tensorflow_runs_onednn():
    import tensorflow as tf

    from bert_tf.distillation.onednn_int8 import _read_onednn_rule, onednn_int8_available, onednn_rule_from_proc

    # TensorFlow's own answer (its default depends on the CPU, e.g. off on AVX2): the kernel works exactly then,
    # and the rule the exported graphs evaluate where they run agrees, in Python and in the graph.
    expected = _tensorflow_runs_onednn()
    assert onednn_int8_available() == expected
    assert onednn_rule_from_proc() == expected
    assert bool(tf.function(_read_onednn_rule)().numpy()) == expected


@pytest.mark.parametrize(
    "environ, cpu_flags, expected",
    [
        ("PATH=/bin", "fpu avx2 fma", False),  # AVX2: TensorFlow leaves oneDNN off
        ("PATH=/bin", "avx2 avx512f avx512_vnni", True),
        ("PATH=/bin", "avx2 amx_tile amx_int8", True),
        ("TF_ENABLE_ONEDNN_OPTS=0\x00PATH=/bin", "avx512f avx512_vnni", False),
        ("PATH=/bin\x00TF_ENABLE_ONEDNN_OPTS=true", "avx2", True),
        ("MY_TF_ENABLE_ONEDNN_OPTS=0", "avx512_vnni", True),  # another variable's name ends alike
        ("", "", False),  # no /proc: not Linux
    ],
)
def test_onednn_rule_is_tensorflows_default_and_setting_in_python_and_in_the_graph(environ, cpu_flags, expected):
    import tensorflow as tf

    from bert_tf.distillation import onednn_int8

    cpuinfo = f"processor\t: 0\nflags\t\t: {cpu_flags}\n" if cpu_flags else ""

    def in_python(pattern, text):
        import re

        return re.fullmatch(pattern, text) is not None

    assert onednn_int8._rule(environ, cpuinfo, in_python) == expected
    in_graph = onednn_int8._rule(
        tf.constant(environ),
        tf.constant(cpuinfo),
        lambda pattern, text: tf.strings.regex_full_match(text, pattern),
        (tf.logical_and, tf.logical_or, tf.logical_not),
    )
    assert bool(in_graph.numpy()) == expected


@pytest.mark.parametrize("kernel", ["where_this_process_runs_it", "float32_form"])
def test_onednn_int8_dense_computes_keras_int8_dense_in_both_forms(kernel, monkeypatch):
    import keras
    import tensorflow as tf

    from bert_tf.distillation import onednn_int8

    if kernel == "float32_form":  # what an AVX2 server (oneDNN off) computes
        monkeypatch.setattr(onednn_int8, "onednn_enabled", lambda: tf.constant(False))
    keras.utils.set_random_seed(0)
    dense = keras.layers.Dense(24, activation="gelu")
    x = np.random.default_rng(0).normal(size=(3, 5, 40)).astype(np.float32)
    x[0, 0] *= 30  # one token of large values: the input is quantized per token
    float_outputs = np.asarray(dense(x))
    dense.quantize("int8")
    keras_int8 = np.asarray(dense(x))
    assert onednn_int8.use_onednn_int8(dense) == 1 and type(dense) is onednn_int8.OneDnnInt8Dense
    for outputs in (np.asarray(dense(x)), tf.function(dense)(x).numpy()):  # eagerly and traced
        # Keras' int8 numbers (the same integer products, de-scaled alike) ...
        np.testing.assert_allclose(outputs, keras_int8, rtol=1e-5, atol=1e-5)
        # ... which are rounded: int8, not float32 under another name.
        assert np.abs(outputs - float_outputs).max() > 1e-3
    assert dense.get_config() == keras.layers.Dense.from_config(dense.get_config()).get_config()


def test_int8_export_carries_both_forms_of_every_product(exports):
    import tensorflow as tf

    loaded = tf.saved_model.load(exports["paths"]["int8"])
    graph = loaded.signatures["serving_default"].graph.as_graph_def()
    ops = [node.op for function in graph.library.function for node in function.node_def]
    # The tiny encoder's 2 layers: query, key, value, attention output, intermediate, output; and the pooler:
    # each product on oneDNN's kernel and as a float32 product of the same integers, whatever this CPU is.
    assert ops.count("QuantizedMatMulWithBiasAndDequantize") == 2 * 6 + 1
    assert ops.count("If") + ops.count("StatelessIf") >= 2 * 6 + 1


def test_int8_export_gives_the_same_outputs_where_tensorflow_runs_without_onednn(exports, tmp_path):
    import subprocess
    import sys

    import tensorflow as tf

    # The export was made here (oneDNN's kernel in use where this CPU has it); an AVX2 server, where TensorFlow
    # leaves oneDNN off, is simulated by switching it off in a fresh process.
    inputs_path, output_path = str(tmp_path / "inputs.npz"), str(tmp_path / "outputs.npz")
    np.savez(inputs_path, **exports["inputs"])
    script = (
        "import sys, numpy as np, tensorflow as tf\n"
        "from tensorflow.python.util import _pywrap_util_port\n"
        "assert not _pywrap_util_port.IsMklEnabled()\n"
        "outputs = tf.saved_model.load(sys.argv[1])(dict(np.load(sys.argv[2])))\n"
        "np.savez(sys.argv[3], **{k: v.numpy() for k, v in outputs.items() if k != 'encoder_outputs'})\n"
    )
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", script, exports["paths"]["int8"], inputs_path, output_path],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    here = tf.saved_model.load(exports["paths"]["int8"])(exports["inputs"])
    there = np.load(output_path)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(there[key], here[key].numpy(), rtol=1e-5, atol=1e-5)


def test_distillation_modules_docstring_examples_run():
    import doctest

    from bert_tf.distillation import inference, losses, onednn_int8, students

    for module in (students, losses, inference, onednn_int8):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted >= 2 and result.failed == 0, module.__name__
