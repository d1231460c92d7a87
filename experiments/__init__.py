"""Command-line programs (absl mains): flags -> configs -> one library call.

Importing `bert_tf` first loads neither TensorFlow nor Keras; it makes whatever loads TensorFlow later in the
program do so without TensorFlow's C++ start-up notes (bert_tf/tensorflow_startup.py), and leaves a program free to
set TensorFlow's environment first (classify_with_hub sets TF_USE_LEGACY_KERAS=1).
"""

import bert_tf  # noqa: F401
