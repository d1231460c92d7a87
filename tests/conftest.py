"""Shared pytest set-up: quiet TensorFlow, the TensorFlow Keras backend, tiny configs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# Tests of the tf_keras / hub.KerasLayer path run in subprocesses that set this;
# the test process itself must use Keras 3.
os.environ.pop("TF_USE_LEGACY_KERAS", None)

import pytest

from bert_tf import tensorflow_startup

# The test process owns its stderr as a tool does (bert_tf.cli.run): tests that run a tool's `main` in-process and
# read all of fd 2 (tests/test_cli_bad_input.py) see no TensorFlow start-up notes, whichever test loads it first.
tensorflow_startup.quiet_first_import()


@pytest.fixture(autouse=True)
def _environment_as_found():
    """Every test leaves os.environ as it found it, whatever it imports: a program may set variables for its own
    process at import (experiments.classify_with_hub sets TF_USE_LEGACY_KERAS), and a later test's subprocess
    would inherit them, so that a test's outcome would depend on which tests ran before it in the process."""
    found = dict(os.environ)
    yield
    if os.environ != found:
        os.environ.clear()
        os.environ.update(found)


@pytest.fixture
def tiny_config():
    """L=2, H=32 BERT: big enough to exercise every code path, fast on a CPU."""
    from bert_tf.config import BertConfig

    return BertConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=48,
        type_vocab_size=2,
    )


@pytest.fixture
def tiny_batch():
    """Encoder inputs with padding, two segments and masked positions."""
    import numpy as np

    rng = np.random.default_rng(0)
    batch, seq = 3, 12
    word_ids = rng.integers(5, 97, size=(batch, seq)).astype("int32")
    mask = np.ones((batch, seq), "int32")
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    word_ids[mask == 0] = 0
    type_ids = np.zeros((batch, seq), "int32")
    type_ids[:, 6:] = 1
    type_ids[mask == 0] = 0
    return {
        "input_word_ids": word_ids,
        "input_mask": mask,
        "input_type_ids": type_ids,
        "masked_lm_positions": np.array([[1, 2, 3], [4, 7, 0], [1, 3, 0]], "int32"),
    }
