"""Fine-tuning from TFDS datasets (glue/*, imdb_reviews), mocked with tfds.testing: no downloads."""

import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from bert_tf.data import finetuning_readers as readers
from bert_tf.errors import DataError
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune

SPLIT_SEEDS = {"train": 1, "validation": 2, "test": 3}


def learnable_glue(num_examples):
    """An `as_dataset` for glue/sst2 and glue/mrpc with the synthetic rules; test labels are -1 as in GLUE."""

    def as_dataset(self, split, **kwargs):
        split = str(split)
        seed = SPLIT_SEEDS[split]
        if "sentence" in self.info.features:
            rows = [(text, label) for text, label in synthetic.sentiment_rows(num_examples, seed)]
            records = [{"sentence": text, "label": int(label == "pos")} for text, label in rows]
        else:
            rows = synthetic.pair_rows(num_examples, seed)
            records = [{"sentence1": a, "sentence2": b, "label": int(label == "pos")} for a, b, label in rows]
        for index, record in enumerate(records):
            record["idx"] = index
            if split == "test":
                record["label"] = -1
        columns = {key: [r[key] for r in records] for key in records[0]}
        columns["label"] = np.asarray(columns["label"], np.int64)
        columns["idx"] = np.asarray(columns["idx"], np.int32)
        return tf.data.Dataset.from_tensor_slices(columns)

    return as_dataset


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return synthetic.make_model_dir(str(tmp_path_factory.mktemp("tfds") / "model"))


def test_glue_sst2_learns_and_predicts_unlabelled_test_split(tmp_path, model_dir):
    output_dir = str(tmp_path / "out")
    with tfds.testing.mock_data(as_dataset_fn=learnable_glue(200)):
        results = finetune(
            "classification",
            output_dir,
            tfds_name="glue/sst2",
            tfds_data_dir=str(tmp_path / "tfds"),
            model_dir=model_dir,
            max_seq_length=16,
            train_batch_size=32,
            learning_rate=1e-3,
            num_train_steps=60,
            do_train=True,
            do_eval=True,
            do_predict=True,
            steps_per_loop=30,
            seed=1,
        )
    assert results["accuracy"] >= 0.9 and results["num_examples"] == 200
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f)["label_list"] == ["negative", "positive"]  # the ClassLabel names
    with open(os.path.join(output_dir, "predictions.tsv")) as f:
        rows = list(csv.reader(f, delimiter="\t"))
    # The GLUE test split has no labels: no label column, one row per test example.
    assert rows[0] == ["guid", "text_a", "prediction", "probability_negative", "probability_positive"]
    assert len(rows) == 201 and rows[1][0] == "glue/sst2:test:0"
    expected = [("positive" if label == "pos" else "negative") for _, label in synthetic.sentiment_rows(200, 3)]
    assert np.mean([row[2] == want for row, want in zip(rows[1:], expected)]) >= 0.9


def test_glue_mrpc_sentence_pairs(tmp_path, model_dir):
    output_dir = str(tmp_path / "out")
    with tfds.testing.mock_data(as_dataset_fn=learnable_glue(64)):
        results = finetune(
            "sentence_pair_classification",
            output_dir,
            tfds_name="glue/mrpc",
            tfds_data_dir=str(tmp_path),
            model_dir=model_dir,
            max_seq_length=16,
            train_batch_size=16,
            num_train_steps=4,
            do_train=True,
            do_eval=True,
            steps_per_loop=2,
        )
        with pytest.raises(ValueError, match="sentence pairs .*sentence_pair_classification"):
            finetune(
                "classification", str(tmp_path / "other"), tfds_name="glue/mrpc", model_dir=model_dir, do_train=True
            )
    assert set(results) >= {"accuracy", "f1", "matthews_corrcoef"} and results["num_examples"] == 64
    with open(os.path.join(output_dir, "eval_predictions.tsv")) as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0][:3] == ["guid", "label", "prediction"] and len(rows) == 65
    assert {row[1] for row in rows[1:]} <= {"equivalent", "not_equivalent"}


def test_imdb_reviews_and_glue_stsb_random_mock_data(tmp_path, model_dir):
    with tfds.testing.mock_data(num_examples=24):
        # imdb_reviews evaluates on its "test" split by default (it has no validation split).
        results = finetune(
            "classification",
            str(tmp_path / "imdb"),
            tfds_name="imdb_reviews",
            tfds_data_dir=str(tmp_path),
            model_dir=model_dir,
            max_seq_length=16,
            train_batch_size=8,
            num_train_steps=3,
            do_train=True,
            do_eval=True,
            steps_per_loop=3,
        )
        assert results["num_examples"] == 24
        with open(os.path.join(tmp_path, "imdb", "task_config.json")) as f:
            assert json.load(f)["label_list"] == ["neg", "pos"]
        # glue/stsb has a float label: regression on sentence pairs.
        results = finetune(
            "regression",
            str(tmp_path / "stsb"),
            tfds_name="glue/stsb",
            tfds_data_dir=str(tmp_path),
            model_dir=model_dir,
            max_seq_length=16,
            train_batch_size=8,
            num_train_steps=3,
            do_train=True,
            do_eval=True,
            steps_per_loop=3,
        )
        assert set(results) >= {"pearson", "spearman", "mse"}
        with pytest.raises(ValueError, match="numeric .*label .idx.* does not fit --task=classification"):
            finetune(
                "classification",
                str(tmp_path / "bad"),
                tfds_name="glue/cola",
                tfds_data_dir=str(tmp_path),
                model_dir=model_dir,
                do_train=True,
                num_train_steps=1,
                text_a_column="sentence",
                label_column="idx",
            )


def test_unprepared_tfds_dataset_is_a_clear_error_not_a_download(tmp_path):
    with pytest.raises(DataError, match=r"glue/sst2.*nothing is downloaded"):
        readers.read_tfds_text_examples("glue/sst2", "train", str(tmp_path / "empty"))
    with pytest.raises(DataError, match=r"no text_a feature 'text'"):
        with tfds.testing.mock_data(num_examples=2):
            readers.read_tfds_text_examples("glue/sst2", "train", str(tmp_path), text_a_key="text")
