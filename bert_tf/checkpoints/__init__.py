"""Checkpoints: the model directory layout, and conversion from TF1 and HuggingFace weights."""

from bert_tf.checkpoints.model_dir import (
    CONFIG_NAME,
    VOCAB_NAME,
    checkpoint_items,
    find_checkpoint,
    has_pretraining_heads,
    load_config,
    load_encoder,
    load_pretrainer,
    restore,
    write_model_dir,
    write_model_files,
)
from bert_tf.checkpoints.huggingface import convert_hf_directory, hf_bert_config, read_hf_directory
from bert_tf.checkpoints.tf1 import convert_tf1_checkpoint, read_tf1_checkpoint
from bert_tf.checkpoints.weight_mapping import CheckpointMismatchError, WeightSpec, convert_weights, weight_specs
