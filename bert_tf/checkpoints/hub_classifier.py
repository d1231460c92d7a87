"""A classifier fine-tuned through `hub.KerasLayer` on an exported encoder, back as a fine-tuned model directory.

`experiments.classify_with_hub` (TF Hub's notebook program) fine-tunes an encoder SavedModel that
`experiments.export` wrote, with a one-unit sigmoid on its pooled output. Its weights are the encoder's
variables (in the order `bert_tf.export.EncoderModule` saved them: the Keras `BertEncoder`'s trainable
variables) plus that unit. `classifier_from_hub_weights` puts them into a `BertClassifier` with two classes:
`sigmoid(z)` is `softmax([0, z])[1]`, so a head whose first class has a zero kernel and bias gives exactly
the same probabilities. The result is written as `experiments.finetune` writes a classifier
(`bert_tf.jobs.finetuning.files.write_classifier_model_dir`), so `experiments.distill --teacher_dir`,
`experiments.export` and `load_task_model` take it.

    model = classifier_from_hub_weights(config, encoder_weights, kernel, bias, dropout_rate=0.1)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bert_tf.config import BertConfig


def classifier_from_hub_weights(
    config: BertConfig, encoder_weights: Sequence, kernel, bias, dropout_rate: float | None = None
):
    """A two-class `BertClassifier` equal to an encoder with a one-unit sigmoid head.

    Args:
      config: the encoder's `BertConfig` (the export's `assets.extra/bert_config.json`).
      encoder_weights: arrays of the encoder's trainable variables, in `BertEncoder.trainable_variables` order
        (as the encoder SavedModel and `hub.KerasLayer(...).trainable_weights` list them).
      kernel, bias: the sigmoid unit's weights, [hidden_size, 1] and [1].
      dropout_rate: the head's dropout (None: the encoder's).

    Returns:
      The `BertClassifier`; its class 1 probability is the sigmoid's output.

    Raises:
      ValueError: the weights do not fit `config` (another encoder, or another variable order).
    """
    from bert_tf.models import BertClassifier, BertEncoder

    model = BertClassifier(BertEncoder(config), num_classes=2, dropout_rate=dropout_rate)
    variables = model.encoder.trainable_variables
    if len(variables) != len(encoder_weights):
        raise ValueError(
            f"The encoder has {len(variables)} trainable variables; the fine-tuned weights have {len(encoder_weights)}."
        )
    for variable, value in zip(variables, encoder_weights):
        value = np.asarray(value)
        if tuple(variable.shape) != value.shape:
            raise ValueError(f"{variable.path}: shape {tuple(variable.shape)}, fine-tuned weight {value.shape}.")
        variable.assign(value)
    kernel, bias = np.asarray(kernel, np.float32), np.asarray(bias, np.float32)
    if kernel.shape != (config.hidden_size, 1) or bias.shape != (1,):
        raise ValueError(
            f"Expected a one-unit head on {config.hidden_size} features, got {kernel.shape}, {bias.shape}."
        )
    model.classifier.dense.kernel.assign(np.concatenate([np.zeros_like(kernel), kernel], axis=1))
    model.classifier.dense.bias.assign(np.concatenate([np.zeros_like(bias), bias]))
    return model
