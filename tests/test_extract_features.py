"""extract_features: the chosen layers, shapes and values equal to the encoder's own outputs."""

import json
import os

import numpy as np
import pytest

from bert_tf.checkpoints import load_encoder
from bert_tf.data import packed_rows
from bert_tf.errors import DataError, JobArgumentError
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers import jobs

LINES = ["Alice saw the movie .", "It was good ||| bob walked to paris", "", "playing " * 20]
SEQ = 12


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("extract")
    model_dir = synthetic.make_model_dir(str(root / "model"), num_hidden_layers=4)
    input_file = root / "input.txt"
    input_file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return model_dir, str(input_file), root


def reference(model_dir):
    """Packs LINES independently (single texts or pairs) and runs the encoder directly."""
    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    encoder = load_encoder(model_dir)
    rows = []
    for line in LINES:
        parts = line.strip().split(" ||| ")
        ids = [tokenizer.cls_id]
        types = [0]
        for segment, text in enumerate(parts):
            pieces = tokenizer.tokenize([text])[0][: SEQ - 1 - len(parts)]
            ids += pieces + [tokenizer.sep_id]
            types += [segment] * (len(pieces) + 1)
        rows.append((ids, types))
    word_ids = np.zeros((len(LINES), SEQ), np.int32)
    types = np.zeros_like(word_ids)
    mask = np.zeros_like(word_ids)
    for i, (ids, type_ids) in enumerate(rows):
        word_ids[i, : len(ids)] = ids
        types[i, : len(ids)] = type_ids
        mask[i, : len(ids)] = 1
    outputs = encoder({"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": types})
    return tokenizer, word_ids, mask, types, [np.asarray(layer) for layer in outputs["encoder_outputs"]]


def test_jsonl_matches_the_encoder(setup):
    model_dir, input_file, root = setup
    output_file = str(root / "features.jsonl")
    jobs.extract_features(
        input_file, output_file, model_dir=model_dir, layers=[-1, 0], max_seq_length=SEQ, batch_size=3
    )
    tokenizer, word_ids, mask, _, layers = reference(model_dir)
    with open(output_file, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert [r["linex_index"] for r in records] == list(range(len(LINES)))
    for i, record in enumerate(records):
        length = int(mask[i].sum())
        assert [f["token"] for f in record["features"]] == tokenizer.tokens(word_ids[i, :length])
        for position, feature in enumerate(record["features"]):
            assert [layer["index"] for layer in feature["layers"]] == [-1, 0]
            np.testing.assert_allclose(feature["layers"][0]["values"], layers[-1][i, position], atol=2e-5)
            np.testing.assert_allclose(feature["layers"][1]["values"], layers[0][i, position], atol=2e-5)
    # The pair line has two segments; the empty line is just [CLS] [SEP]; the long one is cut.
    assert [f["token"] for f in records[1]["features"]].count("[SEP]") == 2
    assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]
    assert len(records[3]["features"]) == SEQ


def test_npy_with_default_layers_and_npz(setup):
    model_dir, input_file, root = setup
    tokenizer, word_ids, mask, types, layers = reference(model_dir)
    real = mask.astype(bool)
    npy = str(root / "features.npy")
    jobs.extract_features(input_file, npy, model_dir=model_dir, max_seq_length=SEQ, batch_size=3)
    values = np.load(npy)
    # [lines, seq, layers -1..-4, hidden]; padding is zero.
    assert values.shape == (len(LINES), SEQ, 4, 32) and values.dtype == np.float32
    for i, index in enumerate((-1, -2, -3, -4)):
        np.testing.assert_allclose(values[:, :, i][real], layers[index][real], atol=2e-5)
    assert not values[~real].any()

    npz = str(root / "features.npz")
    jobs.extract_features(input_file, npz, model_dir=model_dir, layers=[0, -1], max_seq_length=SEQ, batch_size=2)
    arrays = np.load(npz)
    assert sorted(arrays.files) == ["input_mask", "input_type_ids", "input_word_ids", "layer_-1", "layer_0"]
    np.testing.assert_array_equal(arrays["input_word_ids"], word_ids)
    np.testing.assert_array_equal(arrays["input_mask"], mask)
    np.testing.assert_array_equal(arrays["input_type_ids"], types)
    for index in (0, -1):
        assert arrays[f"layer_{index}"].shape == (len(LINES), SEQ, 32)
        np.testing.assert_allclose(arrays[f"layer_{index}"][real], layers[index][real], atol=2e-5)


def test_errors(setup):
    model_dir, input_file, root = setup
    with pytest.raises(JobArgumentError, match=r"--layers \[-5, 4\] out of range: the model has 4 layers"):
        jobs.extract_features(
            input_file, str(root / "x.npy"), model_dir=model_dir, layers=[-5, 4, 0], max_seq_length=SEQ
        )
    with pytest.raises(JobArgumentError, match="must end in .jsonl, .npy, .npz"):
        jobs.extract_features(input_file, str(root / "x.csv"), model_dir=model_dir)
    with pytest.raises(JobArgumentError, match="max_position_embeddings"):
        jobs.extract_features(input_file, str(root / "x.npy"), model_dir=model_dir, max_seq_length=512)
    with pytest.raises(DataError, match="--input_file not found"):
        jobs.extract_features(
            str(root / "missing.txt"), str(root / "x.npy"), model_dir=model_dir, layers=[-1], max_seq_length=SEQ
        )
    assert not os.path.exists(root / "x.npy")


def test_command_line(setup, capsys):
    from experiments import extract_features as tool
    from tests.helpers.absl_flags import run_main

    model_dir, input_file, root = setup
    output_file = str(root / "cli.npz")
    common = [f"--input_file={input_file}", f"--output_file={output_file}", f"--model_dir={model_dir}"]
    code = run_main(tool, common + ["--layers=-1", f"--max_seq_length={SEQ}", "--batch_size=4"])
    assert code == 0, capsys.readouterr().err[-2000:]
    assert np.load(output_file)["layer_-1"].shape == (len(LINES), SEQ, 32)
    code = run_main(tool, common + ["--layers=-1,last", f"--max_seq_length={SEQ}"])
    assert code == 2 and "--layers must be integers" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["out.jsonl", "out.npy", "out.npz"])
def test_a_run_failing_midway_leaves_no_output_and_no_temporary_file(setup, tmp_path, monkeypatch, name):
    from bert_tf.tasks import inference

    model_dir, input_file, _ = setup
    real_iterate_outputs = inference.iterate_outputs

    def fails_after_the_first_batch(*args, **kwargs):
        for batch in real_iterate_outputs(*args, **kwargs):
            yield batch
            raise RuntimeError("interrupted")

    monkeypatch.setattr(inference, "iterate_outputs", fails_after_the_first_batch)
    with pytest.raises(RuntimeError, match="interrupted"):
        jobs.extract_features(
            input_file, str(tmp_path / name), model_dir=model_dir, layers=[-1], max_seq_length=SEQ, batch_size=2
        )
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("pooling", [None, "cls", "mean", "max", "pooled"])
def test_packed_rows_give_the_features_of_one_line_a_row(setup, pooling):
    model_dir, input_file, root = setup
    arguments = dict(model_dir=model_dir, layers=[-1, 0], max_seq_length=SEQ, batch_size=3, pooling=pooling)
    jobs.extract_features(input_file, str(root / "alone.npy"), packing=False, **arguments)
    jobs.extract_features(input_file, str(root / "packed.npy"), **arguments)  # the default: packed rows
    alone, packed = np.load(root / "alone.npy"), np.load(root / "packed.npy")
    assert packed.shape == alone.shape and np.abs(alone).max() > 0.1
    np.testing.assert_allclose(packed, alone, atol=2e-5)
    # The lines did share rows: the packed run computed several of them together.
    mask = reference(model_dir)[2]
    tables = np.concatenate([t.numpy() for t in packed_rows.inference_row_batches(mask.sum(1), 3, SEQ)])
    assert ((tables >= 0).sum(axis=1) >= 2).any()
