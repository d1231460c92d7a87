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
# The tiny fine-tuned classifiers of the LiteRT tests (test_export_litert.py, test_litert_benchmark.py).
CLASSIFIER_LABELS = ["negative", "neutral", "positive"]
CLASSIFIER_SEQ_LENGTH = 16
# Texts a phone would see, and the awkward ones: empty, accents, CJK, emoji, longer than the packed length.
CLASSIFIER_TEXTS = SENTENCES + [
    "",
    "Ünïcödé café, naïve déjà-vu!",
    "日本語のテキスト and 中文 mixed in",
    "emoji 😀 and ✨ sparkles",
    "great " * 40,
]


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


def write_tiny_classifier_dir(path, label_list, sentence_pair=False, seed=0):
    """A tiny fine-tuned classification (or regression: `label_list` None) directory, as experiments.finetune
    writes it."""
    import keras
    import numpy as np

    from bert_tf import file_io
    from bert_tf.checkpoints.model_dir import write_model_dir
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    from bert_tf.jobs.finetuning.files import task_record
    from bert_tf.models import BertClassifier, BertEncoder
    from bert_tf.tasks.classification import ClassificationTask

    tokens = vocab_from_texts(CLASSIFIER_TEXTS)
    vocab_file = write_vocab(tokens, os.path.join(os.path.dirname(path), "vocab.txt"))
    keras.utils.set_random_seed(seed)
    model = BertClassifier(BertEncoder(tiny_config(len(tokens))), num_classes=len(label_list or [0]))
    model({name: np.zeros((1, 4), np.int32) for name in ("input_word_ids", "input_mask", "input_type_ids")})
    # A random head 100 times the initializer's scale, so that the texts' scores differ visibly.
    kernel = model.classifier.dense.kernel
    kernel.assign(np.random.default_rng(seed).normal(scale=2.0, size=kernel.shape).astype(np.float32))
    write_model_dir(path, model, vocab_file=vocab_file)
    task = ClassificationTask(None, CLASSIFIER_SEQ_LENGTH, label_list, sentence_pair=sentence_pair)
    data = FinetuningDataConfig(text_a_column="text", text_b_column="text_b" if sentence_pair else None)
    file_io.write_json(os.path.join(path, "task_config.json"), task_record(task, True, data))
    return path, model


def write_train_tsv(path, sentence_pair=False):
    """A training TSV (text, (text_b,) label) of SENTENCES with CLASSIFIER_LABELS."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("text\ttext_b\tlabel\n" if sentence_pair else "text\tlabel\n")
        for i, text in enumerate(SENTENCES):
            f.write(
                f"{text}\t{SENTENCES[-1 - i]}\t{CLASSIFIER_LABELS[i % 3]}\n"
                if sentence_pair
                else f"{text}\t{CLASSIFIER_LABELS[i % 3]}\n"
            )
    return str(path)


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
