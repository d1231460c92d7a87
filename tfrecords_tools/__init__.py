"""The data command lines: `bert_tf_create_pretraining_data`, `bert_tf_inspect_tfrecords`, `bert_tf_make_vocab`.

Thin absl mains (flags -> one library call). The library behind them is in the package: the writer in
`bert_tf.pretraining_data`, the inspector in `bert_tf.pretraining_data.inspection`, the vocabulary learner in
`bert_tf.tokenization.vocab_learning`. Each tool's `run` goes through `bert_tf.cli.run`, which keeps TensorFlow's
start-up notes off the console (bert_tf/tensorflow_startup.py).
"""
