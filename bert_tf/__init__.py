"""bert_tf: BERT for TensorFlow and Keras 3.

The model code (`bert_tf.layers`, `bert_tf.models`) is backend-independent
Keras 3. With `KERAS_BACKEND=jax`, `import bert_tf` imports no TensorFlow (it
need not be installed): `load_encoder` and `load_pretrainer` read a model
directory's `weights.safetensors` there, and the TensorFlow-only parts (TF2
checkpoints, tf.data, tf.distribute, SavedModel export, the in-graph tokenizer)
load only when used (tests/test_jax_model_dir.py blocks TensorFlow to check it).
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
