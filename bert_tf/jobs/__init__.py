"""The jobs as library functions that take configs; `experiments/` holds their command lines.

    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs import FinetuningDataConfig, FinetuningTaskConfig, run_finetuning

Packages and modules: `finetuning` (`run_finetuning`: train, evaluate and predict with a task plug-in of
`bert_tf.tasks`; its pieces, shared with the distillation jobs, in `config`, `inputs`, `phases` and `files`),
`pretrain` (`run_pretraining`: masked LM + next sentence prediction from TFRecords), `distillation`
(`run_distillation`: a fine-tuned teacher trains a smaller student; `run_frontier`: students, int8 and bfloat16
forms, accuracy against speed), `extract_features` (`run_feature_extraction`: activations of chosen layers, per
token or pooled per line), `probe_layers` (`run_probe_layers`: which layer's frozen features serve a task best),
`keras_fit` (`run_keras_fit`: Keras `fit` on any backend, without TensorFlow) and `classify_with_hub`
(`run_classify_with_hub`: TF Hub's notebook through `hub.KerasLayer`). Each resolves its model's files with
`bert_tf.checkpoints.model_source`.
Each `run_*` takes its output location first, then its validated config dataclasses, then
`training_config` (one `bert_tf.training.TrainingConfig`; batch sizes are in the data configs) and `runtime`
(a `RuntimeConfig`), then its phase switches as keywords, and raises the types of `bert_tf.errors`;
`DEFAULT_SEED` is every job's default seed. Imported on first use, so `import bert_tf.jobs` loads no TensorFlow.
"""

from bert_tf.lazy_namespace import lazy_names

DEFAULT_SEED = 42  # every job's default --seed: one default, so runs of different jobs are reproducible alike

_LAZY = {
    "run_finetuning": "bert_tf.jobs.finetuning.job",
    "FinetuningTaskConfig": "bert_tf.tasks.task_config",
    "FinetuningDataConfig": "bert_tf.jobs.finetuning.config",
    "run_pretraining": "bert_tf.jobs.pretrain",
    "resolve_bert_config": "bert_tf.jobs.pretrain",
    "PretrainingDataConfig": "bert_tf.jobs.pretrain",
    "run_feature_extraction": "bert_tf.jobs.extract_features",
    "FeatureExtractionConfig": "bert_tf.jobs.extract_features",
    "run_probe_layers": "bert_tf.jobs.probe_layers",
    "ProbeLayersConfig": "bert_tf.jobs.probe_layers",
    "TrainingConfig": "bert_tf.training",
    "RuntimeConfig": "bert_tf.training",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
