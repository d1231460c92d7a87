"""Training: the distributed custom loop, its schedule, the optimizer, strategies, mixed precision and job set-up.

`TrainingConfig` (`config`) is the one schedule config (steps or epochs, warm-up steps or proportion, decay,
clipping, checkpoint and evaluation intervals) that the training jobs take; `RuntimeConfig` (`runtime`) is where
and how a job runs; `loop` is the loop itself.
TensorFlow-specific (tf.distribute, tf.data, tf.train.Checkpoint); the models it trains are backend-independent
Keras, and it knows nothing of BERT: a model names its own checkpoint items, a job passes its loss and data.
The optimizer is the AdamW of BERT's recipe, which any model may use.

Importing the package loads no TensorFlow (its names are imported on first use), so the backend-free
`bert_tf.training.schedule` serves the Keras `fit` paths too.
"""

from bert_tf.lazy_namespace import lazy_names

# name -> the module that defines it, imported on first access.
_LAZY = {
    "AdamWeightDecay": "bert_tf.training.optimization",
    "DynamicLossScale": "bert_tf.training.precision",
    "EVAL_RESULTS_NAME": "bert_tf.training.loop",
    "JobArgumentError": "bert_tf.training.runtime",
    "NonFiniteLossError": "bert_tf.training.loop",
    "PRECISION_POLICIES": "bert_tf.training.config",
    "PreemptionWatcher": "bert_tf.training.preemption",
    "RuntimeConfig": "bert_tf.training.runtime",
    "STRATEGIES": "bert_tf.training.distribution",
    "SUMMARIES_DIR": "bert_tf.training.loop",
    "TPUNotFoundError": "bert_tf.training.distribution",
    "TrainingConfig": "bert_tf.training.config",
    "TrainingResult": "bert_tf.training.loop",
    "WarmupPolynomialDecay": "bert_tf.training.optimization",
    "check_microbatches": "bert_tf.training.config",
    "create_optimizer": "bert_tf.training.optimizers",
    "default_forward": "bert_tf.training.loop",
    "enable_determinism": "bert_tf.training.determinism",
    "get_strategy": "bert_tf.training.distribution",
    "is_chief": "bert_tf.training.distribution",
    "needs_loss_scaling": "bert_tf.training.precision",
    "num_workers": "bert_tf.training.distribution",
    "set_precision_policy": "bert_tf.training.precision",
    "train": "bert_tf.training.loop",
    "training_runtime": "bert_tf.training.runtime",
    "worker_index": "bert_tf.training.distribution",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
