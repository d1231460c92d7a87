"""Executes examples/classify_with_hub.ipynb headlessly on a tiny model and a few reviews."""

import os
import re

import nbformat
from nbclient import NotebookClient

from tests.helpers import export_fixtures

NOTEBOOK = os.path.join(export_fixtures.REPO_ROOT, "examples", "classify_with_hub.ipynb")


def output_text(cell):
    return "".join(output.get("text", "") for output in cell.get("outputs", []) if output["output_type"] == "stream")


def test_notebook_runs_on_tiny_model(tmp_path):
    # The first reviews of the bundled training set (read directly: importing tfds here costs seconds).
    with open(os.path.join(export_fixtures.REPO_ROOT, "data", "fine_foods_train.tsv"), encoding="utf-8") as f:
        texts = [line.split("\t")[0] for line in f.read().splitlines()[1:301]]
    model_dir = tmp_path / "model_dir"
    pretrainer, _ = export_fixtures.write_tiny_model_dir(str(model_dir), texts=texts[:300], with_heads=True)
    export_dir = tmp_path / "export"

    env = export_fixtures.legacy_keras_env(
        BERT_MODEL_DIR=str(model_dir), BERT_EXPORT_DIR=str(export_dir), BERT_SEQ_LENGTH="32",
        BERT_NUM_TRAIN_EXAMPLES="48", BERT_NUM_TEST_EXAMPLES="16", BERT_EPOCHS="1", BERT_BATCH_SIZE="16")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}})
    client.execute(env=env)  # raises CellExecutionError, with the cell's traceback, if a cell fails

    outputs = "\n".join(output_text(cell) for cell in notebook.cells if cell.cell_type == "code")
    assert "tf.keras is tf_keras" in outputs
    assert f"encoder:    {export_dir / 'encoder'}" in outputs
    assert "48 training reviews" in outputs
    changed, total = map(int, re.search(r"Fine-tuning changed (\d+) of (\d+) encoder", outputs).groups())
    assert total == len(pretrainer.encoder.trainable_weights) and changed > 0
    assert re.search(r"Test accuracy: (0|1)\.\d{3}", outputs)
    predictions = re.findall(r"^(\d\.\d{3})  (great|other) ", outputs, flags=re.MULTILINE)
    assert len(predictions) == 3
    assert sorted(os.listdir(export_dir)) == ["encoder", "preprocess"]
