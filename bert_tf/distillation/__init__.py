"""Knowledge distillation of fine-tuned BERT models: students, losses, quantized and bfloat16 inference.

    from bert_tf.distillation import evenly_spaced_layers, soft_target_loss
    evenly_spaced_layers(12, 6)  # [0, 2, 4, 7, 9, 11]: the teacher layers that initialise a 6-layer student

Modules: `students` (which teacher layers a student starts from, the copy of the teacher's weights),
`losses` (soft targets at a temperature, hard labels, hidden states through a layer map; backend-free
`keras.ops`), `augmentation` (altered copies of the training texts for the teacher to label), `inference`
(int8 and bfloat16 forms of a task model and their SavedModels). The job is `bert_tf.jobs.distillation`; its
command line `experiments.distill`. Imported on first use: `import bert_tf.distillation` loads neither Keras
nor TensorFlow.
"""

from bert_tf.lazy_namespace import lazy_names

_LAZY = {
    "evenly_spaced_layers": "bert_tf.distillation.students",
    "student_config": "bert_tf.distillation.students",
    "copy_teacher_layers": "bert_tf.distillation.students",
    "soft_target_loss": "bert_tf.distillation.losses",
    "hidden_state_loss": "bert_tf.distillation.losses",
    "DistillationLoss": "bert_tf.distillation.losses",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
