"""Executes examples/classify_with_hub.ipynb headlessly, as a user opens it first: on the real weights.

Without BERT_MODEL_DIR the notebook converts the installed all-MiniLM-L6-v2
into a model directory (here, one under tmp_path), exports it and fine-tunes it;
the test shrinks only the data, the sequence length and the epochs.
"""

import os
import re

import nbformat
from nbclient import NotebookClient

from tests.helpers import export_fixtures

NOTEBOOK = os.path.join(export_fixtures.REPO_ROOT, "examples", "classify_with_hub.ipynb")
MINILM_ENCODER_WEIGHTS = 6 * 16 + 5 + 2  # 16 per layer, embeddings (3 tables + LayerNorm pair), pooler kernel+bias


def output_text(cell):
    return "".join(output.get("text", "") for output in cell.get("outputs", []) if output["output_type"] == "stream")


def test_notebook_converts_exports_and_fine_tunes_the_real_weights(tmp_path):
    model_dir, export_dir = tmp_path / "minilm", tmp_path / "export"
    env = export_fixtures.legacy_keras_env(
        BERT_MODEL_DIR=str(model_dir),
        BERT_EXPORT_DIR=str(export_dir),
        BERT_SEQ_LENGTH="32",
        BERT_NUM_TRAIN_EXAMPLES="48",
        BERT_NUM_TEST_EXAMPLES="16",
        BERT_EPOCHS="1",
        BERT_BATCH_SIZE="16",
    )
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}
    )
    client.execute(env=env)  # raises CellExecutionError, with the cell's traceback, if a cell fails

    outputs = "\n".join(output_text(cell) for cell in notebook.cells if cell.cell_type == "code")
    assert "tf.keras is tf_keras" in outputs
    assert "Wrote BertEncoder checkpoint" in outputs  # converted from the installed package
    assert (model_dir / "bert_config.json").exists()
    assert f"encoder:    {export_dir / 'encoder'}" in outputs
    assert "48 training reviews" in outputs
    changed, total = map(int, re.search(r"Fine-tuning changed (\d+) of (\d+) encoder", outputs).groups())
    assert total == MINILM_ENCODER_WEIGHTS and changed == total
    # Accuracy and the majority baseline over the 16 test reviews: each a count of 16, printed to 3 decimals.
    found = re.search(r"Test accuracy: (\d\.\d{3}) \(always predicting 'great' would give (\d\.\d{3})\)", outputs)
    assert found, outputs[-2000:]
    for value in map(float, found.groups()):
        assert 0 <= value <= 1 and abs(value * 16 - round(value * 16)) <= 0.01, found.group(0)
    predictions = re.findall(r"^(\d\.\d{3})  (great|other) ", outputs, flags=re.MULTILINE)
    assert len(predictions) == 3
    # Each sentence's label is the rule applied to its probability (ties at 0.500 are printed "other").
    assert all((float(p) > 0.5) == (label == "great") or p == "0.500" for p, label in predictions), predictions
    assert sorted(os.listdir(export_dir)) == ["encoder", "preprocess"]
