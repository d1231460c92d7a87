"""The fine-tuned hub classifier as a fine-tuned model directory (`experiments.finetune`'s layout)."""

from __future__ import annotations

import os

from absl import logging

from bert_tf.jobs.classify_with_hub.model import DROPOUT_RATE, default_seq_length


def write_task_model_dir(model, export_dir, output_dir, written_labels, texts, text_a_column, label_column):
    """Writes the fine-tuned tf_keras `model` (`model.build_classifier`) as a fine-tuned model directory.

    Two classes, `written_labels` (the labels as the data writes them, in id order), read by
    `experiments.distill --teacher_dir`, `experiments.export` and `load_task_model`. The converted classifier
    must give `model`'s scores on `texts` (a check that the variables were matched in order).
    """
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub

    from bert_tf.checkpoints.hub_classifier import classifier_from_hub_weights
    from bert_tf.config import BertConfig
    from bert_tf.jobs.finetuning.files import write_classifier_model_dir

    extra = os.path.join(export_dir, "encoder", "assets.extra")
    config = BertConfig.from_json_file(os.path.join(extra, "bert_config.json"))
    head = model.get_layer("classifier")
    converted = classifier_from_hub_weights(
        config,
        [v.numpy() for v in model.get_layer("encoder").trainable_weights],
        head.kernel.numpy(),
        head.bias.numpy(),
        dropout_rate=DROPOUT_RATE,
    )
    preprocessing = model.get_layer("preprocessing")
    sample = tf.constant(texts[:32])
    expected = model.predict(sample, verbose=0)[:, 0]
    logits = converted({k: v for k, v in preprocessing(sample).items()}, training=False)
    difference = float(np.max(np.abs(tf.nn.softmax(logits)[:, 1].numpy() - expected)))
    if difference > 1e-4:
        raise RuntimeError(f"The converted classifier's scores differ from the fine-tuned one's by {difference}.")
    preprocessor = hub.load(os.path.join(export_dir, "preprocess"))
    cased, uncased = (preprocessor.tokenize(tf.constant([t])).flat_values.numpy().tolist() for t in ("The", "the"))
    path = write_classifier_model_dir(
        output_dir,
        converted,
        os.path.join(extra, "vocab.txt"),
        written_labels,
        getattr(preprocessing, "seq_length", 0) or default_seq_length(preprocessor),
        do_lower_case=cased == uncased,
        text_a_column=text_a_column,
        label_column=label_column,
    )
    logging.info("Wrote the classifier as a model directory: %s (scores agree to %.1e)", path, difference)
