"""Training: the distributed custom loop, its schedule, the optimizer, strategies, mixed precision and job set-up.

`TrainingConfig` is the one schedule config (steps or epochs, warm-up steps or proportion, decay, clipping,
checkpoint and evaluation intervals) that both jobs take; `RuntimeConfig` is where and how a job runs.
TensorFlow-specific (tf.distribute, tf.data, tf.train.Checkpoint); the models it trains are backend-independent
Keras, and it knows nothing of BERT: a model names its own checkpoint items, a job passes its loss and data.
The optimizer is the AdamW of BERT's recipe, which any model may use.
"""

from bert_tf.training.determinism import enable_determinism
from bert_tf.training.distribution import (
    STRATEGIES,
    TPUNotFoundError,
    get_strategy,
    is_chief,
    num_workers,
    worker_index,
)
from bert_tf.training.loop import (
    EVAL_RESULTS_NAME,
    SUMMARIES_DIR,
    NonFiniteLossError,
    TrainingConfig,
    TrainingResult,
    check_microbatches,
    default_forward,
    train,
)
from bert_tf.training.optimization import AdamWeightDecay, WarmupPolynomialDecay, create_optimizer
from bert_tf.training.precision import PRECISION_POLICIES, DynamicLossScale, needs_loss_scaling, set_precision_policy
from bert_tf.training.runtime import JobArgumentError, RuntimeConfig, training_runtime
