"""Command-line programs (absl mains): flags -> configs -> one library call.

Each program's `run` goes through `bert_tf.cli.run`, which keeps TensorFlow's C++ start-up notes off the console
(bert_tf/tensorflow_startup.py). Importing a program loads neither TensorFlow nor Keras, which leaves it free to set
TensorFlow's environment first (classify_with_hub sets TF_USE_LEGACY_KERAS=1).
"""
