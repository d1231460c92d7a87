"""bert_tf: BERT for TensorFlow and Keras 3.

The model code (`bert_tf.layers`, `bert_tf.models`) is backend-independent
Keras 3. Checkpoint loading needs TensorFlow and is imported on first use, so
`import bert_tf` works on the JAX backend too.
"""

import os

from bert_tf import tensorflow_startup

# Before Keras loads TensorFlow (the default backend), so that its C++ start-up notes stay off stderr.
if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
    tensorflow_startup.load_tensorflow_quietly()

from bert_tf.config import PRESETS, BertConfig
from bert_tf.models import (
    BertClassifier,
    BertEncoder,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
    pretraining_losses,
)

__version__ = "0.1.0"

_LAZY = {"load_encoder": "bert_tf.checkpoints", "load_pretrainer": "bert_tf.checkpoints"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")
