"""Fine-tuning task plug-ins: what each task type adds to the encoder (model head, loss, featurization, metrics).

    from bert_tf.tasks import ClassificationTask, TaskTokenizer
    task = ClassificationTask(TaskTokenizer("vocab.txt"), max_seq_length=128, labels=["neg", "pos"])
    features = task.featurize(examples, training=True)

A plug-in is a `FinetuningTask` (`base`) registered under its `--task` names (`registry`), with its config
class (`task_config.FinetuningTaskConfig` or a subclass): `classification` (single sentences, pairs,
regression), `tagging` (token classification), `squad` (+ `squad_features`, `squad_postprocessing`); with
`metrics` and `inference`. Adding a task is one new module (docs/finetuning.md, "Adding a task").
The job that runs them is `bert_tf.jobs.finetuning.job`; the examples they featurize (`bert_tf.data.examples`) and the
readers that make them (`bert_tf.data.finetuning_readers`) are in `bert_tf.data`, below the tasks. Imported on
first use, so that `bert_tf.tasks.metrics` does not load TensorFlow.
"""

from bert_tf.lazy_namespace import lazy_names

_LAZY = {
    "FinetuningTask": "bert_tf.tasks.base",
    "FinetuningTaskConfig": "bert_tf.tasks.task_config",
    "SquadConfig": "bert_tf.tasks.squad",
    "register_task": "bert_tf.tasks.registry",
    "task_class": "bert_tf.tasks.registry",
    "task_names": "bert_tf.tasks.registry",
    "ClassificationTask": "bert_tf.tasks.classification",
    "TaggingTask": "bert_tf.tasks.tagging",
    "SquadTask": "bert_tf.tasks.squad",
    "TaskTokenizer": "bert_tf.tasks.task_tokenizer",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
