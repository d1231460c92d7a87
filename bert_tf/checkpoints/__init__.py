"""Checkpoints: the model directory layout, and conversion from TF1 and HuggingFace weights."""

from bert_tf.checkpoints.model_dir import (CONFIG_NAME, VOCAB_NAME, checkpoint_items, find_checkpoint,
                                           has_pretraining_heads, load_config, load_encoder, load_pretrainer,
                                           restore, write_model_dir)
