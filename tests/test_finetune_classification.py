"""Sentence, sentence-pair classification and regression fine-tuning through `run_finetuning`."""

import csv
import json
import os

import numpy as np
import pytest

from bert_tf.errors import DataError
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune

COMMON = dict(
    max_seq_length=16, train_batch_size=32, learning_rate=1e-3, warmup_proportion=0.1, steps_per_loop=50, seed=1
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return synthetic.make_model_dir(str(tmp_path_factory.mktemp("classification") / "model"))


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t"))


def test_sentiment_classification_from_tsv(tmp_path, model_dir):
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["sentence", "label"], synthetic.sentiment_rows(320, 1))
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["sentence", "label"], synthetic.sentiment_rows(100, 2))
    test_rows = synthetic.sentiment_rows(30, 3)
    test = synthetic.write_tsv(str(tmp_path / "test.tsv"), ["sentence"], [(text,) for text, _ in test_rows])
    output_dir = str(tmp_path / "out")
    results = finetune(
        "classification",
        output_dir,
        train_file=train,
        eval_file=dev,
        predict_file=test,
        text_a_column="sentence",
        model_dir=model_dir,
        num_train_steps=60,
        do_train=True,
        do_eval=True,
        do_predict=True,
        **COMMON,
    )
    # Chance is 0.5; the keyword rule is learned (almost) perfectly.
    assert results["accuracy"] >= 0.9 and results["f1"] >= 0.9 and results["matthews_corrcoef"] >= 0.8
    assert results["num_examples"] == 100 and results["global_step"] == 60
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["accuracy"] == pytest.approx(results["accuracy"])

    rows = read_tsv(os.path.join(output_dir, "predictions.tsv"))
    # The text beside each prediction.
    assert rows[0] == ["guid", "text_a", "prediction", "probability_neg", "probability_pos"]
    assert [row[0] for row in rows[1:]] == [f"test.tsv:{line}" for line in range(2, 32)]
    assert [row[1] for row in rows[1:]] == [text for text, _ in test_rows]
    probabilities = np.array([[float(p) for p in row[3:]] for row in rows[1:]])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert np.mean([row[2] == label for row, (_, label) in zip(rows[1:], test_rows)]) >= 0.9
    eval_rows = read_tsv(os.path.join(output_dir, "eval_predictions.tsv"))
    assert eval_rows[0][:3] == ["guid", "label", "prediction"] and len(eval_rows) == 101

    # The output directory is a self-contained model directory: evaluate again from it alone.
    again = finetune(
        "classification", output_dir, eval_file=dev, text_a_column="sentence", do_eval=True, max_seq_length=16
    )
    assert again["accuracy"] == pytest.approx(results["accuracy"]) and again["global_step"] == 60
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f) == {
            "task": "classification",
            "label_list": ["neg", "pos"],
            "max_seq_length": 16,
            "sentence_pair": False,
            # What prediction later reuses: the casing and the data's columns and format.
            "do_lower_case": True,
            "data": {
                "text_a_column": "sentence",
                "text_b_column": None,
                "label_column": "label",  # the column used: the default, recorded by name
                "file_format": None,
                "has_header": True,
                "conll_word_column": 0,
                "conll_label_column": -1,
            },
            # Every text fits the window, so the default read them whole (recorded, for evaluation later).
            "long_text": {"long_text": "truncate", "max_windows": 16, "window_pooling": "mean", "window_stride": None},
        }
    from bert_tf.checkpoints import load_encoder

    assert load_encoder(output_dir).config.hidden_size == 32


def test_sentence_pairs_from_jsonl(tmp_path, model_dir):
    def write(name, rows):
        path = str(tmp_path / name)
        with open(path, "w") as f:
            for a, b, label in rows:
                f.write(json.dumps({"premise": a, "hypothesis": b, "gold": label}) + "\n")
        return path

    output_dir = str(tmp_path / "out")
    results = finetune(
        "sentence_pair_classification",
        output_dir,
        train_file=write("train.jsonl", synthetic.pair_rows(320, 1)),
        eval_file=write("dev.jsonl", synthetic.pair_rows(100, 2)),
        text_a_column="premise",
        text_b_column="hypothesis",
        label_column="gold",
        model_dir=model_dir,
        num_train_steps=100,
        do_train=True,
        do_eval=True,
        **COMMON,
    )
    # The label depends on which segment holds which sentiment word: chance is 0.5.
    assert results["accuracy"] >= 0.85


def test_regression_from_csv(tmp_path, model_dir):
    def write(name, rows):
        path = str(tmp_path / name)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "score"])
            writer.writerows(rows)
        return path

    output_dir = str(tmp_path / "out")
    results = finetune(
        "regression",
        output_dir,
        train_file=write("train.csv", synthetic.count_rows(320, 1)),
        eval_file=write("dev.csv", synthetic.count_rows(100, 2)),
        text_a_column="text",
        label_column="score",
        model_dir=model_dir,
        num_train_steps=100,
        do_train=True,
        do_eval=True,
        **COMMON,
    )
    assert results["pearson"] >= 0.9 and results["spearman"] >= 0.85
    rows = read_tsv(os.path.join(output_dir, "eval_predictions.tsv"))
    assert rows[0] == ["guid", "label", "prediction"]
    scores = np.array([float(row[2]) for row in rows[1:]])
    labels = np.array([float(row[1]) for row in rows[1:]])
    assert np.mean(np.abs(scores - labels)) < 0.5


def test_training_label_outside_the_label_list_names_the_line(tmp_path, model_dir):
    rows = [("good", "pos"), ("bad", "neg"), ("fine", "neutral")]
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], rows)
    with pytest.raises(DataError, match=r"train.tsv:4: unknown label 'neutral'; the labels are \['neg', 'pos'\]"):
        finetune(
            "classification",
            str(tmp_path / "out"),
            train_file=train,
            label_list=["neg", "pos"],
            model_dir=model_dir,
            num_train_steps=1,
            do_train=True,
            max_seq_length=16,
            train_batch_size=2,
        )


def test_argument_errors_name_the_flag(tmp_path, model_dir):
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], [("good", "pos"), ("bad", "neg")])
    with pytest.raises(ValueError, match="--task must be one of"):
        finetune("ner", str(tmp_path / "a"), train_file=train, model_dir=model_dir, do_train=True)
    with pytest.raises(ValueError, match="At least one of --do_train"):
        finetune("classification", str(tmp_path / "a"), train_file=train, model_dir=model_dir)
    with pytest.raises(ValueError, match="--do_eval needs --eval_file"):
        finetune("classification", str(tmp_path / "a"), model_dir=model_dir, do_eval=True)
    with pytest.raises(DataError, match="--train_file: file not found"):
        finetune(
            "classification",
            str(tmp_path / "a"),
            train_file=str(tmp_path / "missing.tsv"),
            model_dir=model_dir,
            do_train=True,
        )
    with pytest.raises(ValueError, match="--max_seq_length=128 exceeds the model's max_position_embeddings"):
        finetune("classification", str(tmp_path / "a"), train_file=train, model_dir=model_dir, do_train=True)
    with pytest.raises(ValueError, match="holds no fine-tuned checkpoint"):
        finetune(
            "classification",
            str(tmp_path / "b"),
            eval_file=train,
            model_dir=model_dir,
            do_eval=True,
            max_seq_length=16,
            label_list=["neg", "pos"],
        )
    with pytest.raises(ValueError, match="Give --model_dir"):
        finetune("classification", str(tmp_path / "c"), train_file=train, do_train=True)


def _eval_event_steps(output_dir, tag):
    """The steps at which the run wrote the TensorBoard scalar `tag` under summaries/eval."""
    import glob

    import tensorflow as tf

    steps = []
    for path in glob.glob(os.path.join(output_dir, "summaries", "eval", "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            steps += [event.step for value in event.summary.value if value.tag == tag]
    return sorted(steps)


def test_labels_only_in_the_evaluation_data_count_as_errors_and_eval_every_steps_logs_along_the_way(
    tmp_path, model_dir, caplog
):
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["sentence", "label"], synthetic.sentiment_rows(320, 1))
    # 12 of the 112 evaluation rows carry a label that no training row has.
    dev_rows = synthetic.sentiment_rows(100, 2) + [(text, "mixed") for text, _ in synthetic.sentiment_rows(12, 4)]
    dev = synthetic.write_tsv(str(tmp_path / "dev.tsv"), ["sentence", "label"], dev_rows)
    output_dir = str(tmp_path / "out")
    with caplog.at_level("INFO", logger="absl"):  # whatever verbosity an earlier tool in this process set
        results = finetune(
            "classification",
            output_dir,
            train_file=train,
            eval_file=dev,
            text_a_column="sentence",
            model_dir=model_dir,
            num_train_steps=60,
            eval_every_steps=20,
            do_train=True,
            do_eval=True,
            **COMMON,
        )
    assert results["unseen_label_examples"] == 12 and results["num_examples"] == 112
    # The 12 are errors: accuracy at most 100/112, while the 100 known rows are learned.
    assert 0.8 <= results["accuracy"] <= 100 / 112
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "never had" in r.getMessage()]
    assert warnings == [
        "12 evaluation examples carry labels that the training data never had ('mixed': 12); they count as errors."
    ]
    # Evaluated at steps 20 and 40 along the way (the job's own evaluation follows the last step).
    assert _eval_event_steps(output_dir, "accuracy") == [20, 40]
    along_the_way = [r.getMessage() for r in caplog.records if r.getMessage().startswith("eval at step")]
    assert [m.split(":")[0] for m in along_the_way] == ["eval at step 20", "eval at step 40"]


def test_eval_every_steps_needs_evaluation(tmp_path, model_dir):
    from bert_tf.errors import JobArgumentError

    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["sentence", "label"], synthetic.sentiment_rows(40, 1))
    with pytest.raises(JobArgumentError, match="--eval_every_steps needs --do_train and --do_eval"):
        finetune(
            "classification",
            str(tmp_path / "out"),
            train_file=train,
            text_a_column="sentence",
            model_dir=model_dir,
            num_train_steps=4,
            eval_every_steps=2,
            do_train=True,
            **COMMON,
        )
    assert not os.path.exists(tmp_path / "out")
