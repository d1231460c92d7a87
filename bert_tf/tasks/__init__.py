"""Fine-tuning tasks: data readers, featurization, task models and losses, metrics, and the job.

    from bert_tf.tasks import run_finetuning
    run_finetuning("classification", "runs/sst", train_file="train.tsv", eval_file="dev.tsv",
                   model_dir="models/bert_base", do_train=True, do_eval=True)

Modules: `readers` (TSV/CSV/JSONL, CoNLL, SQuAD JSON, TFDS), `metrics`,
`classification`, `tagging`, `squad` (+ `squad_features`,
`squad_postprocessing`), `inference`, `job`. Imported on first use, so that
`bert_tf.tasks.metrics` and the readers do not load TensorFlow.
"""

import importlib

_LAZY = {
    "run_finetuning": "bert_tf.tasks.job",
    "TASKS": "bert_tf.tasks.job",
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
