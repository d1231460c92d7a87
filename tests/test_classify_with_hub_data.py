"""classify_with_hub's data: the fine-tuning job's reader and column flags, the data's own label names, bad input.

In a subprocess: importing experiments.classify_with_hub sets TF_USE_LEGACY_KERAS for its process.
"""

import json
import subprocess
import sys

from tests.helpers import training_data

CODE = r"""
import json, sys
from bert_tf.data.finetuning_readers import read_labeled_texts
from bert_tf.jobs.classify_with_hub.labels import binary_labels
results = {}
for name, args in json.loads(sys.argv[1]).items():
    try:
        train = read_labeled_texts(args["train"], *args["columns"])
        test = read_labeled_texts(args["test"], *args["columns"])
        names, y_train, y_test = binary_labels(train[1], test[1], args.get("names"), args["test"])
        results[name] = {"texts": train[0], "names": names, "y_train": y_train.tolist(), "y_test": y_test.tolist()}
    except ValueError as e:
        results[name] = {"error": str(e)}
print(json.dumps(results))
"""


def _tsv(path, rows):
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_columns_and_label_names(tmp_path):
    reviews = _tsv(tmp_path / "reviews.tsv", [("id", "review", "sentiment"), ("1", "Tasty.", "positive"),
                                              ("2", "Stale.", "negative"), ("3", "Fine.", "positive")])  # fmt: skip
    bundled = _tsv(tmp_path / "bundled.tsv", [("text", "label"), ("Great!", "1"), ("Meh.", "0")])
    three = _tsv(tmp_path / "three.tsv", [("text", "label"), ("a", "x"), ("b", "y"), ("c", "z")])
    cases = {
        "named_columns": {"train": reviews, "test": reviews, "columns": ["review", "sentiment"]},
        "index_columns": {"train": reviews, "test": reviews, "columns": ["1", "2"]},
        "bundled_names": {"train": bundled, "test": bundled, "columns": ["text", "label"], "names": ["other", "great"]},
        "bundled_as_written": {"train": bundled, "test": bundled, "columns": ["text", "label"]},
        "missing_column": {"train": reviews, "test": reviews, "columns": ["text", "sentiment"]},
        "three_labels": {"train": three, "test": three, "columns": ["text", "label"]},
        "unknown_test_label": {"train": bundled, "test": three, "columns": ["text", "label"]},
        "names_need_ids": {"train": reviews, "test": reviews, "columns": ["review", "sentiment"], "names": ["a", "b"]},
    }
    result = subprocess.run(
        [sys.executable, "-c", CODE, json.dumps(cases)],
        capture_output=True, text=True, timeout=120, cwd=str(training_data.ROOT), env=training_data.subprocess_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    # The data's own names, sorted; the second is the positive class.
    assert got["named_columns"] == {
        "texts": ["Tasty.", "Stale.", "Fine."], "names": ["negative", "positive"],
        "y_train": [1.0, 0.0, 1.0], "y_test": [1.0, 0.0, 1.0],
    }  # fmt: skip
    assert got["index_columns"] == got["named_columns"]
    assert got["bundled_names"]["names"] == ["other", "great"] and got["bundled_names"]["y_train"] == [1.0, 0.0]
    assert got["bundled_as_written"]["names"] == ["0", "1"]
    assert got["missing_column"]["error"] == (
        f"{reviews}: no text_a column 'text'; the header has ['id', 'review', 'sentiment']."
    )
    assert got["three_labels"]["error"].startswith("--train_file: this binary classifier needs exactly two labels")
    assert got["unknown_test_label"]["error"] == f"{three}: example 1 has the label 'x', not one of ['0', '1']."
    assert got["names_need_ids"]["error"].startswith("--label_names=a,b: needs two names and labels written as 0")
