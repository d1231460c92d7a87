"""A classifier fine-tuned through hub.KerasLayer (encoder variables + a sigmoid unit) as a `BertClassifier`."""

import json

import numpy as np
import pytest

from bert_tf.config import BertConfig

CONFIG = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48)


def _inputs():
    word_ids = np.array([[2, 17, 42, 9, 3], [2, 8, 3, 0, 0]], "int32")
    return {
        "input_word_ids": word_ids,
        "input_mask": (word_ids > 0).astype("int32"),
        "input_type_ids": np.zeros_like(word_ids),
    }


def _source():
    import keras

    from bert_tf.models import BertEncoder

    keras.utils.set_random_seed(3)
    encoder = BertEncoder(CONFIG)
    encoder(_inputs())
    rng = np.random.default_rng(0)
    return encoder, rng.normal(size=(32, 1)).astype("float32"), rng.normal(size=(1,)).astype("float32")


def test_the_two_class_head_gives_the_sigmoid_units_probability():
    from keras import ops

    from bert_tf.checkpoints.hub_classifier import classifier_from_hub_weights

    encoder, kernel, bias = _source()
    weights = [ops.convert_to_numpy(v) for v in encoder.trainable_variables]
    model = classifier_from_hub_weights(CONFIG, weights, kernel, bias)
    pooled = ops.convert_to_numpy(encoder(_inputs())["pooled_output"])
    expected = 1 / (1 + np.exp(-(pooled @ kernel + bias)[:, 0]))
    probabilities = ops.convert_to_numpy(ops.softmax(model(_inputs(), training=False)))
    np.testing.assert_allclose(probabilities[:, 1], expected, atol=1e-6)
    assert not np.allclose(expected, expected[0])  # the two sequences differ, so the check has teeth


def test_weights_of_another_encoder_are_refused():
    from keras import ops

    from bert_tf.checkpoints.hub_classifier import classifier_from_hub_weights

    encoder, kernel, bias = _source()
    weights = [ops.convert_to_numpy(v) for v in encoder.trainable_variables]
    with pytest.raises(ValueError, match="trainable variables"):
        classifier_from_hub_weights(CONFIG, weights[:-1], kernel, bias)
    # The same count in another order: the first mismatching shape is named.
    with pytest.raises(ValueError, match="shape"):
        classifier_from_hub_weights(CONFIG, weights[1:] + weights[:1], kernel, bias)


def test_the_model_directory_is_a_fine_tuned_classifiers(tmp_path):
    from keras import ops

    from bert_tf.checkpoints import load_task_model
    from bert_tf.checkpoints.hub_classifier import classifier_from_hub_weights
    from bert_tf.jobs.finetuning.files import write_classifier_model_dir
    from bert_tf.tasks.classification import ClassificationTask

    encoder, kernel, bias = _source()
    weights = [ops.convert_to_numpy(v) for v in encoder.trainable_variables]
    model = classifier_from_hub_weights(CONFIG, weights, kernel, bias)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(55)]) + "\n")
    model_dir = write_classifier_model_dir(
        str(tmp_path / "model"), model, str(vocab), ["0", "1"], 32, True, text_a_column="text", label_column="label"
    )
    task_config = json.loads((tmp_path / "model" / "task_config.json").read_text())
    assert task_config["task"] == "classification" and task_config["label_list"] == ["0", "1"]
    assert task_config["max_seq_length"] == 32 and task_config["do_lower_case"] is True
    assert task_config["data"]["text_a_column"] == "text"
    loaded = load_task_model(model_dir, ClassificationTask(None, 32, ["0", "1"]).build_model)
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(_inputs(), training=False)),
        ops.convert_to_numpy(model(_inputs(), training=False)),
        atol=1e-6,
    )
