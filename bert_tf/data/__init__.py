"""Input pipelines and the data they read: tf.data readers of pretraining TFRecords (and dynamic masking),
length-bucketed batches, packed rows of several examples (`packed_rows`), the fine-tuning examples, data
readers and data source. Every pipeline ends in `bert_tf.prefetching` (prefetch without tf.data's autotuning thread,
whose wait stalled each iterator's destruction).

Imported on first use: the readers and the length buckets load no TensorFlow (the tf.data functions import it
when called), so the probing tool's coordinating process and the data writer's helpers stay light.
"""

from bert_tf.lazy_namespace import lazy_names

_LAZY = {
    "TextExample": "bert_tf.data.examples",
    "TaggingExample": "bert_tf.data.examples",
    "SquadExample": "bert_tf.data.examples",
    "SquadAnswer": "bert_tf.data.examples",
    "DynamicMaskingConfig": "bert_tf.data.dynamic_masking",
    "apply_dynamic_masking": "bert_tf.data.dynamic_masking",
    "dynamic_mask_batch": "bert_tf.data.dynamic_masking",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
