"""Tiny vocabularies and model directories for the export tests (test_export_*.py, test_notebook.py)."""

import collections
import os
import re
import subprocess
import sys

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SENTENCES = [
    "This movie was great, I loved it!",
    "The food was terrible and the service slow.",
    "What a wonderful surprise.",
    "I would not buy this again.",
    "Great taste, great price.",
    "Awful. Stale and bland.",
    "My kids love these snacks.",
    "The box arrived broken.",
]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]


def vocab_from_texts(texts, max_words=300):
    """Special tokens, then the most frequent lower-cased words and punctuation of `texts`."""
    counts = collections.Counter(token for text in texts for token in re.findall(r"\w+|[^\w\s]", text.lower()))
    return SPECIAL_TOKENS + [token for token, _ in counts.most_common(max_words)]


def write_vocab(tokens, path):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))
    return str(path)


def tiny_config(vocab_size, max_position_embeddings=64):
    from bert_tf import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=max_position_embeddings,
    )


def write_tiny_model_dir(path, texts=SENTENCES, with_heads=True, seed=0):
    """A model directory (config, vocab, checkpoint) of a randomly initialised tiny BERT.

    Returns (model, vocab_file) with the model as written (a BertPretrainer
    when `with_heads`).
    """
    import keras

    from bert_tf import BertEncoder, BertPretrainer
    from bert_tf.checkpoints import write_model_dir

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tokens = vocab_from_texts(texts)
    vocab_file = write_vocab(tokens, os.path.join(os.path.dirname(os.path.abspath(path)), "source_vocab.txt"))
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(tiny_config(len(tokens)))
    model = BertPretrainer(encoder) if with_heads else encoder
    write_model_dir(path, model, vocab_file)
    return model, vocab_file


def legacy_keras_env(**extra):
    """Environment for a subprocess that uses tf_keras (hub.KerasLayer), with this checkout importable."""
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", **extra)
    env["PYTHONPATH"] = os.pathsep.join([REPO_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def run_legacy_keras_script(script, *args, timeout=300):
    """Runs `tests/helpers/<script>` under tf_keras; returns the CompletedProcess (output captured)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), script)
    return subprocess.run(
        [sys.executable, path, *map(str, args)],
        env=legacy_keras_env(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
