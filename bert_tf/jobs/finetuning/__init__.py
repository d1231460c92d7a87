"""The fine-tuning job: `run_finetuning` (train, evaluate and predict with a task plug-in of `bert_tf.tasks`, the
job behind `experiments.finetune`) and the pieces the distillation jobs share with it.

    from bert_tf.jobs.finetuning import FinetuningDataConfig, run_finetuning
    from bert_tf.tasks.task_config import FinetuningTaskConfig

Modules: `config` (`FinetuningDataConfig`: the data files, columns and batch sizes), `inputs` (examples read and
featurized by the task plug-in), `phases` (training, evaluation and prediction), `files` (what a fine-tuned
directory holds) and `job` (`run_finetuning`). Imported on first use: loads no TensorFlow.
"""

from bert_tf.lazy_namespace import lazy_names

_LAZY = {
    "run_finetuning": "bert_tf.jobs.finetuning.job",
    "FinetuningDataConfig": "bert_tf.jobs.finetuning.config",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
