"""Fine-tuning tasks: data readers, featurization, task models and losses, metrics, and the training jobs.

    from bert_tf.tasks import (FinetuningDataConfig, FinetuningModelConfig, FinetuningTaskConfig,
                               run_finetuning)
    run_finetuning(FinetuningTaskConfig("classification"), "runs/sst",
                   FinetuningModelConfig(model_dir="models/bert_base"),
                   FinetuningDataConfig(train_file="train.tsv", eval_file="dev.tsv"),
                   do_train=True, do_eval=True)

Modules: `readers` (TSV/CSV/JSONL, CoNLL, SQuAD JSON, TFDS), `metrics`,
`classification`, `tagging`, `squad` (+ `squad_features`,
`squad_postprocessing`), `inference`, `job` (fine-tuning), `pretraining`
(`run_pretraining`). Imported on first use, so that
`bert_tf.tasks.metrics` and the readers do not load TensorFlow.
"""

import importlib

_LAZY = {
    "run_finetuning": "bert_tf.tasks.job",
    "TASKS": "bert_tf.tasks.job",
    "FinetuningTaskConfig": "bert_tf.tasks.job",
    "FinetuningModelConfig": "bert_tf.tasks.job",
    "FinetuningDataConfig": "bert_tf.tasks.job",
    "FinetuningScheduleConfig": "bert_tf.tasks.job",
    "NonFiniteMetricError": "bert_tf.tasks.job",
    "run_pretraining": "bert_tf.tasks.pretraining",
    "resolve_bert_config": "bert_tf.tasks.pretraining",
    "PretrainingDataConfig": "bert_tf.tasks.pretraining",
    "PretrainingScheduleConfig": "bert_tf.tasks.pretraining",
    "PretrainingArgumentError": "bert_tf.tasks.pretraining",
    "RuntimeConfig": "bert_tf.training.runtime",
    "FinetuningTask": "bert_tf.tasks.base",
    "ClassificationTask": "bert_tf.tasks.classification",
    "TaggingTask": "bert_tf.tasks.tagging",
    "SquadTask": "bert_tf.tasks.squad",
    "TaskTokenizer": "bert_tf.tasks.task_tokenizer",
    "DataError": "bert_tf.tasks.readers",
    "TextExample": "bert_tf.tasks.examples",
    "TaggingExample": "bert_tf.tasks.examples",
    "SquadExample": "bert_tf.tasks.examples",
    "SquadAnswer": "bert_tf.tasks.examples",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bert_tf.tasks' has no attribute {name!r}")
