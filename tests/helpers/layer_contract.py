"""The contract every layer and model of bert_tf keeps, after keras-hub's `run_layer_test`/`run_backbone_test`.

A `Case` names a factory and real inputs; `run_layer_test(case, tmp_dir)` checks, on the
TensorFlow backend:

* config: `get_config()` is JSON-serializable and `from_config` rebuilds an equal config;
* build: a symbolic call builds every weight, and an eager call adds none;
* shapes: `compute_output_shape` and the symbolic output match the real output;
* mixed precision: under `mixed_bfloat16` the weights stay float32 and every output has
  the case's dtype (bfloat16 hidden states, float32 logits);
* saving: a `.keras` save and reload gives the same outputs.

`run_on_jax(saved)` then loads the `.keras` files of every case in ONE `KERAS_BACKEND=jax`
subprocess (the backend is fixed when Keras is imported) and compares with the TensorFlow outputs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import keras
import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# float32 on two backends: different kernels, same maths; tiny models keep the error near 1e-7.
JAX_TOLERANCE = 1e-5
SAVE_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class Case:
    """One layer or model under test.

    Attributes:
      name: id in test reports.
      make: builds a fresh instance under the global dtype policy.
      inputs: positional call arguments (numpy); a model takes one dict.
      mixed_output_dtype: the dtype of every output under `mixed_bfloat16`.
      config_objects: objects `from_config` needs that `get_config` leaves out
        (`MaskedLMHead`'s shared embedding): name -> factory.
      saving: False where the instance cannot be saved alone (it is saved as part
        of a model instead).
    """

    name: str
    make: Callable[[], keras.layers.Layer]
    inputs: tuple
    mixed_output_dtype: str
    config_objects: dict = dataclasses.field(default_factory=dict)
    saving: bool = True


def _shapes(structure) -> list:
    return [tuple(np.shape(x)) for x in keras.tree.flatten(structure)]


def _flatten_shapes(structure) -> list:
    # keras.tree would walk into a shape tuple; a shape is a tuple of ints and Nones.
    if isinstance(structure, (tuple, list)) and all(d is None or isinstance(d, int) for d in structure):
        return [tuple(structure)]
    if isinstance(structure, dict):
        return [s for key in sorted(structure) for s in _flatten_shapes(structure[key])]
    return [s for item in structure for s in _flatten_shapes(item)]


def _assert_shapes_match(expected, actual: list, what: str) -> None:
    expected = _flatten_shapes(expected)
    assert len(expected) == len(actual) and all(
        len(e) == len(a) and all(d is None or d == r for d, r in zip(e, a)) for e, a in zip(expected, actual)
    ), f"{what} {expected} != real output shapes {actual}"


def _symbolic(inputs):
    # Batch and sequence length unknown, as inside a model: every dimension of ids, masks and
    # positions, all but the feature size of float states.
    def spec(x):
        x = np.asarray(x)
        shape = (None,) * x.ndim if np.issubdtype(x.dtype, np.integer) else (None,) * (x.ndim - 1) + x.shape[-1:]
        return keras.KerasTensor(shape, dtype=str(x.dtype))

    return keras.tree.map_structure(spec, inputs)


def check_config(case: Case) -> None:
    layer = case.make()
    config = layer.get_config()
    json.dumps(keras.saving.serialize_keras_object(layer))
    objects = {name: factory() for name, factory in case.config_objects.items()}
    clone = type(layer).from_config({**config, **objects})
    assert type(clone) is type(layer)
    assert clone.get_config() == config


def check_build_and_shapes(case: Case) -> None:
    layer = case.make()
    symbolic = layer(*_symbolic(case.inputs))
    assert layer.built, f"{case.name}: not built by a symbolic call"
    weights = [w.path for w in layer.weights]
    outputs = layer(*case.inputs)
    assert [w.path for w in layer.weights] == weights, f"{case.name}: the call created weights the build did not"

    actual = _shapes(outputs)
    input_shapes = keras.tree.map_structure(lambda x: tuple(np.shape(x)), case.inputs)
    _assert_shapes_match(layer.compute_output_shape(*input_shapes), actual, "compute_output_shape")
    _assert_shapes_match(_shapes(symbolic), actual, "symbolic output shapes")


def check_mixed_precision(case: Case) -> None:
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = case.make()
        outputs = layer(*case.inputs)
    finally:
        keras.config.set_dtype_policy(previous)
    assert all(w.dtype == "float32" for w in layer.weights), f"{case.name}: weights not float32"
    dtypes = {keras.backend.standardize_dtype(x.dtype) for x in keras.tree.flatten(outputs)}
    assert dtypes == {case.mixed_output_dtype}, f"{case.name} outputs {dtypes} under mixed_bfloat16"


def _as_model(case: Case):
    """(model, its call input): the instance if it is a model, else a functional model around it."""
    layer = case.make()
    if isinstance(layer, keras.Model):
        (inputs,) = case.inputs
        return layer, inputs
    symbolic = [keras.Input(shape=np.shape(x)[1:], dtype=str(np.asarray(x).dtype)) for x in case.inputs]
    return keras.Model(symbolic, layer(*symbolic)), list(case.inputs)


def save_case(case: Case, directory: str) -> tuple[str, str]:
    """Saves `case` as `.keras`, its inputs and outputs as `.npz`; returns both paths."""
    model, inputs = _as_model(case)
    outputs = [np.asarray(y) for y in keras.tree.flatten(model(inputs))]
    model_path = os.path.join(directory, f"{case.name}.keras")
    data_path = os.path.join(directory, f"{case.name}.npz")
    model.save(model_path)
    named = inputs.items() if isinstance(inputs, dict) else ((str(i), x) for i, x in enumerate(inputs))
    np.savez(data_path, **{f"in.{name}": x for name, x in named}, **{f"out.{i}": y for i, y in enumerate(outputs)})
    return model_path, data_path


def _load_case(data_path: str):
    data = np.load(data_path)
    names = [key[3:] for key in data.files if key.startswith("in.")]
    if all(name.isdigit() for name in names):
        inputs = [data[f"in.{i}"] for i in range(len(names))]
    else:
        inputs = {name: data[f"in.{name}"] for name in names}
    outputs = [data[f"out.{i}"] for i in range(len(data.files) - len(names))]
    return inputs, outputs


def check_saving(model_path: str, data_path: str) -> None:
    reloaded = keras.models.load_model(model_path)
    inputs, expected = _load_case(data_path)
    actual = [np.asarray(y) for y in keras.tree.flatten(reloaded(inputs))]
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=SAVE_TOLERANCE, atol=SAVE_TOLERANCE)


def run_layer_test(case: Case, directory: str) -> tuple[str, str] | None:
    """Every TensorFlow-side check of `case`; returns its saved files (None where `case.saving` is off)."""
    check_config(case)
    check_build_and_shapes(case)
    check_mixed_precision(case)
    if not case.saving:
        return None
    saved = save_case(case, directory)
    check_saving(*saved)
    return saved


_JAX_SCRIPT = textwrap.dedent("""
    import json
    import keras
    import numpy as np
    assert keras.backend.backend() == "jax", keras.backend.backend()
    import bert_tf.layers, bert_tf.models  # registers the serializable classes (`import bert_tf` alone is lazy)
    from tests.helpers.layer_contract import _load_case
    differences = {{}}
    for name, (model_path, data_path) in json.loads({saved!r}).items():
        model = keras.models.load_model(model_path)
        inputs, expected = _load_case(data_path)
        actual = [np.asarray(y) for y in keras.tree.flatten(model(inputs))]
        if [a.shape for a in actual] != [e.shape for e in expected]:
            differences[name] = "shapes %s != %s" % ([a.shape for a in actual], [e.shape for e in expected])
        else:
            differences[name] = max(float(np.abs(a.astype("float64") - e).max()) for a, e in zip(actual, expected))
    print("RESULT" + json.dumps(differences))
""")


def run_on_jax(saved: dict, timeout: int = 240) -> dict:
    """Loads each saved case on the JAX backend in one subprocess; returns name -> max |JAX - TF| (or an error)."""
    script = _JAX_SCRIPT.format(saved=json.dumps(saved))
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.split("RESULT", 1)[1])
