"""Model directories that leave TensorFlow (issue 22): `weights.safetensors`, JAX without TensorFlow, both ways.

The JAX side runs in subprocesses where `import tensorflow` fails (tests/helpers/no_tensorflow.py) with
KERAS_BACKEND=jax (tests/helpers/jax_without_tensorflow.py); this process is the TensorFlow side.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import bert_tf
from bert_tf import BertClassifier
from bert_tf.checkpoints import (
    WEIGHTS_NAME,
    load_encoder,
    load_pretrainer,
    load_task_model,
    weights_file,
    write_model_dir,
)
from tests.helpers import export_fixtures, no_tensorflow, training_data

HELPER = str(training_data.ROOT / "tests" / "helpers" / "jax_without_tensorflow.py")
FIXTURES = training_data.ROOT / "tests" / "fixtures"
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
TIMEOUT = 300


def _run_jax(tmp_path, *args):
    result = subprocess.run(
        [sys.executable, HELPER, *map(str, args)],
        env=no_tensorflow.environment(str(tmp_path / "no_tensorflow"), KERAS_BACKEND="jax"),
        cwd=str(training_data.ROOT),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-4000:]


def _reviews(split, count):
    with open(FIXTURES.parent.parent / "data" / f"fine_foods_{split}.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f.readlines()[1 : count + 1]]
    return [text for text, _ in rows], [int(label) for _, label in rows]


def _only_weights_file(source, destination):
    """A model directory as written without TensorFlow: config, vocab and weights.safetensors."""
    os.makedirs(destination)
    for name in ("bert_config.json", "vocab.txt", WEIGHTS_NAME):
        shutil.copy(os.path.join(source, name), destination)
    return str(destination)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "model"
    model, _ = export_fixtures.write_tiny_model_dir(str(path), texts=_reviews("train", 300)[0], with_heads=True)
    return str(path), model


def _inputs(batch=3, length=12, vocab_size=50):
    ids = np.random.RandomState(0).randint(5, vocab_size, (batch, length)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def test_every_model_dir_writer_adds_the_weights_file_and_loaders_read_it(tiny_dir, tmp_path):
    path, pretrainer = tiny_dir
    tensors, metadata = weights_file.read_weights_file(path)
    assert metadata["checkpoint"] == "ckpt-0" and metadata["model"] == "BertPretrainer"
    assert len(tensors) == len(pretrainer.weights)  # the seed states are not weights
    assert any(k.startswith("heads/masked_lm/") for k in tensors)
    inputs = _inputs()
    expected = pretrainer.encoder(inputs)["sequence_output"].numpy()
    # Without a checkpoint, TensorFlow's loaders read the weights file too.
    only = _only_weights_file(path, tmp_path / "only")
    np.testing.assert_array_equal(load_encoder(only)(inputs)["sequence_output"].numpy(), expected)
    np.testing.assert_array_equal(load_pretrainer(only).encoder(inputs)["sequence_output"].numpy(), expected)
    np.testing.assert_array_equal(load_encoder(path)(inputs)["sequence_output"].numpy(), expected)


def test_weights_file_errors_name_what_is_wrong(tiny_dir, tmp_path):
    path, _ = tiny_dir
    only = _only_weights_file(path, tmp_path / "only")
    with pytest.raises(ValueError, match="does not hold every weight of the BertClassifier: missing heads/classifier"):
        load_task_model(only, lambda encoder: BertClassifier(encoder, num_classes=2))
    encoder_only = tmp_path / "encoder_only"
    write_model_dir(str(encoder_only), load_encoder(path), vocab_file=os.path.join(path, "vocab.txt"))
    with pytest.raises(ValueError, match="no masked-LM/next-sentence weights"):
        load_pretrainer(_only_weights_file(str(encoder_only), tmp_path / "encoder_only_weights"))
    # A weights file older than the directory's latest checkpoint is refused.
    stale = tmp_path / "stale"
    shutil.copytree(path, stale)
    (stale / "checkpoint").write_text('model_checkpoint_path: "ckpt-7"\nall_model_checkpoint_paths: "ckpt-7"\n')
    with pytest.raises(ValueError, match="holds the weights of ckpt-0, but the latest checkpoint .* is ckpt-7"):
        weights_file.load_weights_file(bert_tf.BertEncoder(load_encoder(path).config), str(stale))


def test_tiny_model_dir_runs_on_jax_without_tensorflow_with_the_same_ids_and_outputs(tiny_dir, tmp_path):
    import tensorflow as tf

    from bert_tf.tokenization import BertTokenizer, bert_pack_inputs

    path, pretrainer = tiny_dir
    texts = _reviews("test", 6)[0]
    pairs = [[texts[0], None], [texts[1], texts[2]], ["Great taste, great price.", None]]
    (tmp_path / "inputs.json").write_text(json.dumps(pairs))
    _run_jax(tmp_path, "encode", path, tmp_path / "inputs.json", 32, tmp_path / "jax.npz")
    jax = np.load(tmp_path / "jax.npz")
    tokenizer = BertTokenizer(os.path.join(path, "vocab.txt"), lower_case=True)
    for row, (a, b) in enumerate(pairs):
        segments = [tokenizer(tf.constant([a]))] + ([tokenizer(tf.constant([b]))] if b else [])
        packed = bert_pack_inputs(segments, 32, 2, 3, 0)
        for key in ENCODER_INPUTS:
            np.testing.assert_array_equal(jax[key][row], packed[key].numpy()[0], err_msg=key)
    outputs = pretrainer.encoder({key: jax[key] for key in ENCODER_INPUTS})
    for key in ("sequence_output", "pooled_output"):
        assert np.max(np.abs(jax[key] - outputs[key].numpy())) <= 1e-5, key


def test_real_minilm_on_jax_without_tensorflow_matches_transformers(tmp_path):
    from bert_tf.checkpoints import convert_hf_directory, published

    reference_dir = FIXTURES / "convert" / "minilm_reference"
    reference = {name: np.load(reference_dir / f"{name}.npy") for name in ENCODER_INPUTS + ("sequence_output",)}
    reference["pooled_output"] = np.load(reference_dir / "pooled_output.npy")
    source = json.loads((reference_dir / "source.json").read_text())
    directory = published.minilm_l6_v2_dir()
    model_dir = tmp_path / "minilm"
    # Converted on TensorFlow (checkpoint and weights file), read on JAX without TensorFlow.
    write_model_dir(str(model_dir), convert_hf_directory(directory), vocab_file=os.path.join(directory, "vocab.txt"))
    (tmp_path / "inputs.json").write_text(json.dumps(source["inputs"]))
    _run_jax(
        tmp_path,
        "encode",
        model_dir,
        tmp_path / "inputs.json",
        reference["input_word_ids"].shape[1],
        tmp_path / "jax.npz",
    )
    jax = np.load(tmp_path / "jax.npz")
    for key in ENCODER_INPUTS:  # the plain-Python tokenizer gives HuggingFace's ids
        np.testing.assert_array_equal(jax[key], reference[key], err_msg=key)
    real = reference["input_mask"].astype(bool)  # padded positions' outputs are not used
    diffs = {
        "sequence_output (real tokens)": float(
            np.max(np.abs(jax["sequence_output"] - reference["sequence_output"])[real])
        ),
        "sequence_output (all positions)": float(np.max(np.abs(jax["sequence_output"] - reference["sequence_output"]))),
        "pooled_output": float(np.max(np.abs(jax["pooled_output"] - reference["pooled_output"]))),
    }
    print("all-MiniLM-L6-v2 on JAX without TensorFlow, max abs diff vs transformers:", diffs)
    assert diffs["sequence_output (real tokens)"] <= 1e-5 and diffs["pooled_output"] <= 1e-5, diffs
    # One padded position of the reference differs by 2.2e-5 (2.1e-5 on TensorFlow): test_convert.py's 1e-4.
    assert diffs["sequence_output (all positions)"] <= 1e-4, diffs


def test_fit_on_jax_then_load_export_and_serve_on_tensorflow_and_back(tiny_dir, tmp_path):
    import tensorflow as tf

    from bert_tf.export import export_model_dir

    path, _ = tiny_dir
    train, test = _reviews("train", 96), _reviews("test", 32)
    data = {
        "train": train,
        "test": test,
        "max_seq_length": 32,
        "train_batch_size": 16,
        "num_train_epochs": 2,
        "learning_rate": 1e-3,
    }
    (tmp_path / "data.json").write_text(json.dumps(data))
    # TF -> JAX: fine-tune the TF-written encoder with Keras fit on JAX, save a model directory there.
    _run_jax(tmp_path, "fit", path, tmp_path / "data.json", tmp_path / "jax_fit")
    jax = np.load(tmp_path / "jax_fit" / "results.npz")
    model_dir = str(tmp_path / "jax_fit" / "model")
    assert sorted(os.listdir(model_dir)) == ["bert_config.json", "vocab.txt", WEIGHTS_NAME]
    inputs = {key: jax[key] for key in ENCODER_INPUTS}
    # JAX -> TF: the classifier and its encoder load, give JAX's logits, export and serve.
    classifier = load_task_model(model_dir, lambda encoder: BertClassifier(encoder, num_classes=2))
    logits = classifier(inputs).numpy()
    assert np.max(np.abs(logits - jax["logits"])) <= 1e-5
    tuned = load_encoder(model_dir)(inputs)["pooled_output"].numpy()
    untouched = load_encoder(path)(inputs)["pooled_output"].numpy()
    assert np.max(np.abs(tuned - untouched)) > 1e-3, "fit changed the encoder's weights"
    # verify=False: the serving check below compares the SavedModel with the loaded encoder itself.
    exported = export_model_dir(model_dir, str(tmp_path / "export"), max_seq_length=32, verify=False)
    served = tf.saved_model.load(exported["encoder"]).signatures["serving_default"](
        **{key: tf.constant(value) for key, value in inputs.items()}
    )
    assert np.max(np.abs(served["pooled_output"].numpy() - tuned)) <= 1e-5
    # TF -> JAX for a task model: the classifier re-saved on TensorFlow (checkpoint and weights file) loads on JAX.
    resaved = tmp_path / "resaved"
    write_model_dir(str(resaved), classifier, vocab_file=os.path.join(model_dir, "vocab.txt"))
    _run_jax(tmp_path, "logits", resaved, tmp_path / "data.json", tmp_path / "logits.npz")
    assert np.max(np.abs(np.load(tmp_path / "logits.npz")["logits"] - logits)) <= 1e-5


def test_pretraining_and_finetuning_jobs_write_the_weights_file(tmp_path):
    """experiments.pretrain and experiments.finetune (their library calls) leave the final weights in it too."""
    from bert_tf.checkpoints import find_checkpoint, restore
    from tests.fixtures.finetune import synthetic
    from tests.helpers import jobs

    records = training_data.write_pretraining_records(tmp_path / "records")
    config_file = tmp_path / "bert_config.json"
    training_data.tiny_bert_config(training_data.vocab_size(), num_layers=1).to_json_file(str(config_file))
    result = jobs.pretrain(
        output_dir=str(tmp_path / "pretrained"),
        input_file=records["train"],
        bert_config_file=str(config_file),
        vocab_file=records["vocab"],
        max_seq_length=training_data.SEQ_LENGTH,
        max_predictions_per_seq=training_data.MAX_PREDICTIONS,
        train_batch_size=8,
        num_train_steps=4,
        num_warmup_steps=1,
        save_checkpoints_steps=2,
    )
    pretrained = str(tmp_path / "pretrained")
    _, metadata = weights_file.read_weights_file(pretrained)
    assert metadata["checkpoint"] == os.path.basename(result.checkpoint) == "ckpt-4"
    only = _only_weights_file(pretrained, tmp_path / "pretrained_weights")
    inputs = _inputs(length=training_data.SEQ_LENGTH, vocab_size=training_data.vocab_size())
    expected = result.model.encoder(inputs)["sequence_output"].numpy()
    np.testing.assert_array_equal(load_pretrainer(only).encoder(inputs)["sequence_output"].numpy(), expected)

    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["sentence", "label"], synthetic.sentiment_rows(64, 1))
    output_dir = str(tmp_path / "finetuned")
    jobs.finetune(
        "classification",
        output_dir,
        train_file=train,
        text_a_column="sentence",
        model_dir=model_dir,
        num_train_steps=3,
        max_seq_length=16,
        train_batch_size=16,
        do_train=True,
    )
    _, metadata = weights_file.read_weights_file(output_dir)
    assert metadata["model"] == "BertClassifier" and metadata["checkpoint"] == "ckpt-3"

    def build(encoder):
        return BertClassifier(encoder, num_classes=2)

    from_checkpoint = build(bert_tf.BertEncoder(load_encoder(output_dir).config))
    restore(from_checkpoint, find_checkpoint(output_dir))
    from_weights = load_task_model(_only_weights_file(output_dir, tmp_path / "finetuned_weights"), build)
    inputs = _inputs(length=16, vocab_size=from_checkpoint.encoder.config.vocab_size)
    np.testing.assert_array_equal(from_weights(inputs).numpy(), from_checkpoint(inputs).numpy())


def test_weights_file_is_rewritten_from_the_latest_checkpoint(tiny_dir, tmp_path, capsys):
    """`python -m experiments.write_weights_file`: for a directory whose weights file is missing or stale."""
    from experiments import write_weights_file
    from tests.helpers.absl_flags import run_main

    path, pretrainer = tiny_dir
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    os.remove(copy / WEIGHTS_NAME)
    assert run_main(write_weights_file, [f"--model_dir={copy}"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(copy / WEIGHTS_NAME)
    rewritten, metadata = weights_file.read_weights_file(str(copy))
    original, _ = weights_file.read_weights_file(path)
    assert metadata["checkpoint"] == "ckpt-0" and metadata["model"] == "BertPretrainer"
    assert sorted(rewritten) == sorted(original)
    for key, value in original.items():
        np.testing.assert_array_equal(rewritten[key], value, err_msg=key)
    assert run_main(write_weights_file, []) == 2
    assert "--model_dir" in capsys.readouterr().err
    assert run_main(write_weights_file, [f"--model_dir={tmp_path / 'missing'}"]) == 2


def test_keras_fit_command_line_on_tensorflow(tiny_dir, tmp_path, capsys):
    """`python -m experiments.keras_fit` (here in process, on the TensorFlow backend): results and a model directory."""
    from experiments import keras_fit
    from tests.helpers.absl_flags import run_main

    path, _ = tiny_dir
    train = tmp_path / "train.tsv"
    rows = ["text\tlabel"] + [f"{text}\t{label}" for text, label in zip(*_reviews("train", 32))]
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    arguments = [f"--model_dir={path}", f"--train_file={train}", f"--eval_file={train}", f"--output_dir={out}"]
    assert run_main(keras_fit, arguments + ["--max_seq_length=16", "--train_batch_size=16"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["backend"] == "tensorflow" and results["train_steps"] == 2 and 0 <= results["test_accuracy"] <= 1
    assert {"checkpoint", WEIGHTS_NAME, "bert_config.json", "vocab.txt"} <= set(os.listdir(out / "model"))
    load_task_model(str(out / "model"), lambda encoder: BertClassifier(encoder, num_classes=2))
    capsys.readouterr()
    # A second run into the same --output_dir is refused before it trains.
    assert run_main(keras_fit, arguments) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"keras_fit: error: --output_dir: {out / 'model'} exists and is not empty."
    ]
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\nx\t1\n", encoding="utf-8")
    assert run_main(keras_fit, [f"--model_dir={path}", f"--train_file={bad}", f"--output_dir={tmp_path / 'x'}"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"keras_fit: error: {bad}: no text_a column 'text'; the header has ['sentence', 'label']."
    ]


def test_import_and_loading_on_jax_leave_an_installed_tensorflow_unimported(tiny_dir, tmp_path):
    path, _ = tiny_dir
    code = (
        "import sys, bert_tf\n"
        "from bert_tf.tokenization import PythonBertTokenizer\n"
        f"encoder = bert_tf.load_encoder({path!r})\n"
        f"encoder(PythonBertTokenizer({path!r} + '/vocab.txt').encode(['Great taste.'], 16))\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow')\n"
        "assert not loaded, loaded[:5]\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=training_data.subprocess_env(KERAS_BACKEND="jax"),
        cwd=str(training_data.ROOT),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
