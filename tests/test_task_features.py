"""What the jobs ask of a task plug-in's features and head (`FinetuningTask.num_features`, `first_features`,
`with_unlabeled`, `with_columns`, `head`): classification's column dict and tagging's `TaggingFeatures`."""

import numpy as np
import pytest

from bert_tf.tasks.base import LABEL_WEIGHT_KEY
from bert_tf.tasks.classification import ClassificationTask
from bert_tf.tasks.tagging import IGNORED_LABEL, TaggingFeatures, TaggingTask
from tests.fixtures.finetune import synthetic


def _classification_features(texts, labels=None) -> dict:
    features = {"text_a": np.array(texts, dtype=object)}
    if labels is not None:
        features["label"] = np.array(labels, np.int32)
    return features


def _tagging_features(num_rows, seq_length, labelled) -> TaggingFeatures:
    word_ids = np.arange(num_rows * seq_length, dtype=np.int32).reshape(num_rows, seq_length) + 1
    inputs = {
        "input_word_ids": word_ids,
        "input_mask": np.ones_like(word_ids),
        "input_type_ids": np.zeros_like(word_ids),
    }
    if labelled:
        inputs["label_ids"] = np.ones_like(word_ids)
    return TaggingFeatures(inputs, np.arange(num_rows, dtype=np.int32) + 7, np.full_like(word_ids, 3))


def test_classification_features_count_slice_and_take_the_unlabeled_rows_without_a_hard_label():
    task = ClassificationTask(None, 8, ["neg", "pos"])
    features = _classification_features(["a", "b", "c"], [1, 0, 1])
    unlabeled = _classification_features(["d", "e"])
    assert task.num_features(features) == 3 and task.num_features(unlabeled) == 2
    assert list(task.first_features(features, 2)["text_a"]) == ["a", "b"]
    assert list(task.first_features(features, 2)["label"]) == [1, 0]

    joined = task.with_unlabeled(features, unlabeled)
    assert list(joined["text_a"]) == ["a", "b", "c", "d", "e"]
    assert list(joined["label"]) == [1, 0, 1, 0, 0] and joined["label"].dtype == np.int32
    assert list(joined[LABEL_WEIGHT_KEY]) == [1, 1, 1, 0, 0]
    assert list(task.with_unlabeled(features, None)[LABEL_WEIGHT_KEY]) == [1, 1, 1]

    logits = np.arange(10, dtype=np.float32).reshape(5, 2)
    with_logits = task.with_columns(joined, {"teacher_logits": logits})
    assert with_logits["teacher_logits"] is logits and "teacher_logits" not in joined


def test_tagging_features_count_slice_ignore_the_unlabeled_tags_and_pad_per_token_columns():
    task = TaggingTask(None, 6, ["O", "B-X"])
    features, unlabeled = _tagging_features(3, 6, labelled=True), _tagging_features(2, 6, labelled=False)
    assert task.num_features(features) == 3

    first = task.first_features(features, 2)
    assert task.num_features(first) == 2 and first.inputs["input_word_ids"].shape == (2, 6)
    np.testing.assert_array_equal(first.word_index, features.word_index[:2])

    joined = task.with_unlabeled(features, unlabeled)
    assert task.num_features(joined) == 5
    np.testing.assert_array_equal(joined.inputs["label_ids"][:3], features.inputs["label_ids"])
    assert (joined.inputs["label_ids"][3:] == IGNORED_LABEL).all()
    np.testing.assert_array_equal(joined.inputs["input_word_ids"][3:], unlabeled.inputs["input_word_ids"])
    np.testing.assert_array_equal(joined.example_index, np.arange(5))

    # Logits of length-bucketed batches are as long as the longest row: padded with 0 to the features' length.
    logits = np.ones((5, 4, 2), np.float32)
    padded = task.with_columns(joined, {"teacher_logits": logits}).inputs["teacher_logits"]
    assert padded.shape == (5, 6, 2) and (padded[:, :4] == 1).all() and (padded[:, 4:] == 0).all()


@pytest.mark.parametrize("task_name", ["classification", "tagging"])
def test_the_head_is_the_models_output_layer_on_its_encoder_output(task_name):
    import keras

    from bert_tf.models import BertEncoder

    keras.utils.set_random_seed(0)
    task = ClassificationTask(None, 8, ["neg", "pos"]) if task_name == "classification" else TaggingTask(None, 8, ["O"])
    model = task.build_model(BertEncoder(synthetic.tiny_config()))
    inputs = {
        "input_word_ids": np.array([[2, 5, 6, 3, 0, 0, 0, 0]], np.int32),
        "input_mask": np.array([[1, 1, 1, 1, 0, 0, 0, 0]], np.int32),
        "input_type_ids": np.zeros((1, 8), np.int32),
    }
    outputs = model.encoder(inputs, training=False)
    logits = task.head(model)(outputs[task.head_input], training=False)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(model(inputs, training=False)), atol=1e-6)
