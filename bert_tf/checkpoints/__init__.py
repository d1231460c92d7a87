"""Checkpoints: the model directory layout, and conversion from TF1 and HuggingFace weights.

Names load on first use, so that `import bert_tf.checkpoints` imports no TensorFlow: only reading and
writing TF2 checkpoints and TF1 conversion need it (`weights_file` is backend-neutral).
"""

from bert_tf.lazy_namespace import lazy_names

_NAMES = {
    "bert_tf.checkpoints.model_dir": (
        "CONFIG_NAME",
        "VOCAB_NAME",
        "checkpoint_items",
        "find_checkpoint",
        "has_pretraining_heads",
        "latest_checkpoint",
        "load_config",
        "load_encoder",
        "load_pretrainer",
        "load_task_model",
        "restore",
        "restore_from_model_dir",
        "write_model_dir",
        "write_model_files",
    ),
    "bert_tf.checkpoints.weights_file": ("WEIGHTS_NAME", "load_weights_file", "write_weights_file"),
    "bert_tf.checkpoints.huggingface": ("convert_hf_directory", "hf_bert_config", "read_hf_directory"),
    "bert_tf.checkpoints.tf1": ("convert_tf1_checkpoint", "read_tf1_checkpoint"),
    "bert_tf.checkpoints.weight_mapping": ("CheckpointMismatchError", "WeightSpec", "convert_weights", "weight_specs"),
}
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names}
__all__ = sorted(_MODULE_OF)

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF)
