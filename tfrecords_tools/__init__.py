"""The data command lines: `bert_tf_create_pretraining_data`, `bert_tf_inspect_tfrecords`, `bert_tf_make_vocab`.

Thin absl mains (flags -> one library call). The library behind them is in the package: the writer in
`bert_tf.pretraining_data`, the inspector in `bert_tf.pretraining_data.inspection`, the vocabulary learner in
`bert_tf.tokenization.vocab_learning`. Importing `bert_tf` here, before any tool's own imports, makes the first
import of TensorFlow quiet (bert_tf/tensorflow_startup.py); it loads neither TensorFlow nor Keras.
"""

import bert_tf  # noqa: F401
