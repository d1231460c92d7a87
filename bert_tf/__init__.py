"""bert_tf: BERT for TensorFlow and Keras 3.

    import bert_tf
    encoder = bert_tf.BertEncoder(bert_tf.BertConfig(...))   # or bert_tf.load_encoder("models/bert_base")

`import bert_tf` loads neither TensorFlow nor Keras: the names below are
imported on first use, so the numpy-only parts (`bert_tf.config`,
`bert_tf.errors`, `bert_tf.pretraining_data`, the plain-Python tokenizer) and
the helper processes of `create_pretraining_data` stay small. The model code
(`bert_tf.layers`, `bert_tf.models`) is backend-independent Keras 3. With
`KERAS_BACKEND=jax`, TensorFlow need not be installed: `load_encoder` and
`load_pretrainer` read a model directory's `weights.safetensors` there, and the
TensorFlow-only parts (TF2 checkpoints, tf.data, tf.distribute, SavedModel
export, the in-graph tokenizer) load only when used (tests/test_jax_model_dir.py
blocks TensorFlow to check it).

Importing the package changes nothing in the importing process: no import
hooks, no file descriptors. The command-line tools quiet TensorFlow's C++
start-up notes in their own processes (`bert_tf/tensorflow_startup.py`); a
notebook may ask for the same with `bert_tf.tensorflow_startup.quiet_first_import()`.
"""

from bert_tf.lazy_namespace import lazy_names

__version__ = "0.1.0"

# name -> the module that defines it, imported on first access.
_LAZY = {
    "PRESETS": "bert_tf.config",
    "BertConfig": "bert_tf.config",
    "BertClassifier": "bert_tf.models",
    "BertEncoder": "bert_tf.models",
    "BertPretrainer": "bert_tf.models",
    "BertSpanLabeler": "bert_tf.models",
    "BertTokenClassifier": "bert_tf.models",
    "pretraining_losses": "bert_tf.models",
    "load_encoder": "bert_tf.checkpoints",
    "load_pretrainer": "bert_tf.checkpoints",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
