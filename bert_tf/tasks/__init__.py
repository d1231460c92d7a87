"""Fine-tuning task plug-ins: what each task type adds to the encoder (model head, loss, featurization, metrics).

    from bert_tf.tasks import ClassificationTask, TaskTokenizer
    task = ClassificationTask(TaskTokenizer("vocab.txt"), max_seq_length=128, labels=["neg", "pos"])
    features = task.featurize(examples, training=True)

A plug-in is a `FinetuningTask` (`base`): `classification` (single sentences, pairs, regression), `tagging`
(token classification), `squad` (+ `squad_features`, `squad_postprocessing`); with `metrics`, `inference`
and the examples they read (`examples`). The job that runs them is `bert_tf.jobs.finetune` and the data
readers are `bert_tf.data.finetuning_readers`. Imported on first use, so that `bert_tf.tasks.metrics` does
not load TensorFlow.

The jobs' names (`run_finetuning`, `run_pretraining`, their configs, `DataError`) are still importable from
here for one release; import them from `bert_tf.jobs` (and `bert_tf.errors`).
"""

from bert_tf.jobs import _LAZY as _JOB_NAMES
from bert_tf.lazy_namespace import lazy_names

_LAZY = {
    "FinetuningTask": "bert_tf.tasks.base",
    "ClassificationTask": "bert_tf.tasks.classification",
    "TaggingTask": "bert_tf.tasks.tagging",
    "SquadTask": "bert_tf.tasks.squad",
    "TaskTokenizer": "bert_tf.tasks.task_tokenizer",
    "TextExample": "bert_tf.tasks.examples",
    "TaggingExample": "bert_tf.tasks.examples",
    "SquadExample": "bert_tf.tasks.examples",
    "SquadAnswer": "bert_tf.tasks.examples",
    # Aliases of the names that moved to bert_tf.jobs and bert_tf.errors; kept for one release.
    **{name: module for name, module in _JOB_NAMES.items() if name != "TrainingConfig"},
    "DataError": "bert_tf.errors",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
