"""tf.data input pipelines (TensorFlow-specific; model code does not import this)."""

from bert_tf.data.dynamic_masking import DynamicMaskingConfig
from bert_tf.data.dynamic_masking import apply_dynamic_masking
from bert_tf.data.dynamic_masking import dynamic_mask_batch
from bert_tf.data.pretraining_dataset import pretraining_dataset
