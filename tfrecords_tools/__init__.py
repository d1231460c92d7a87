"""Command-line tools that make and inspect BERT's TFRecords.

Importing the package loads neither TensorFlow nor `bert_tf`: the helper
processes of `create_pretraining_data` (`instance_workers`) import from it and
must stay small. Each tool imports `bert_tf` before TensorFlow, which keeps
TensorFlow's C++ start-up notes off the console (`bert_tf/tensorflow_startup.py`).
"""
