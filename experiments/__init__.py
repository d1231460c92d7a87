# Command-line tools: loading the package first keeps TensorFlow's C++ start-up notes off the console
# (see bert_tf/tensorflow_startup.py).
import bert_tf
