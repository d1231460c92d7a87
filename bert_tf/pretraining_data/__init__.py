"""BERT pretraining data: text corpus -> masked-LM + next-sentence instances -> TFRecords.

    from bert_tf.pretraining_data import InstanceConfig, write_pretraining_data
    write_pretraining_data(["corpus.txt"], ["out/pretrain.tfrecord"], "vocab.txt",
                           InstanceConfig(max_seq_length=128, max_predictions_per_seq=20), num_workers=4)

The algorithm and writer of `bert_tf_create_pretraining_data` (the command line
is `tfrecords_tools/create_pretraining_data.py`). Modules: `text_corpus`
(document-aligned chunks of the corpus), `instances` (numpy: pairs, masking,
the random draws of a chunk), `example_encoder` (numpy -> serialized
`tf.train.Example`s without TensorFlow), `instance_workers` (the helper
processes that make and serialize instances) and `writer` (tokenizes with the
in-graph tokenizer and writes the shards); `beam_pipeline` runs the same chunks
on Apache Beam (the `beam` extra). Importing any of them loads neither
TensorFlow nor Keras; only the writer's process loads TensorFlow, when it
tokenizes and writes (tests/test_tensorflow_startup.py,
tests/test_instance_workers.py).
"""

from bert_tf.lazy_namespace import lazy_names

_LAZY = {
    "write_pretraining_data": "bert_tf.pretraining_data.writer",
    "resolve_output_files": "bert_tf.pretraining_data.writer",
    "WriteSummary": "bert_tf.pretraining_data.writer",
    "InstanceConfig": "bert_tf.pretraining_data.instances",
    "VocabInfo": "bert_tf.pretraining_data.instances",
    "DocumentChunk": "bert_tf.pretraining_data.instances",
    "create_instances": "bert_tf.pretraining_data.instances",
    "CorpusError": "bert_tf.pretraining_data.text_corpus",
    "resolve_input_files": "bert_tf.pretraining_data.text_corpus",
    "HelperError": "bert_tf.pretraining_data.instance_workers",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
