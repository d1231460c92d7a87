"""Every input pipeline the package builds ends without tf.data's autotuning model (bert_tf/prefetching.py)."""

import doctest

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import prefetching
from bert_tf.data import length_buckets
from bert_tf.tasks.base import numpy_dataset


def _inputs(num_examples=10, max_seq_length=16):
    lengths = np.arange(num_examples) % (max_seq_length - 2) + 2
    mask = (np.arange(max_seq_length)[None, :] < lengths[:, None]).astype(np.int32)
    return {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": np.zeros_like(mask)}


def test_docstring_examples_run():
    result = doctest.testmod(prefetching, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 2 and result.failed == 0


def test_options_turn_off_only_the_model_and_keep_the_elements():
    dataset = tf.data.Dataset.range(20).map(lambda x: x * 3, num_parallel_calls=tf.data.AUTOTUNE)
    assert dataset.options().autotune.enabled is None  # tf.data's default: on
    ended = prefetching.prefetched(dataset)
    assert ended.options().autotune.enabled is False
    assert [int(x) for x in ended] == [3 * i for i in range(20)]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("bucket_width", [None, 0, 4])
def test_the_fine_tuning_pipelines_end_without_autotuning(training, bucket_width):
    dataset = numpy_dataset(_inputs(), 4, training=training, seed=1, bucket_width=bucket_width)
    assert dataset.options().autotune.enabled is False
    assert next(iter(dataset))["input_word_ids"].shape[0] == 4


def test_the_inference_buckets_end_without_autotuning():
    dataset, batches = length_buckets.bucketed_dataset(_inputs(), 4, 16, bucket_width=4)
    assert dataset.options().autotune.enabled is False
    assert sum(1 for _ in dataset) == len(batches)
