"""`TaskModel`: the base of the models that put heads on a `BertEncoder`.

As keras-hub's `Task`, it serializes the wrapped encoder once for every task
model; as Model Garden's `pretrainer.checkpoint_items`, it names the objects a
checkpoint holds, so the training loop and the model directory need not know
which model they save.
"""

from __future__ import annotations

import types
from collections.abc import Mapping

import keras

ENCODER_KEY = "encoder"
TASK_MODEL_KEY = "task_model"


class TaskModel(keras.Model):
    """A functional model over `self.encoder` (set by the subclass after `super().__init__`).

    Subclasses take the encoder as their first argument, add their own
    constructor arguments to `get_config()`, and may override `checkpoint_items`.
    """

    @property
    def checkpoint_items(self) -> Mapping:
        """The trackables under which the weights are checkpointed, by top-level name.

        Default: the whole model under `task_model`, and its encoder again under
        `encoder`, so a fine-tuned output directory is also a model directory
        for `load_encoder()`.
        """
        return self._checkpoint_mapping({ENCODER_KEY: self.encoder, TASK_MODEL_KEY: self})

    def get_config(self):
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)

    @staticmethod
    def _checkpoint_mapping(items: dict) -> Mapping:
        # Not a dict on purpose: Keras's `.keras` saver walks every attribute and descends into
        # dicts, so it would recurse into the model itself and add paths to the file's layout.
        return types.MappingProxyType(items)
