"""`experiments.export --litert`: a LiteRT classifier that takes raw text, run in the `ai-edge-litert` interpreter."""

import doctest
import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export import litert
from experiments import export as export_cli
from tests.helpers import export_fixtures
from tests.helpers.absl_flags import temporary_flags

SEQ_LENGTH = export_fixtures.CLASSIFIER_SEQ_LENGTH
LABELS = export_fixtures.CLASSIFIER_LABELS
TEXTS = export_fixtures.CLASSIFIER_TEXTS


def run_cli(*args):
    with temporary_flags(export_cli.define_flags, ["export", f"--max_seq_length={SEQ_LENGTH}", *args]):
        export_cli.main(["export"])


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    return export_fixtures.write_tiny_classifier_dir(str(tmp_path_factory.mktemp("classifier") / "model"), LABELS)[0]


def _saved_model_outputs(saved_model, texts, text_b=None):
    signature = tf.saved_model.load(saved_model).signatures["serving_default"]
    inputs = {"text": tf.constant(texts)} | ({"text_b": tf.constant(text_b)} if text_b else {})
    return {name: value.numpy() for name, value in signature(**inputs).items()}


def _preprocessor_ids(model_dir, texts, text_b=None, seq_length=SEQ_LENGTH):
    from bert_tf.tokenization import BertPreprocessor

    preprocessor = BertPreprocessor(os.path.join(model_dir, "vocab.txt"), default_seq_length=seq_length)
    segments = [preprocessor.tokenize(tf.constant(t)) for t in ([texts, text_b] if text_b else [texts])]
    return preprocessor.bert_pack_inputs(segments)["input_word_ids"].numpy()


def test_cli_writes_a_float32_classifier_that_equals_the_saved_model(classifier_dir, tmp_path, capsys):
    export_dir = tmp_path / "export"
    run_cli(f"--model_dir={classifier_dir}", f"--export_dir={export_dir}", "--litert=float32")
    out = capsys.readouterr().out
    model_path = export_dir / "litert" / "classifier.tflite"
    assert f"litert:     {model_path}" in out
    assert "LiteRT float32 classifier.tflite" in out and "the preprocessor's ids" in out
    assert sorted(os.listdir(export_dir / "litert")) == ["classifier.tflite", "required_ops.txt", "task_config.json"]

    ops = (export_dir / "litert" / "required_ops.txt").read_text().split("\n")
    assert {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "FULLY_CONNECTED", "SOFTMAX"} <= set(ops)
    assert not [op for op in ops if op.startswith("Flex")]
    # What the file says it needs is what the flatbuffer holds.
    ops_in_model = litert.required_ops(model_path.read_bytes())
    assert ops_in_model == sorted(op for op in ops if op and not op.startswith("#"))

    runner = litert.interpreter(model_path).get_signature_runner("serving_default")
    got = litert.run(runner, TEXTS)
    expected = _saved_model_outputs(str(export_dir / "classifier"), TEXTS)
    assert got["scores"].shape == (len(TEXTS), len(LABELS))
    assert np.max(np.abs(got["scores"] - expected["scores"])) <= litert.FLOAT32_TOLERANCE
    np.testing.assert_array_equal(got["label_id"], expected["label_id"])
    assert np.max(np.ptp(got["scores"], axis=0)) > 1e-3  # the texts' scores differ: the check has teeth
    np.testing.assert_array_equal(got["input_word_ids"], _preprocessor_ids(classifier_dir, TEXTS))
    # A batch in one call gives the rows of single calls.
    batch = runner(text=np.array(TEXTS, object))
    np.testing.assert_allclose(batch["scores"], got["scores"], atol=1e-6)

    # The guide's example, as written, on this export.
    exec(compile(_guide_example().replace("runs/sst_export", str(export_dir)), "guide", "exec"), {})
    label, scores = capsys.readouterr().out.split(" ", 1)
    expected_label = LABELS[int(expected["label_id"][TEXTS.index("Great taste, great price.")])]
    assert label == expected_label and scores.strip().startswith("[") and scores.strip().endswith("]")


def _guide_example():
    """The Python block of docs/export_and_serving.md's "On a device" section."""
    with open(os.path.join(export_fixtures.REPO_ROOT, "docs", "export_and_serving.md"), encoding="utf-8") as f:
        section = f.read().split("## On a device", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def _keras_outputs(model, model_dir, label_list, texts, text_b=None):
    """The servable classifier's outputs (`ClassifierModule`, which the SavedModel reproduces) from the Keras model."""
    from bert_tf.export.classifier_module import ClassifierModule
    from bert_tf.tokenization import BertPreprocessor

    preprocessor = BertPreprocessor(os.path.join(model_dir, "vocab.txt"), default_seq_length=SEQ_LENGTH)
    module = ClassifierModule(model, preprocessor, label_list, SEQ_LENGTH, sentence_pair=text_b is not None)
    inputs = [tf.constant(texts)] + ([tf.constant(text_b)] if text_b else [])
    return {name: value.numpy() for name, value in module._scores(inputs).items()}


def test_pairs_in_full_int8_and_regression_in_dynamic_int8(tmp_path):
    pair_dir, pair_model = export_fixtures.write_tiny_classifier_dir(
        str(tmp_path / "pairs"), LABELS, sentence_pair=True, seed=1
    )
    task_config = json.loads(open(os.path.join(pair_dir, "task_config.json")).read())
    calibration = litert.calibration_texts(
        task_config, export_fixtures.write_train_tsv(tmp_path / "train.tsv", True), 5
    )
    assert len(calibration) == 5 and all(len(pair) == 2 for pair in calibration)
    config = litert.LiteRTConfig("full_int8", calibration)
    vocab_file = os.path.join(pair_dir, "vocab.txt")
    what = litert.export_litert(pair_model, task_config, vocab_file, True, str(tmp_path / "pairs_litert"), config)
    assert what.startswith("LiteRT full_int8 classifier.tflite")
    model = (tmp_path / "pairs_litert" / "classifier.tflite").read_bytes()
    assert "QUANTIZE" in litert.required_ops(model)  # int8 activations
    text_b = TEXTS[::-1]
    got = litert.run(litert.interpreter(model).get_signature_runner(), TEXTS, text_b)
    np.testing.assert_array_equal(got["input_word_ids"], _preprocessor_ids(pair_dir, TEXTS, text_b))
    expected = _keras_outputs(pair_model, pair_dir, LABELS, TEXTS, text_b)
    assert np.max(np.abs(got["scores"] - expected["scores"])) < 0.05  # int8: close, not equal

    regression_dir, regression_model = export_fixtures.write_tiny_classifier_dir(
        str(tmp_path / "regression"), None, seed=2
    )
    task_config = json.loads(open(os.path.join(regression_dir, "task_config.json")).read())
    vocab_file = os.path.join(regression_dir, "vocab.txt")
    path = str(tmp_path / "regression_litert")
    expected = _keras_outputs(regression_model, regression_dir, None, TEXTS)["scores"]
    litert.export_litert(regression_model, task_config, vocab_file, True, path, litert.LiteRTConfig("dynamic_int8"))
    model = open(os.path.join(path, "classifier.tflite"), "rb").read()
    assert "QUANTIZE" not in litert.required_ops(model)  # float activations, int8 weights
    # The word embeddings are stored packed at 4 bits (uint8 [vocab, hidden / 2]), never whole.
    vocab_size, hidden = regression_model.encoder.token_embedding.embeddings.shape
    tensors = _constant_tensors(model)
    assert ("UINT8", [vocab_size, hidden // 2]) in tensors
    assert not [t for t in tensors if t[1] == [vocab_size, hidden]]
    got = litert.run(litert.interpreter(model).get_signature_runner(), TEXTS)
    assert set(got) == {"scores", "input_word_ids"} and got["scores"].shape == (len(TEXTS), 1)
    assert np.max(np.abs(got["scores"] - expected)) < 0.05 * np.max(np.abs(expected))
    # The Keras model is as it was (its word-embedding layer was only borrowed while the graph was traced).
    np.testing.assert_array_equal(_keras_outputs(regression_model, regression_dir, None, TEXTS)["scores"], expected)


def _constant_tensors(model: bytes) -> list:
    """(type name, shape) of each tensor of `model`'s main graph that holds data."""
    from tensorflow.lite.python import schema_py_generated as schema

    types = {code: name for name, code in vars(schema.TensorType).items() if not name.startswith("_")}
    parsed = schema.Model.GetRootAsModel(model, 0)
    graph = parsed.Subgraphs(0)
    tensors = [graph.Tensors(i) for i in range(graph.TensorsLength())]
    return [
        (types[t.Type()], t.ShapeAsNumpy().tolist())
        for t in tensors
        if t.ShapeLength() and parsed.Buffers(t.Buffer()).DataLength()
    ]


def test_int4_word_embeddings_keep_each_value_within_half_its_rows_step():
    """Each row on its own 4-bit grid (15 steps of its largest |value| / 7): an outlier coarsens only its row,
    a zero row stays zero, an odd width is padded and cut again."""
    table = np.random.default_rng(0).normal(0.0, 0.05, (50, 7)).astype(np.float32)
    table[3] = 0.0
    table[4, 2] = 1.0
    embedding = litert.Int4WordEmbedding(table)
    assert embedding.packed.dtype == np.uint8 and embedding.packed.shape == (50, 4)
    got = embedding.dequantized()
    step = np.maximum(np.abs(table).max(axis=1, keepdims=True), 1e-30) / 7
    assert np.all(np.abs(got - table) <= step / 2 + 1e-6 * step)
    levels = got / step
    assert np.allclose(levels, np.round(levels), atol=1e-3)
    assert np.round(levels).min() >= -8 and np.round(levels).max() <= 7
    assert not got[3].any() and got[4, 2] == pytest.approx(1.0, rel=1e-6)


def test_calibration_texts_are_drawn_from_the_recorded_columns(tmp_path):
    task_config = {"task": "classification", "data": {"text_a_column": "text", "has_header": True}}
    train_file = export_fixtures.write_train_tsv(tmp_path / "train.tsv")
    texts = litert.calibration_texts(task_config, train_file, 3)
    assert len(texts) == 3 and set(texts) <= set(export_fixtures.SENTENCES)
    assert litert.calibration_texts(task_config, train_file, 100) == tuple(export_fixtures.SENTENCES)


def test_bad_flags_and_directories_are_refused_before_writing(classifier_dir, tmp_path):
    export_dir = tmp_path / "export"
    with pytest.raises(SystemExit, match="--litert=full_int8 needs --train_file"):
        run_cli(f"--model_dir={classifier_dir}", f"--export_dir={export_dir}", "--litert=full_int8")
    with pytest.raises(SystemExit, match="--train_file: file not found: .*missing.tsv"):
        run_cli(
            f"--model_dir={classifier_dir}",
            f"--export_dir={export_dir}",
            "--litert=full_int8",
            f"--train_file={tmp_path / 'missing.tsv'}",
        )
    with pytest.raises(SystemExit, match="--calibration_examples must be at least 1"):
        run_cli(
            f"--model_dir={classifier_dir}",
            f"--export_dir={export_dir}",
            "--litert=full_int8",
            f"--train_file={export_fixtures.write_train_tsv(tmp_path / 'train.tsv')}",
            "--calibration_examples=0",
        )
    with pytest.raises(SystemExit, match="--train_file is for --litert=full_int8"):
        run_cli(f"--model_dir={classifier_dir}", f"--export_dir={export_dir}", f"--train_file={tmp_path}")
    with pytest.raises(SystemExit, match="--litert converts the float32 model"):
        run_cli(f"--model_dir={classifier_dir}", f"--export_dir={export_dir}", "--litert=float32", "--quantize=int8")
    pretrained, _ = export_fixtures.write_tiny_model_dir(str(tmp_path / "pretrained" / "model"), with_heads=False)
    with pytest.raises(SystemExit, match="--litert: .*pretrained/model is not a fine-tuned"):
        run_cli(f"--model_dir={tmp_path / 'pretrained' / 'model'}", f"--export_dir={export_dir}", "--litert=float32")
    assert not export_dir.exists()
    assert export_cli.FORMS == litert.FORMS  # the flag's choices, listed without importing TensorFlow


def test_the_module_docstring_example_runs():
    (test,) = doctest.DocTestFinder(recurse=False).find(litert.LiteRTClassifierModule, globs=vars(litert))
    report = io.StringIO()
    result = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE).run(test, out=report.write)
    assert result.attempted >= 5 and result.failed == 0, report.getvalue()


def test_a_distilled_student_exports_to_litert(tmp_path, capsys):
    """The directory `experiments.distill` writes (checkpoints and the student's weights file) exports like a
    fine-tuned one: the float32 LiteRT student reproduces its servable classifier."""
    from tests.fixtures.finetune import synthetic
    from tests.helpers.jobs import distill, finetune

    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["sentence", "label"], synthetic.sentiment_rows(64, 1))
    schedule = dict(max_seq_length=16, train_batch_size=16, learning_rate=1e-3, steps_per_loop=10, seed=1)
    teacher = str(tmp_path / "teacher")
    finetune(
        "classification",
        teacher,
        model_dir=synthetic.make_model_dir(str(tmp_path / "model")),
        train_file=train,
        text_a_column="sentence",
        num_train_steps=10,
        do_train=True,
        **schedule,
    )
    student = str(tmp_path / "student")
    distill(
        student,
        teacher_dir=teacher,
        student_num_layers=1,
        train_file=train,
        text_a_column="sentence",
        num_train_steps=10,
        learning_rate=1e-3,
        steps_per_loop=10,
        seed=1,
    )
    export_dir = tmp_path / "export"
    with temporary_flags(
        export_cli.define_flags,
        ["export", "--max_seq_length=16", f"--model_dir={student}", f"--export_dir={export_dir}", "--litert=float32"],
    ):
        export_cli.main(["export"])
    assert "LiteRT float32 classifier.tflite" in capsys.readouterr().out
    texts = [row[0] for row in synthetic.sentiment_rows(8, 2)]
    got = litert.run(litert.interpreter(export_dir / "litert" / "classifier.tflite").get_signature_runner(), texts)
    expected = _saved_model_outputs(str(export_dir / "classifier"), texts)
    assert np.max(np.abs(got["scores"] - expected["scores"])) <= litert.FLOAT32_TOLERANCE
    np.testing.assert_array_equal(got["label_id"], expected["label_id"])
    # The student's one layer, not the teacher's two: the file holds one layer's attention kernels.
    assert json.load(open(os.path.join(student, "distillation.json")))["student_config"]["num_hidden_layers"] == 1
