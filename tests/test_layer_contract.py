"""Every layer of bert_tf.layers and every model of bert_tf.models keeps the contract of
tests/helpers/layer_contract.py (config, build, shapes, mixed precision, `.keras`, JAX)."""

import inspect

import keras
import numpy as np
import pytest

from bert_tf import layers, models
from bert_tf.config import BertConfig
from tests.helpers import layer_contract
from tests.helpers.layer_contract import Case

CONFIG = BertConfig(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=16,
    type_vocab_size=2,
)
HIDDEN = CONFIG.hidden_size
VOCAB = CONFIG.vocab_size


def _batch(batch_size=2, seq_length=5):
    rng = np.random.default_rng(0)
    mask = np.ones((batch_size, seq_length), "int32")
    mask[1, 3:] = 0
    word_ids = rng.integers(1, VOCAB, (batch_size, seq_length)).astype("int32") * mask
    type_ids = np.zeros_like(mask)
    type_ids[:, 2:] = mask[:, 2:]
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


BATCH = _batch()
_RNG = np.random.default_rng(1)
HIDDEN_STATES = _RNG.normal(size=(2, 5, HIDDEN)).astype("float32")
POOLED = _RNG.normal(size=(2, HIDDEN)).astype("float32")
STACKED_LAYERS = _RNG.normal(size=(2, 3, HIDDEN)).astype("float32")
POSITIONS = np.array([[1, 3], [0, 2]], "int32")
# One document read in the two windows of BATCH: [documents, windows, seq_length].
DOCUMENT = {name: value[None] for name, value in BATCH.items()}
WINDOW_LOGITS = _RNG.normal(size=(2, 3)).astype("float32")
# Windows packed 3 slots a row (2 rows): documents 5 (two windows), 8 (one), and a missing one (-1).
SLOT_LOGITS = _RNG.normal(size=(2, 3, 4)).astype("float32")
WINDOW_DOCUMENTS = np.array([[5, 8, 5], [-1, -1, -1]], "int32")
DOCUMENT_IDS = np.array([5, 8, -1], "int32")
# The [CLS] vectors of DOCUMENT's two windows, and of the packed slots above (attention pools vectors).
WINDOW_VECTORS = _RNG.normal(size=(2, HIDDEN)).astype("float32")
SLOT_VECTORS = _RNG.normal(size=(2, 3, HIDDEN)).astype("float32")


def _embedding():
    embedding = keras.layers.Embedding(VOCAB, HIDDEN, name="word_embeddings")
    embedding.build()
    return embedding


CASES = [
    Case(
        "BertEmbeddings",
        lambda: layers.BertEmbeddings(
            vocab_size=VOCAB, hidden_size=HIDDEN, max_position_embeddings=16, type_vocab_size=2
        ),
        (BATCH["input_word_ids"], BATCH["input_type_ids"]),
        "bfloat16",
    ),
    Case(
        "MultiHeadSelfAttention",
        lambda: layers.MultiHeadSelfAttention(num_heads=2, hidden_size=HIDDEN),
        (HIDDEN_STATES, BATCH["input_mask"]),
        "bfloat16",
    ),
    Case(
        "TransformerEncoderBlock",
        lambda: layers.TransformerEncoderBlock(hidden_size=HIDDEN, num_heads=2, intermediate_size=24),
        (HIDDEN_STATES, BATCH["input_mask"]),
        "bfloat16",
    ),
    Case("Dropout", lambda: layers.Dropout(0.1), (HIDDEN_STATES,), "bfloat16"),
    Case("ClassificationHead", lambda: layers.ClassificationHead(num_classes=3), (POOLED,), "float32"),
    # ClassificationHead on every token, under the name BertTokenClassifier's saved files use.
    Case("TokenClassificationHead", lambda: layers.TokenClassificationHead(4), (HIDDEN_STATES,), "float32"),
    Case("SpanHead", lambda: layers.SpanHead(), (HIDDEN_STATES,), "float32"),
    Case("NextSentenceHead", lambda: layers.NextSentenceHead(), (POOLED,), "float32"),
    Case("ScalarMix", lambda: layers.ScalarMix(num_layers=3), (STACKED_LAYERS,), "bfloat16"),
    Case("WindowRows", lambda: layers.WindowRows(), (DOCUMENT["input_word_ids"],), "int32"),
    Case("WindowPooling", lambda: layers.WindowPooling("max"), (WINDOW_LOGITS, DOCUMENT["input_mask"]), "float32"),
    Case(
        "PackedWindowPooling",
        lambda: layers.PackedWindowPooling("max"),
        (SLOT_LOGITS, WINDOW_DOCUMENTS, DOCUMENT_IDS),
        "float32",
    ),
    Case(
        "WindowAttentionPooling",
        lambda: layers.WindowAttentionPooling(),
        (WINDOW_VECTORS, DOCUMENT["input_mask"]),
        "float32",
    ),
    Case(
        "PackedWindowAttentionPooling",
        lambda: layers.PackedWindowAttentionPooling(),
        (SLOT_VECTORS, WINDOW_DOCUMENTS, DOCUMENT_IDS),
        "float32",
    ),
    # Its output matrix is the encoder's embedding, which get_config leaves out: saved within BertPretrainer.
    Case(
        "MaskedLMHead",
        lambda: layers.MaskedLMHead(_embedding()),
        (HIDDEN_STATES, POSITIONS),
        "float32",
        config_objects={"token_embedding": _embedding},
        saving=False,
    ),
    Case("BertEncoder", lambda: models.BertEncoder(CONFIG), (BATCH,), "bfloat16"),
    Case(
        "BertPretrainer",
        lambda: models.BertPretrainer(models.BertEncoder(CONFIG)),
        (dict(BATCH, masked_lm_positions=POSITIONS),),
        "float32",
    ),
    Case(
        "BertClassifier", lambda: models.BertClassifier(models.BertEncoder(CONFIG), num_classes=3), (BATCH,), "float32"
    ),
    Case(
        "DocumentClassifier",
        lambda: models.DocumentClassifier(models.BertEncoder(CONFIG), num_classes=3),
        (DOCUMENT,),
        "float32",
    ),
    Case("BertSpanLabeler", lambda: models.BertSpanLabeler(models.BertEncoder(CONFIG)), (BATCH,), "float32"),
    Case(
        "BertTokenClassifier",
        lambda: models.BertTokenClassifier(models.BertEncoder(CONFIG), num_labels=4),
        (BATCH,),
        "float32",
    ),
]
# ALBERT's factorised embedding (E < H, so the masked-LM head maps H to E) and cross-layer sharing.
ALBERT_CONFIG = BertConfig(**dict(CONFIG.to_dict(), num_hidden_layers=3, embedding_size=8, share_layer_weights=True))
CONFIG_VARIANT_CASES = [
    # Packed rows (SQuAD's windows, two a row): per-token example ids, 0 for padding.
    Case(
        "BertSpanLabeler[packed]",
        lambda: models.BertSpanLabeler(models.BertEncoder(CONFIG), packed=True),
        (dict(BATCH, input_example_ids=np.array([[1, 1, 2, 2, 2], [1, 2, 2, 0, 0]], "int32")),),
        "float32",
    ),
    Case(
        "DocumentClassifier[attention]",
        lambda: models.DocumentClassifier(models.BertEncoder(CONFIG), num_classes=3, pooling="attention"),
        (DOCUMENT,),
        "float32",
    ),
    Case("BertEncoder[albert]", lambda: models.BertEncoder(ALBERT_CONFIG), (BATCH,), "bfloat16"),
    Case(
        "BertPretrainer[albert]",
        lambda: models.BertPretrainer(models.BertEncoder(ALBERT_CONFIG)),
        (dict(BATCH, masked_lm_positions=POSITIONS),),
        "float32",
    ),
]
CASES_BY_NAME = {case.name: case for case in CASES + CONFIG_VARIANT_CASES}


@pytest.fixture(scope="module")
def saved_cases(tmp_path_factory):
    """name -> (.keras path, .npz path), filled by test_layer_contract and completed by the JAX test."""
    return {"directory": str(tmp_path_factory.mktemp("contract")), "files": {}}


def test_every_layer_and_model_has_a_case():
    public = {
        name
        for module in (layers, models)
        for name, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer) and obj is not models.TaskModel
    }
    assert public == {case.name for case in CASES}


@pytest.mark.parametrize("name", list(CASES_BY_NAME))
def test_layer_contract(name, saved_cases):
    saved = layer_contract.run_layer_test(CASES_BY_NAME[name], saved_cases["directory"])
    if saved is not None:
        saved_cases["files"][name] = saved


def test_jax_backend_matches_tensorflow(saved_cases):
    files = saved_cases["files"]
    for case in CASES + CONFIG_VARIANT_CASES:
        if case.saving and case.name not in files:
            files[case.name] = layer_contract.save_case(case, saved_cases["directory"])
    differences = layer_contract.run_on_jax(files)
    assert set(differences) == set(files)
    for name, difference in differences.items():
        assert isinstance(difference, float) and difference <= layer_contract.JAX_TOLERANCE, (name, difference)


def test_task_models_keep_their_checkpoint_names():
    # The names checkpoints were written under before the TaskModel base class; a new name would orphan them.
    pretrainer = CASES_BY_NAME["BertPretrainer"].make()
    assert dict(pretrainer.checkpoint_items) == {
        "encoder": pretrainer.encoder,
        "masked_lm": pretrainer.masked_lm,
        "next_sentence": pretrainer.next_sentence,
    }
    for name in ("BertClassifier", "BertSpanLabeler", "BertTokenClassifier"):
        model = CASES_BY_NAME[name].make()
        assert dict(model.checkpoint_items) == {"encoder": model.encoder, "task_model": model}, name
