"""Texts longer than the window (`bert_tf.tasks.long_text`): window maths, pooling, the cut report, the flags,
and a document whose label sits only in its last window, learned with windows and missed with truncation."""

import csv
import json
import os
import random

import numpy as np
import pytest

from bert_tf.errors import JobArgumentError
from bert_tf.tasks import long_text
from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import run_main
from tests.helpers.jobs import finetune

# max_seq_length 16: a window holds 14 pieces.
COMMON = dict(
    max_seq_length=16, train_batch_size=16, learning_rate=1e-3, warmup_proportion=0.1, steps_per_loop=40, seed=1
)


def test_window_starts_cover_the_text_and_end_at_its_end():
    assert long_text.window_starts(0, 14, 7) == [0]
    assert long_text.window_starts(14, 14, 7) == [0]
    assert long_text.window_starts(15, 14, 7) == [0, 1]
    assert long_text.window_starts(40, 14, 14) == [0, 14, 26]
    assert long_text.window_starts(40, 14, 10) == [0, 10, 20, 26]
    for n, stride in [(1, 3), (57, 5), (100, 14), (29, 1)]:
        starts = long_text.window_starts(n, 14, stride)
        assert long_text.covered_pieces(starts, 14, n) == n
        assert all(b - a <= stride for a, b in zip(starts, starts[1:]))


def test_capped_windows_keep_first_and_last_spread_evenly():
    starts = list(range(0, 200, 10))  # 20 windows
    kept = long_text.capped_starts(starts, 5)
    assert kept == [0, 50, 100, 140, 190]
    assert long_text.capped_starts(starts[:3], 5) == starts[:3]
    # 5 windows of 14 pieces read 70 of 204 pieces.
    assert long_text.covered_pieces(kept, 14, 204) == 70


def test_head_tail_split_follows_sun_et_al():
    assert long_text.head_tail_split(510) == (128, 382)
    assert long_text.head_tail_split(126) == (31, 95)
    assert long_text.head_tail_split(14) == (3, 11)


def test_cut_report_counts_long_empty_and_one_piece_texts():
    report = long_text.cut_report([0, 1, 14, 20, 30], [0, 1, 14, 14, 14], window=14)
    assert report == {
        "texts": 5,
        "texts_longer_than_window": 2,
        "dropped_piece_share_of_long_texts": round((6 + 16) / 50, 4),
        "empty_texts": 1,
        "one_piece_texts": 1,
    }
    lines = long_text.describe_cut(report, "eval", "truncate", 14)
    assert len(lines) == 1 and "2 of 5 texts" in lines[0] and "44.0%" in lines[0]
    most = long_text.cut_report([30, 30, 1], [14, 14, 1], window=14, capped=[False, False, False])
    assert most["texts_over_max_windows"] == 0
    assert "--long_text=windows" in long_text.describe_cut(most, "train", "truncate", 14)[1]
    assert len(long_text.describe_cut(most, "train", "windows", 14)) == 1


def test_config_refuses_bad_values_naming_the_flag():
    from bert_tf.tasks.task_config import FinetuningTaskConfig

    with pytest.raises(JobArgumentError, match="--window_stride"):
        long_text.LongTextConfig(long_text="windows", window_stride=0)
    with pytest.raises(JobArgumentError, match="--window_stride=15"):
        FinetuningTaskConfig("classification", 16, long_text_config=long_text.LongTextConfig(window_stride=15))
    # Windows pack (`test_packed_windows_give_the_unpacked_document_logits`): the default packs them.
    windows = long_text.LongTextConfig("windows")
    assert FinetuningTaskConfig("classification", 16, long_text_config=windows).resolve_packing().packing
    with pytest.raises(JobArgumentError, match="--window_pooling must be one of mean, max, attention"):
        long_text.LongTextConfig(window_pooling="median")


def test_default_reads_single_texts_longer_than_the_window_in_windows(model_dir):
    import types

    from bert_tf.data.examples import TextExample
    from bert_tf.jobs.finetuning.inputs import resolve_long_text
    from bert_tf.tasks.task_config import FinetuningTaskConfig
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    single, pairs = types.SimpleNamespace(sentence_pair=False), types.SimpleNamespace(sentence_pair=True)
    # 14 one-piece words fill the window (14 pieces); 15 do not.
    fits, longer = [TextExample(str(n), " ".join(["the"] * n), label="pos") for n in (14, 15)]

    def mode(task, reader, examples, saved=None, **given):
        config = FinetuningTaskConfig(task, 16, long_text_config=long_text.LongTextConfig(**given))
        return resolve_long_text(config, tokenizer, reader, examples, saved).long_text_config.long_text

    assert mode("classification", single, [fits]) == "truncate"  # the same model and batches as before
    assert mode("classification", single, [fits, longer]) == "windows"
    assert mode("regression", single, [longer]) == "windows"
    assert mode("sentence_pair_classification", pairs, [longer]) == "truncate"  # windows are for single texts
    assert mode("classification", single, [fits, longer], long_text="truncate") == "truncate"  # a given mode stays
    # A fine-tuned directory (a resumed run, a later evaluation) keeps its recorded mode; one that recorded
    # none was fine-tuned before the mode was recorded, truncated. So is a library task built without a config.
    windows = {"task": "classification", "long_text": long_text.LongTextConfig("windows").recorded()}
    assert mode("classification", single, [fits], saved=windows) == "windows"
    assert mode("classification", single, [longer], saved={"task": "classification"}) == "truncate"
    assert long_text.LongTextConfig().resolved(windows=False).long_text == "truncate"


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_window_pooling_ignores_padding_slots(pooling):
    from bert_tf.layers import WindowPooling

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2 * 3, 4)).astype("float32")
    mask = np.ones((2, 3, 5), "int32")
    mask[1, 1:] = 0  # document 1 has one window
    pooled = np.asarray(WindowPooling(pooling)(logits, mask))
    windows = logits.reshape(2, 3, 4)
    reduce = np.mean if pooling == "mean" else np.max
    np.testing.assert_allclose(pooled[0], reduce(windows[0], axis=0), rtol=1e-6)
    np.testing.assert_allclose(pooled[1], windows[1, 0], rtol=1e-6)
    assert WindowPooling.from_config(WindowPooling(pooling).get_config()).pooling == pooling


@pytest.mark.parametrize("packed", [False, True])
def test_window_attention_pooling_weights_real_windows_by_a_learned_softmax(packed):
    """The document's vector is its real windows' vectors weighted by softmax(vector . kernel + bias); padding
    slots (and a document without windows) get no weight, whatever their vectors."""
    from bert_tf.layers import PackedWindowAttentionPooling, WindowAttentionPooling

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 4, 5)).astype("float32")  # 3 documents (or rows), 4 windows (slots), hidden 5
    real = np.array([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]], bool)
    if packed:
        layer = PackedWindowAttentionPooling()
        owners = np.where(real, np.arange(3)[:, None] + 10, -1).astype("int32")  # row d: document 10 + d's windows
        args = (vectors, owners, np.array([10, 11, 12], "int32"))
    else:
        layer = WindowAttentionPooling()
        mask = np.repeat(real[:, :, None], 2, axis=2).astype("int32")
        args = (vectors.reshape(12, 5), mask)
    layer(*args)
    kernel, bias = rng.normal(size=(5, 1)).astype("float32"), np.array([0.3], "float32")
    layer.score.set_weights([kernel, bias])
    pooled = np.asarray(layer(*args))
    scores = np.exp(vectors @ kernel[:, 0] + bias) * real
    expected = (scores[:, :, None] * vectors).sum(axis=1) / np.maximum(scores.sum(axis=1, keepdims=True), 1e-30)
    np.testing.assert_allclose(pooled, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pooled[1], vectors[1, 0], rtol=1e-6)  # one window: its vector
    assert not pooled[2].any()  # no windows: zeros
    assert np.abs(pooled[0] - vectors[0].mean(axis=0)).max() > 0.05  # not the plain mean: the scores count
    assert type(layer).from_config(layer.get_config()).name == layer.name


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return synthetic.make_model_dir(str(tmp_path_factory.mktemp("long_text") / "model"))


def test_windows_features_and_cut_report(model_dir):
    from bert_tf.data.examples import TextExample
    from bert_tf.tasks.classification import ClassificationTask
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    texts = ["", "good", " ".join(["the"] * 30), " ".join(["the"] * 200)]
    examples = [TextExample(guid=str(i), text_a=t, label="pos") for i, t in enumerate(texts)]
    config = long_text.LongTextConfig("windows", window_stride=7, max_windows=8)
    task = ClassificationTask(tokenizer, 16, ["neg", "pos"], long_text=config, bucket_width=0)
    features = task.featurize(examples, training=False)
    # 30 pieces: starts 0, 7, 14 and 16 (the last ends at the end); 200 pieces need 28 windows, 8 kept.
    assert features["num_windows"].tolist() == [1, 1, 4, 8]
    assert features["input_word_ids"].shape == (4, 8, 16)
    assert features["input_mask"][0, 0].sum() == 2 and features["input_mask"][0, 1:].sum() == 0  # [CLS] [SEP]
    assert features["input_mask"][1, 0].sum() == 3
    # A batch counts documents; --bucket_width=0: every batch has all the window slots (one static shape).
    assert [tuple(b["input_word_ids"].shape) for b in task.dataset(features, 2, training=False)] == [(2, 8, 16)] * 2
    task.bucket_width = 16  # otherwise the windows axis is cut to the batch's most windows
    assert sorted(b["input_mask"].shape[1] for b in task.dataset(features, 2, training=False)) == [1, 8]
    report = task.cut_report(features)
    assert report["texts_longer_than_window"] == 2 and report["empty_texts"] == 1 and report["one_piece_texts"] == 1
    assert report["texts_over_max_windows"] == 1
    assert report["dropped_piece_share_of_long_texts"] == round((200 - 8 * 14) / 230, 4)
    truncated = ClassificationTask(tokenizer, 16, ["neg", "pos"]).featurize(examples, training=False)
    assert truncated["num_pieces"].tolist() == [0, 1, 30, 200]
    report = ClassificationTask(tokenizer, 16, ["neg", "pos"]).cut_report(truncated)
    assert report["dropped_piece_share_of_long_texts"] == round((16 + 186) / 230, 4)


@pytest.mark.parametrize("pooling", ["mean", "max", "attention"])
def test_packed_windows_give_the_unpacked_document_logits(model_dir, pooling):
    """A batch's documents' windows fill packed rows (short documents share a row, a long one spans rows) and are
    pooled per document after the encoder: the same logits as each document's windows as rows of their own."""
    import keras

    from bert_tf.data.examples import TextExample
    from bert_tf.models import BertEncoder
    from bert_tf.tasks.classification import ClassificationTask
    from bert_tf.tasks.inference import predict_outputs
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    rng = random.Random(0)
    lengths = [0, 1, 2, 60] + [rng.randint(0, 45) for _ in range(17)]  # 21 documents: the last batch holds one
    examples = [
        TextExample(guid=str(i), text_a=" ".join(rng.choice(synthetic.FILLER) for _ in range(n)), label="pos")
        for i, n in enumerate(lengths)
    ]
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(synthetic.tiny_config())
    config = long_text.LongTextConfig("windows", window_stride=5, window_pooling=pooling)
    logits, head = {}, None
    for packing in (False, True):
        task = ClassificationTask(tokenizer, 16, ["neg", "pos"], packing=packing, long_text=config)
        model = task.build_model(encoder)
        if head is None:  # weights of scale 1: documents differ by far more than the tolerance
            head = [np.random.default_rng(1).normal(size=w.shape).astype("float32") for w in model.classifier.weights]
            scorer = [
                np.random.default_rng(2).normal(size=w.shape).astype("float32")
                for w in model.get_layer("window_pooling").weights
            ]
        model.classifier.set_weights(head)
        model.get_layer("window_pooling").set_weights(scorer)  # attention: scores of scale 1 (mean, max: none)
        features = task.featurize(examples, training=False)
        logits[packing] = predict_outputs(model, task.dataset(features, 4, training=False), num_features=21)["logits"]
    np.testing.assert_allclose(logits[True], logits[False], atol=1e-5)
    assert np.ptp(logits[False], axis=0).min() > 1e-3  # documents differ by 100 times the tolerance
    # Training: each batch holds 4 documents and all their windows; short documents' windows share rows.
    features = task.featurize(examples, training=True)
    rows_and_windows = []
    for batch in task.dataset(features, 4, training=True, seed=3).take(6):
        documents = batch["document_ids"].numpy()
        owners = batch["window_document_ids"].numpy()
        assert len(set(documents.tolist())) == 4
        assert sorted(owners[owners >= 0].tolist()) == sorted(
            d for d in documents.tolist() for _ in range(features["num_windows"][d])
        )
        rows_and_windows.append((batch["input_word_ids"].shape[0], int((owners >= 0).sum())))
    assert any(rows < windows for rows, windows in rows_and_windows), rows_and_windows


def test_packed_windows_training_iterator_resumes_exactly(model_dir, tmp_path):
    import tensorflow as tf

    from bert_tf.data.examples import TextExample
    from bert_tf.tasks.classification import ClassificationTask
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    rows = last_window_rows(10, 5)
    examples = [TextExample(guid=str(i), text_a=t, label=label) for i, (t, label) in enumerate(rows)]
    config = long_text.LongTextConfig("windows", window_stride=7)
    task = ClassificationTask(tokenizer, 16, ["neg", "pos"], packing=True, long_text=config)
    iterator = iter(task.dataset(task.featurize(examples, training=True), 4, training=True, seed=2))
    for _ in range(3):  # into the second epoch (2 batches of 4 of the 10 documents an epoch)
        next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    path = checkpoint.save(str(tmp_path / "iterator"))
    expected = [next(iterator)["document_ids"].numpy().tolist() for _ in range(4)]
    assert len({tuple(documents) for documents in expected}) > 1
    checkpoint.restore(path)
    assert [next(iterator)["document_ids"].numpy().tolist() for _ in range(4)] == expected


def last_window_rows(n: int, seed: int) -> list:
    """(text, label): 30 to 50 filler words, then 3 sentiment words of the label's polarity among the last 8
    words: never in the first 14 pieces (one word is one piece in the tiny vocabulary)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        words = [rng.choice(synthetic.FILLER) for _ in range(rng.randint(30, 50))]
        for _ in range(3):
            sentiment = rng.choice(synthetic.POSITIVE if label == "pos" else synthetic.NEGATIVE)
            words.insert(len(words) - rng.randint(0, 5), sentiment)
        rows.append((" ".join(words), label))
    return rows


@pytest.fixture(scope="module")
def long_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("long_data")
    header = ["sentence", "label"]
    return {
        "train_file": synthetic.write_tsv(str(root / "train.tsv"), header, last_window_rows(256, 1)),
        "eval_file": synthetic.write_tsv(str(root / "dev.tsv"), header, last_window_rows(100, 2)),
        "predict_file": synthetic.write_tsv(
            str(root / "test.tsv"), ["sentence"], [(t,) for t, _ in last_window_rows(20, 3)]
        ),
    }


def _run(tmp_path, model_dir, long_data, name, **options):
    output_dir = str(tmp_path / name)
    results = finetune(
        "classification",
        output_dir,
        text_a_column="sentence",
        model_dir=model_dir,
        num_train_steps=200,
        do_train=True,
        do_eval=True,
        do_predict=True,
        **long_data,
        **COMMON,
        **options,
    )
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["texts_longer_than_window"] == results["texts_longer_than_window"]
    return output_dir, results


def test_label_in_the_last_window_is_learned_with_windows_and_missed_with_truncate(
    tmp_path, model_dir, long_data, capfd
):
    truncate = long_text.LongTextConfig("truncate")
    _, truncated = _run(tmp_path, model_dir, long_data, "truncate", long_text_config=truncate)
    # Every document is longer than the window; truncation reads 14 of about 50 pieces, never the label's.
    assert truncated["texts_longer_than_window"] == 100 and truncated["dropped_piece_share_of_long_texts"] > 0.6
    assert truncated["accuracy"] <= 0.7  # chance: the first 14 pieces say nothing about the label

    # The default (no --long_text) reads these texts, longer than the window, in windows pooled by their mean.
    output_dir, windowed = _run(tmp_path, model_dir, long_data, "windows")
    assert windowed["accuracy"] >= 0.95
    assert windowed["texts_longer_than_window"] == 100 and windowed["dropped_piece_share_of_long_texts"] == 0.0
    with open(os.path.join(output_dir, "predictions.tsv")) as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert len(rows) == 21  # one row per document
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f)["long_text"] == long_text.LongTextConfig("windows").recorded()

    # The directory evaluates again with only --output_dir: its recorded windows and pooling.
    import experiments.finetune as job

    again = [f"--output_dir={output_dir}", f"--eval_file={long_data['eval_file']}", "--do_eval"]
    assert run_main(job, again) == 0
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["accuracy"] == pytest.approx(windowed["accuracy"])
    # Attention pooling is learned: weights fine-tuned with mean pooling lack it, refused naming the flag.
    assert run_main(job, [*again, "--window_pooling=attention"]) == 2
    err = capfd.readouterr().err
    assert "--window_pooling=attention: weights fine-tuned with it" in err, err


def test_label_in_the_last_window_is_learned_with_attention_pooling(tmp_path, model_dir, long_data):
    """A learned softmax over the windows' [CLS] vectors, the head on their weighted mean, learns the label of the
    last window too; the directory records the pooling and reads again with it (its learned weights restored)."""
    attention = long_text.LongTextConfig("windows", window_pooling="attention")
    output_dir, results = _run(tmp_path, model_dir, long_data, "attention", long_text_config=attention)
    assert results["accuracy"] >= 0.95
    with open(os.path.join(output_dir, "task_config.json")) as f:
        assert json.load(f)["long_text"] == attention.recorded()
    import experiments.finetune as job

    again = [f"--output_dir={output_dir}", f"--eval_file={long_data['eval_file']}", "--do_eval"]
    assert run_main(job, again) == 0
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["accuracy"] == pytest.approx(results["accuracy"])


def test_flags_exit_2_naming_the_flag(tmp_path, capfd, model_dir, long_data):
    import experiments.finetune as job

    common = [
        f"--model_dir={model_dir}",
        f"--train_file={long_data['train_file']}",
        "--text_a_column=sentence",
        "--do_train",
        "--max_seq_length=16",
        "--task=classification",
    ]
    for extra, named in [
        (["--long_text=windows", "--window_stride=0"], "--window_stride"),
        (["--long_text=windows", "--window_stride=15"], "--window_stride=15"),
    ]:
        status = run_main(job, [*common, f"--output_dir={tmp_path / 'out'}", *extra])
        err = capfd.readouterr().err
        assert status == 2 and named in err, err
        assert not os.path.exists(tmp_path / "out")
