"""Sentence features and every layer: `embedding_output`, extract_features' pooling, normalisation, `embeddings`/`all`
layers, length buckets, and sentence-transformers' embeddings of the real all-MiniLM-L6-v2."""

import os

import numpy as np
import pytest

from bert_tf.checkpoints import load_encoder
from bert_tf.errors import JobArgumentError
from tests.fixtures.finetune import synthetic
from tests.helpers import jobs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCE_FIXTURES = os.path.join(REPO, "tests", "fixtures", "sentence_embeddings")
# Lines of very different lengths, so that length buckets differ from padding to SEQ.
LINES = [
    "alice saw the movie .",
    "it was good ||| bob walked to paris",
    "playing " * 30,
    "the",
    "bob and alice walked to the movie and it was good " * 2,
]
SEQ = 48
NUM_LAYERS = 3


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("sentence")
    model_dir = synthetic.make_model_dir(str(root / "model"), num_hidden_layers=NUM_LAYERS)
    input_file = root / "input.txt"
    input_file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return model_dir, str(input_file), root


def test_embedding_output_is_the_embedding_layers_output(setup):
    model_dir, _, _ = setup
    encoder = load_encoder(model_dir)
    rng = np.random.default_rng(0)
    word_ids = rng.integers(5, encoder.config.vocab_size, (2, 7)).astype("int32")
    type_ids = np.zeros_like(word_ids)
    type_ids[:, 4:] = 1
    mask = np.ones_like(word_ids)
    mask[1, 5:] = 0
    outputs = encoder({"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids})
    expected = encoder.embeddings(word_ids, type_ids, training=False)
    np.testing.assert_array_equal(np.asarray(outputs["embedding_output"]), np.asarray(expected))
    # And it is what the first Transformer layer reads.
    assert not np.allclose(np.asarray(outputs["embedding_output"]), np.asarray(outputs["encoder_outputs"][0]))


def _tokens(setup, **kwargs):
    model_dir, input_file, root = setup
    path = str(root / f"tokens-{len(os.listdir(root))}.npz")
    jobs.extract_features(input_file, path, model_dir=model_dir, max_seq_length=SEQ, batch_size=2, **kwargs)
    return np.load(path)


def test_embeddings_and_all_layers(setup):
    arrays = _tokens(setup, layers=["all"])
    names = ["layer_embeddings"] + [f"layer_{i}" for i in range(NUM_LAYERS)]
    assert sorted(arrays.files) == sorted(names + ["input_mask", "input_type_ids", "input_word_ids"])
    encoder = load_encoder(setup[0])
    inputs = {name: arrays[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}
    outputs = encoder(inputs)
    real = arrays["input_mask"].astype(bool)
    np.testing.assert_allclose(
        arrays["layer_embeddings"][real], np.asarray(outputs["embedding_output"])[real], atol=2e-5
    )
    for i in range(NUM_LAYERS):
        np.testing.assert_allclose(
            arrays[f"layer_{i}"][real], np.asarray(outputs["encoder_outputs"][i])[real], atol=2e-5
        )
    assert not arrays["layer_embeddings"][~real].any()


def test_length_buckets_give_the_same_features_as_padding_to_max_seq_length(setup):
    # --nopacking: one line a row, whose batches the buckets pad (the default packs rows).
    bucketed = _tokens(setup, layers=["embeddings", "-1"], bucket_width=8, packing=False)
    fixed = _tokens(setup, layers=["embeddings", "-1"], bucket_width=0, packing=False)
    lengths = fixed["input_mask"].sum(axis=1)
    # The lines really fall into different buckets, and the longest is cut at SEQ.
    assert len({int(-(-n // 8)) for n in lengths}) >= 3 and lengths.max() == SEQ
    for name in fixed.files:
        np.testing.assert_allclose(bucketed[name], fixed[name], atol=2e-5, err_msg=name)


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
@pytest.mark.parametrize("normalize", [False, True])
def test_pooled_features_equal_numpy_pooling_of_the_token_features(setup, pooling, normalize):
    tokens = _tokens(setup, layers=["embeddings", "-1", "0"])
    pooled = _tokens(setup, layers=["embeddings", "-1", "0"], pooling=pooling, normalize=normalize)
    mask = tokens["input_mask"].astype(bool)
    for name in ("layer_embeddings", "layer_-1", "layer_0"):
        values = tokens[name]
        if pooling == "cls":
            expected = values[:, 0]
        elif pooling == "mean":
            expected = values.sum(axis=1) / mask.sum(axis=1, keepdims=True)
        else:
            expected = np.where(mask[:, :, None], values, -np.inf).max(axis=1)
        if normalize:
            expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
            np.testing.assert_allclose(np.linalg.norm(pooled[name], axis=1), 1.0, atol=1e-5)
        assert pooled[name].shape == (len(LINES), 32)
        np.testing.assert_allclose(pooled[name], expected, atol=2e-5, err_msg=name)


def test_pooler_output_and_npy_layout(setup):
    model_dir, input_file, root = setup
    encoder = load_encoder(model_dir)
    pooled = _tokens(setup, pooling="pooled")
    assert sorted(pooled.files) == ["input_mask", "input_type_ids", "input_word_ids", "pooled"]
    inputs = {name: pooled[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}
    np.testing.assert_allclose(pooled["pooled"], np.asarray(encoder(inputs)["pooled_output"]), atol=2e-5)
    npy = str(root / "sentences.npy")
    jobs.extract_features(input_file, npy, model_dir=model_dir, layers=[-1, -2], pooling="mean", max_seq_length=SEQ)
    assert np.load(npy).shape == (len(LINES), 2, 32)


def test_pooling_options_are_checked(setup):
    model_dir, input_file, root = setup
    with pytest.raises(JobArgumentError, match="--normalize needs --pooling"):
        jobs.extract_features(input_file, str(root / "x.npy"), model_dir=model_dir, normalize=True, max_seq_length=SEQ)
    with pytest.raises(JobArgumentError, match="--pooling must be one of"):
        jobs.extract_features(input_file, str(root / "x.npy"), model_dir=model_dir, pooling="sum", max_seq_length=SEQ)
    with pytest.raises(JobArgumentError, match="--layers must be integers, 'embeddings' or 'all'"):
        jobs.extract_features(input_file, str(root / "x.npy"), model_dir=model_dir, layers=["last"], max_seq_length=SEQ)
    assert not os.path.exists(root / "x.npy")


def test_minilm_mean_pooled_normalised_features_are_sentence_transformers_embeddings(tmp_path):
    from bert_tf.checkpoints import convert_hf_directory, published, write_model_dir

    directory = published.minilm_l6_v2_dir()
    model_dir = str(tmp_path / "minilm")
    write_model_dir(model_dir, convert_hf_directory(directory), vocab_file=os.path.join(directory, "vocab.txt"))
    output = str(tmp_path / "embeddings.npy")
    jobs.extract_features(
        os.path.join(SENTENCE_FIXTURES, "texts.txt"),
        output,
        model_dir=model_dir,
        layers=[-1],
        pooling="mean",
        normalize=True,
        batch_size=3,
    )
    expected = np.load(os.path.join(SENTENCE_FIXTURES, "minilm_sentence_embeddings.npy"))
    actual = np.load(output)[:, 0]
    assert actual.shape == expected.shape == (8, 384)
    difference = float(np.abs(actual - expected).max())
    print(f"max abs difference from sentence-transformers: {difference:.3g}")
    assert difference <= 1e-5
