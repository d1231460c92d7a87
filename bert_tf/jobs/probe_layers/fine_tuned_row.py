"""The fine-tuned reference row of `bert_tf.jobs.probe_layers`: the whole encoder fine-tuned on the same data.

It runs `bert_tf.jobs.finetuning.run_finetuning` in a child process (`bert_tf.jobs.probe_layers.child_processes`), with
BERT's schedule (10% warm-up, then linear decay) for `finetune_epochs`, at least `finetune_min_steps` steps.
"""

from __future__ import annotations

import math
import os

from absl import logging

from bert_tf.jobs.probe_layers.config import ProbeLayersConfig
from bert_tf.probing import data as data_lib


def finetune_steps(config: ProbeLayersConfig, num_train_items: int) -> int:
    """The reference row's steps: `finetune_epochs` over the training file, at least `finetune_min_steps`."""
    epoch_steps = math.ceil(config.finetune_epochs * num_train_items / config.finetune_batch_size)
    return max(1, epoch_steps, config.finetune_min_steps)


def fine_tuned_accuracy(task, files, num_train_steps, config, output_dir) -> float:
    """Test accuracy of the whole encoder fine-tuned on the task's training file (the reference row)."""
    from bert_tf.tensorflow_startup import load_tensorflow_lean

    load_tensorflow_lean()  # this child needs none of jax, scikit-learn, matplotlib
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    from bert_tf.jobs.finetuning.job import run_finetuning
    from bert_tf.tasks.long_text import LongTextConfig
    from bert_tf.tasks.task_config import FinetuningTaskConfig
    from bert_tf.training import RuntimeConfig, TrainingConfig

    _, train_file, test_file = files
    schedule = TrainingConfig(
        learning_rate=config.finetune_learning_rate,
        num_train_steps=num_train_steps,
        warmup_proportion=0.1,
        num_microbatches=config.finetune_microbatches,
        save_checkpoints_steps=1_000_000,
        keep_checkpoint_max=1,
    )
    batch_sizes = dict(train_batch_size=config.finetune_batch_size, eval_batch_size=64)
    if task == data_lib.TOKEN:
        task_config = FinetuningTaskConfig("token_classification", max_seq_length=config.max_seq_length)
        data = FinetuningDataConfig(train_file=train_file, eval_file=test_file, **batch_sizes)
        metric = "token_accuracy"
    else:
        # Truncated, as the probes' frozen features read the reviews (the default would read long ones in windows).
        truncate = LongTextConfig("truncate")
        task_config = FinetuningTaskConfig("classification", config.max_seq_length, long_text_config=truncate)
        data = FinetuningDataConfig(
            train_file=train_file,
            eval_file=test_file,
            text_a_column="text",
            label_column="label",
            file_format="tsv",
            **batch_sizes,
        )
        metric = "accuracy"
    logging.info("Fine-tuning the whole encoder on the %s task (the reference row)", task)
    results = run_finetuning(
        os.path.join(output_dir, f"fine_tuned_{task}"),
        task_config,
        config.model,
        data,
        schedule,
        RuntimeConfig(seed=config.seed),
        do_train=True,
        do_eval=True,
    )
    return float(results[metric])
