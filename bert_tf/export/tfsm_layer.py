"""Loading an exported encoder into Keras 3 as a trainable `keras.layers.TFSMLayer`.

Keras 3 cannot read tf_keras/TF Hub objects, so it loads our SavedModels
through `keras.layers.TFSMLayer`. Two details make the plain layer awkward:

- the endpoints must be named: `__call__` for inference and `call_training`
  (dropout on) for `fit`;
- `TFSMLayer` names its Keras variables after the restored `tf.Variable`s with
  `/` replaced but the `:0` suffix kept (Keras 3.15). Keras optimizers build
  slot-variable scopes from those names and reject the `:`, so
  `model.fit` with Adam fails with "... is not a valid scope name".

`load_tfsm_layer` returns a `TFSMLayer` subclass that names each variable after
its checkpoint path without the suffix (`embeddings_word_embeddings_embeddings`).
"""

from __future__ import annotations

import re

import keras

_INVALID_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_.\-]")


def keras_variable_name(tf_variable_name: str) -> str:
    """`"encoder/layer_0/kernel:0"` -> `"encoder_layer_0_kernel"` (a valid Keras 3 name and scope)."""
    name = re.sub(r":\d+$", "", tf_variable_name)
    return _INVALID_NAME_CHARACTERS.sub("_", name)


class BertTFSMLayer(keras.layers.TFSMLayer):
    """`keras.layers.TFSMLayer` whose variable names are usable by Keras optimizers.

    Same arguments as `keras.layers.TFSMLayer`; see `load_tfsm_layer` for the
    defaults that match `bert_tf.export` SavedModels. A frozen layer
    (`trainable=False`) always runs in inference mode, as `hub.KerasLayer`
    does, so a frozen encoder applies no dropout during `fit`.
    """

    def call(self, inputs, training=False, **kwargs):
        return super().call(inputs, training=bool(training) and self.trainable, **kwargs)

    def _add_existing_weight(self, weight):
        # Keras wraps the restored tf.Variable itself (it is not copied), so
        # training the layer trains the variables the SavedModel functions read.
        variable = keras.Variable(
            initializer=weight,
            trainable=weight.trainable,
            dtype=weight.dtype,
            shape=weight.shape,
            name=keras_variable_name(weight.name),
        )
        self._track_variable(variable)


def load_tfsm_layer(
    path: str,
    call_endpoint: str = "__call__",
    call_training_endpoint: str | None = "call_training",
    trainable: bool = True,
    name: str | None = None,
) -> keras.layers.TFSMLayer:
    """An exported encoder (or any SavedModel) as a Keras 3 layer.

    Args:
      path: an encoder SavedModel written by `bert_tf.export`.
      call_endpoint: the function used when not training.
      call_training_endpoint: the function used under `training=True`
        (dropout on); None to always use `call_endpoint`.
      trainable: whether `fit` updates the encoder's weights.
      name: the layer name.

    Returns:
      A layer taking the encoder's input dict and returning its output dict
      (`sequence_output`, `pooled_output`, `encoder_outputs`, `default`).

    Example:
      encoder = load_tfsm_layer("export/encoder")
      inputs = bert_tf.models.encoder_inputs()
      logits = keras.layers.Dense(2)(encoder(inputs)["pooled_output"])
      model = keras.Model(inputs, logits)
    """
    if keras.backend.backend() != "tensorflow":
        raise NotImplementedError(
            f"load_tfsm_layer needs the TensorFlow backend (KERAS_BACKEND=tensorflow); "
            f"the current backend is {keras.backend.backend()!r}."
        )
    layer = BertTFSMLayer(
        path, call_endpoint=call_endpoint, call_training_endpoint=call_training_endpoint, trainable=trainable, name=name
    )
    bad = [w.name for w in layer.weights if _INVALID_NAME_CHARACTERS.search(w.name)]
    if bad:  # A Keras release that no longer calls _add_existing_weight would leave them unrenamed.
        raise RuntimeError(
            f"TFSMLayer kept variable names Keras optimizers reject, e.g. {bad[:3]}; "
            f"this Keras version ({keras.__version__}) needs an update of {__name__}."
        )
    return layer
