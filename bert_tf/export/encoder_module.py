"""The object saved as a BERT encoder SavedModel, in TF Hub's reusable-SavedModel form.

`EncoderModule` wraps a Keras `BertEncoder` (and optionally the masked-LM head
of a `BertPretrainer`) in a plain TensorFlow trackable so that the SavedModel
is usable by every loader:

- `hub.KerasLayer(path, trainable=True)` (tf_keras) needs `__call__(inputs,
  training)` traced for both `training` values, plus `variables`,
  `trainable_variables` and `regularization_losses` attributes;
- `keras.layers.TFSMLayer(path, call_endpoint="__call__",
  call_training_endpoint="call_training")` (Keras 3) needs a one-argument
  training function;
- TF Serving needs a flat `serving_default` signature (named tensors in and out).

Keras 3's own `model.export()` gives none of the first two and cannot return
the `encoder_outputs` list, hence this hand-written object.

Packed rows (`bert_tf.data.packed_rows`): `__call__` also takes a fourth input, `input_example_ids`, and the
`packed` signature has it. TF Hub's three-input call and `serving_default` are unchanged.
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.models import ENCODER_INPUT_NAMES, BertEncoder, BertPretrainer
from bert_tf.models.bert_encoder import EXAMPLE_IDS_KEY

MASKED_LM_POSITIONS = "masked_lm_positions"


def encoder_input_spec() -> dict:
    """TensorSpecs of the encoder inputs: int32 [batch, seq_length] each."""
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in ENCODER_INPUT_NAMES}


def packed_input_spec() -> dict:
    """The encoder inputs plus `input_example_ids` int32 [batch, seq_length] (0 padding, 1..k the row's examples)."""
    spec = encoder_input_spec()
    spec[EXAMPLE_IDS_KEY] = tf.TensorSpec([None, None], tf.int32, name=EXAMPLE_IDS_KEY)
    return spec


def mlm_input_spec() -> dict:
    """The encoder inputs plus `masked_lm_positions` int32 [batch, num_predictions]."""
    spec = encoder_input_spec()
    spec[MASKED_LM_POSITIONS] = tf.TensorSpec([None, None], tf.int32, name=MASKED_LM_POSITIONS)
    return spec


def flatten_outputs(outputs: dict) -> dict:
    """Flattens the `encoder_outputs` list into `encoder_outputs_{i}` for signatures."""
    flat = {}
    for key, value in outputs.items():
        if isinstance(value, (list, tuple)):
            flat.update({f"{key}_{i}": item for i, item in enumerate(value)})
        else:
            flat[key] = value
    return flat


def _tf_variables(keras_variables) -> list:
    """The tf.Variables behind Keras 3 variables, de-duplicated, in order."""
    seen, result = set(), []
    for variable in keras_variables:
        value = getattr(variable, "value", variable)
        if not isinstance(value, tf.Variable):
            raise TypeError(
                f"Variable {getattr(variable, 'path', variable)} is not backed by a tf.Variable; "
                "SavedModel export needs the TensorFlow backend."
            )
        if id(value) not in seen:
            seen.add(id(value))
            result.append(value)
    return result


class _ReusableModule(tf.__internal__.tracking.AutoTrackable):
    """Common part of the encoder and masked-LM SavedModel objects.

    Subclasses define `_input_spec()` and `_compute(inputs, training)`. The
    Keras layers they call are kept off the tracked object graph (only their
    tf.Variables are saved), so the SavedModel holds no Keras-specific objects.
    `call_training` and the serving signature call `__call__`, so the model is
    traced once per `training` value and the graph stores it once.
    """

    def __init__(self, keras_variables, trainable_keras_variables):
        super().__init__()
        self.variables = _tf_variables(keras_variables)
        self.trainable_variables = _tf_variables(trainable_keras_variables)
        # BERT has no weight regularizers; hub.KerasLayer still expects the attribute.
        self.regularization_losses = []

    def _keep_untracked(self, name, value):
        object.__setattr__(self, name, value)

    @tf.function
    def __call__(self, inputs, training=False):
        """Runs the model; `training=True` enables dropout."""
        return self._compute(inputs, training)

    @tf.function
    def call_training(self, inputs):
        """`__call__(inputs, training=True)` as a one-argument function (for Keras 3 TFSMLayer)."""
        return self.__call__(inputs, training=True)

    def trace(self) -> None:
        """Traces `__call__` for both `training` values and `call_training`, as saving requires."""
        spec = self._input_spec()
        self.__call__.get_concrete_function(spec, training=False)
        self.__call__.get_concrete_function(spec, training=True)
        self.call_training.get_concrete_function(spec)

    def serving_signature(self, input_spec: dict | None = None):
        """A concrete function with one named tensor per input (`input_spec`, default the module's) and per
        (flattened) output."""

        def serve(**inputs):
            return flatten_outputs(self.__call__(inputs, training=False))

        return tf.function(serve).get_concrete_function(**(input_spec or self._input_spec()))


class MaskedLMModule(_ReusableModule):
    """The `mlm` sub-object: encoder outputs plus `mlm_logits` at `masked_lm_positions`.

    `__call__(inputs, training=False)`: `inputs` holds the encoder inputs and
    `masked_lm_positions` int32 [batch, num_predictions]; returns the encoder's
    outputs plus `mlm_logits` float32 [batch, num_predictions, vocab_size].
    """

    def __init__(self, encoder_module: EncoderModule, encoder: BertEncoder, masked_lm):
        variables = list(encoder.variables) + list(masked_lm.variables)
        trainable = list(encoder.trainable_variables) + list(masked_lm.trainable_variables)
        super().__init__(variables, trainable)
        self._keep_untracked("_encoder_module", encoder_module)
        self._keep_untracked("_masked_lm", masked_lm)

    def _input_spec(self):
        return mlm_input_spec()

    def _compute(self, inputs, training):
        outputs = dict(
            self._encoder_module.__call__({name: inputs[name] for name in ENCODER_INPUT_NAMES}, training=training)
        )
        outputs["mlm_logits"] = tf.cast(
            self._masked_lm(outputs["sequence_output"], inputs[MASKED_LM_POSITIONS], training=training), tf.float32
        )
        return outputs


class EncoderModule(_ReusableModule):
    """The encoder SavedModel object.

    `__call__(inputs, training=False)`: `inputs` is a dict of int32 [batch,
    seq_length] tensors `input_word_ids`, `input_mask`, `input_type_ids`;
    returns float32 `sequence_output` [batch, seq_length, hidden],
    `pooled_output` [batch, hidden], `encoder_outputs` (a list, one
    [batch, seq_length, hidden] per layer) and `default` (= `pooled_output`).

    Packed rows: `inputs` may also hold `input_example_ids` int32 [batch, seq_length] (0 for padding, 1..k
    for the row's examples, each contiguous and starting with its [CLS]). Each example is then computed as
    if alone (its own attention block and position ids, `BertEncoder.packed_outputs`): `sequence_output` and
    `encoder_outputs` per token as above, and `pooled_output` (= `default`) [batch, seq_length // 2, hidden],
    slot j pooling example j + 1's [CLS] (`packed_rows.max_examples_per_row` slots; an empty slot holds the
    pooler's output on zeros, for the caller to mask).

    Args:
      model: a `BertEncoder`, or a `BertPretrainer` whose masked-LM head then
        becomes the `mlm` sub-object (as in TF Hub's BERT SavedModels).
      include_mlm: set False to export only the encoder of a `BertPretrainer`.
    """

    def __init__(self, model: BertEncoder | BertPretrainer, include_mlm: bool = True):
        if isinstance(model, BertPretrainer):
            encoder, masked_lm = model.encoder, (model.masked_lm if include_mlm else None)
        elif isinstance(model, BertEncoder):
            encoder, masked_lm = model, None
        else:
            raise TypeError(f"Expected a BertEncoder or BertPretrainer, got {type(model).__name__}.")
        super().__init__(encoder.variables, encoder.trainable_variables)
        self._keep_untracked("_encoder", encoder)
        if masked_lm is not None:
            self.mlm = MaskedLMModule(self, encoder, masked_lm)

    @property
    def has_mlm(self) -> bool:
        return hasattr(self, "mlm")

    def _input_spec(self):
        return encoder_input_spec()

    def _compute(self, inputs, training):
        return _encode(self._encoder, inputs, training)

    def trace(self) -> None:
        super().trace()
        packed = packed_input_spec()
        self.__call__.get_concrete_function(packed, training=False)
        self.__call__.get_concrete_function(packed, training=True)
        self.call_training.get_concrete_function(packed)
        if self.has_mlm:
            self.mlm.trace()

    def signatures(self) -> dict:
        """`serving_default`, `packed` (and `mlm` when present), flat, for TF Serving and `tf.saved_model.load`."""
        signatures = {
            "serving_default": self.serving_signature(),
            "packed": self.serving_signature(packed_input_spec()),
        }
        if self.has_mlm:
            signatures["mlm"] = self.mlm.serving_signature()
        return signatures


def _encode(encoder: BertEncoder, inputs: dict, training) -> dict:
    missing = [name for name in ENCODER_INPUT_NAMES if name not in inputs]
    if missing:
        raise ValueError(f"Encoder inputs are missing {missing}; expected {list(ENCODER_INPUT_NAMES)}.")
    if EXAMPLE_IDS_KEY in inputs:
        # As many slots as examples of [CLS] [SEP] fit: `bert_tf.data.packed_rows.max_examples_per_row`.
        num_slots = tf.maximum(tf.shape(inputs["input_word_ids"])[1] // 2, 1)
        packed = {name: inputs[name] for name in ENCODER_INPUT_NAMES + (EXAMPLE_IDS_KEY,)}
        outputs = encoder.packed_outputs(packed, num_slots, training=training)
    else:
        outputs = encoder({name: inputs[name] for name in ENCODER_INPUT_NAMES}, training=training)
    sequence_output = tf.cast(outputs["sequence_output"], tf.float32)
    pooled_output = tf.cast(outputs["pooled_output"], tf.float32)
    return {
        "sequence_output": sequence_output,
        "pooled_output": pooled_output,
        "encoder_outputs": [tf.cast(layer, tf.float32) for layer in outputs["encoder_outputs"]],
        "default": pooled_output,
    }
