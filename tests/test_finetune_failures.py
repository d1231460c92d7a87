"""Fine-tuning runs that fail: a NaN metric is reported as a failure, not written as a number."""

import json
import math
import os

import pytest

from bert_tf.errors import NonFiniteMetricError
from bert_tf.tasks import classification
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune


def test_nan_metric_fails_the_run_and_is_listed_in_the_results(tmp_path, monkeypatch):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], synthetic.sentiment_rows(16, 1))
    evaluate = classification.ClassificationTask.evaluate

    computed = []

    def evaluate_with_nan(self, examples, predictions):
        computed.append(evaluate(self, examples, predictions))
        return dict(computed[-1], matthews_corrcoef=math.nan)

    monkeypatch.setattr(classification.ClassificationTask, "evaluate", evaluate_with_nan)
    output_dir = tmp_path / "out"
    with pytest.raises(NonFiniteMetricError, match=r"non-finite metrics: matthews_corrcoef=nan"):
        finetune(
            "classification",
            str(output_dir),
            train_file=train,
            eval_file=train,
            model_dir=model_dir,
            max_seq_length=16,
            train_batch_size=8,
            num_train_steps=1,
            do_train=True,
            do_eval=True,
        )
    results = json.loads((output_dir / "eval_results.json").read_text())  # strict JSON: no NaN token
    assert results["matthews_corrcoef"] is None and results["non_finite_metrics"] == ["matthews_corrcoef"]
    # The finite metrics are written as the task computed them: accuracy is a count of the 16 examples.
    assert len(computed) == 1 and results["accuracy"] == computed[0]["accuracy"]
    assert results["num_examples"] == 16 and results["accuracy"] * 16 == round(results["accuracy"] * 16)
    assert os.path.exists(output_dir / "ckpt-1.index")  # the trained model is kept
