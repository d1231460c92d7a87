"""Layer probing: the probes find a planted signal, word features come from the right pieces, and the command
line writes the report, the JSON and the figure on tiny models and data (and reuses its feature cache)."""

import json
import os

import numpy as np
import pytest
from absl import logging

from bert_tf.jobs import DEFAULT_SEED
from bert_tf.jobs.probe_layers import job
from bert_tf.jobs.probe_layers.report_sections import model_section
from bert_tf.probing import probes
from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import run_main, temporary_flags

NUM_LAYERS = 2
COMBINATION_ROWS = ("second_to_last", "last", "mean_last_four", "concat_last_four", "scalar_mix")


def _planted(num_items, num_layers, width, signal_layer, seed):
    """[items, layers, width] noise, where only `signal_layer` carries the label (in its first 3 features)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, num_items)
    features = rng.normal(size=(num_items, num_layers, width)).astype(np.float32)
    features[:, signal_layer, :3] += 2.5 * np.eye(3, dtype=np.float32)[labels]
    return features, labels


def test_the_probes_find_a_signal_planted_in_one_layer():
    train_x, train_y = _planted(1500, 5, 16, signal_layer=3, seed=0)
    test_x, test_y = _planted(500, 5, 16, signal_layer=3, seed=1)
    fit, dev = np.arange(1200), np.arange(1200, 1500)
    results = job._linear_rows(train_x, train_y, test_x, test_y, fit, dev, seed=0)
    split = probes.Split(train_x, train_y, fit, dev, test_x, test_y)
    results["scalar_mix"] = probes.scalar_mix_probe(split, num_labels=3, seed=0)
    section = model_section(results)
    assert section["best_layer"] == "layer_3"
    assert results["layer_3"].test_accuracy > 0.85
    for layer in (0, 1, 2, 4):  # chance is about 1/3
        assert results[f"layer_{layer}"].test_accuracy < 0.45, layer
    weights = np.array(section["scalar_mix"]["weights"])
    assert weights.argmax() == 3 and weights[3] > 0.5, weights
    assert abs(section["scalar_mix"]["expected_layer"] - 3) < 0.8
    assert results["scalar_mix"].test_accuracy > 0.85
    # The combinations are the documented layers: the last four are 1..4 of layers 0..4.
    assert results["last"] is results["layer_4"] and results["second_to_last"] is results["layer_3"]


def test_baselines():
    words = ["the", "dog", "runs", "the", "run", "dog", "the"]
    tags = ["D", "N", "V", "D", "N", "N", "D"]
    # "run" -> N (seen once), "cat" unseen -> the most frequent tag overall (D), "runs" -> V.
    assert probes.word_baseline(words, tags, ["run", "cat", "runs", "dog"], ["N", "D", "V", "V"]) == 0.75
    assert probes.majority_baseline([1, 0, 1, 1], [1, 1, 0, 0]) == 0.5


def test_word_features_are_the_first_piece_or_the_mean_of_the_pieces(tmp_path):
    from bert_tf.checkpoints import load_encoder
    from bert_tf.probing.layer_features import token_features
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    model_dir = synthetic.make_model_dir(str(tmp_path / "model"), num_hidden_layers=NUM_LAYERS)
    encoder = load_encoder(model_dir)
    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    sentences = [("alice", "walked", "to", "paris"), ("playing",), ("the", "walker", "saw", "bob", "jumps")]
    options = dict(max_seq_length=16, batch_size=2, bucket_width=8, label="test")
    first = token_features(encoder, tokenizer, sentences, word_piece="first", **options)
    mean = token_features(encoder, tokenizer, sentences, word_piece="mean", **options)
    assert first.shape == mean.shape == (10, NUM_LAYERS + 1, 32)
    word = 0
    for words in sentences:
        pieces = [tokenizer.tokenize([w])[0] for w in words]
        ids = [tokenizer.cls_id] + [p for ps in pieces for p in ps] + [tokenizer.sep_id]
        inputs = {
            "input_word_ids": np.array([ids], "int32"),
            "input_mask": np.ones((1, len(ids)), "int32"),
            "input_type_ids": np.zeros((1, len(ids)), "int32"),
        }
        outputs = encoder(inputs)
        layers = np.stack(
            [np.asarray(outputs["embedding_output"])[0]] + [np.asarray(x)[0] for x in outputs["encoder_outputs"]], 1
        )
        position = 1
        for word_pieces in pieces:
            span = layers[position : position + len(word_pieces)]
            # First pieces are kept in float16 (as the cache stores them): its rounding, far below the values.
            assert first.dtype == np.float16
            np.testing.assert_allclose(first[word].astype(np.float32), span[0], rtol=1e-3, atol=2e-3)
            np.testing.assert_allclose(mean[word], span.mean(axis=0), atol=2e-5)
            position += len(word_pieces)
            word += 1
    # "walked" is two pieces, so its first piece and its mean differ.
    assert not np.allclose(first[1], mean[1])


def test_packed_rows_give_the_word_and_sentence_features_of_one_sequence_a_row(tmp_path):
    """--packing: several sentences a row of 16 tokens (and a batch's last row part empty), the same features."""
    from bert_tf.checkpoints import load_encoder
    from bert_tf.probing.layer_features import sentence_features, token_features
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    model_dir = synthetic.make_model_dir(str(tmp_path / "model"), num_hidden_layers=NUM_LAYERS)
    encoder = load_encoder(model_dir)
    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    sentences = [
        ("alice", "walked", "to", "paris"),
        ("playing",),
        ("the", "walker", "saw", "bob", "jumps"),
        ("bob", "saw", "alice"),
        ("paris",),
        ("the", "walker", "walked", "to", "paris", "playing", "with", "bob", "and", "alice"),
    ]
    options = dict(max_seq_length=16, batch_size=2, bucket_width=8, label="test")
    for word_piece in ("first", "mean"):
        packed = token_features(encoder, tokenizer, sentences, word_piece=word_piece, packing=True, **options)
        unpacked = token_features(encoder, tokenizer, sentences, word_piece=word_piece, **options)
        assert packed.shape == unpacked.shape == (24, NUM_LAYERS + 1, 32) and packed.dtype == unpacked.dtype
        tolerance = dict(rtol=1e-3, atol=2e-3) if word_piece == "first" else dict(rtol=0, atol=1e-5)  # float16 kept
        np.testing.assert_allclose(packed.astype(np.float32), unpacked.astype(np.float32), **tolerance)
    texts = [" ".join(words) for words in sentences]
    packed = sentence_features(encoder, tokenizer, texts, packing=True, **options)
    unpacked = sentence_features(encoder, tokenizer, texts, **options)
    for name in ("cls", "mean"):
        assert packed[name].shape == (6, NUM_LAYERS + 1, 32) and np.abs(unpacked[name]).max() > 0.1
        np.testing.assert_allclose(packed[name], unpacked[name], rtol=0, atol=1e-5)
    assert not np.allclose(packed["cls"], packed["mean"])


def test_packed_rows_are_the_default_and_nopacking_gives_one_sentence_a_row():
    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.probe_layers import ProbeLayersConfig
    from experiments import job_flags
    from experiments import probe_layers as tool

    packing = {}
    for argv in ([], ["--nopacking"]):
        with temporary_flags(tool.define_flags, ["probe_layers", *argv]):
            packing[bool(argv)] = job_flags.config_from_flags(ProbeLayersConfig, model=ModelSource()).packing
    assert packing == {False: True, True: False}
    assert ProbeLayersConfig(model=ModelSource()).packing is True


@pytest.fixture(scope="module")
def probe_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe")
    model_dir = synthetic.make_model_dir(str(root / "model"), num_hidden_layers=NUM_LAYERS)
    sentences = {split: synthetic.tagging_sentences(n, seed) for split, n, seed in (("train", 60, 1), ("test", 30, 2))}
    # As in real data, the test files hold a tag and a label that their training files never have.
    sentences["test"].append([("Alice", "B-PER"), ("&", "SYM"), ("Bob", "B-PER")])
    for split, rows in sentences.items():
        with open(root / f"tokens_{split}.conll", "w", encoding="utf-8") as f:
            f.write("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in rows))
        texts = synthetic.sentiment_rows(80 if split == "train" else 40, 3 if split == "train" else 4)
        if split == "test":
            texts.append(("good but bad", "mixed"))
        synthetic.write_tsv(str(root / f"sentences_{split}.tsv"), ["text", "label"], texts)
    flags = [
        f"--model_dir={model_dir}",
        f"--token_train_file={root / 'tokens_train.conll'}",
        f"--token_test_file={root / 'tokens_test.conll'}",
        f"--sentence_train_file={root / 'sentences_train.tsv'}",
        f"--sentence_test_file={root / 'sentences_test.tsv'}",
        "--max_seq_length=32",
        "--batch_size=16",
    ]
    return root, flags, sentences


def test_command_line_writes_the_report(probe_inputs, capsys):
    from experiments import probe_layers as tool

    root, flags, sentences = probe_inputs
    output_dir = root / "report"
    logging.set_verbosity(logging.INFO)  # the progress lines, as the command line shows them
    code = run_main(tool, flags + [f"--output_dir={output_dir}", "--finetune_epochs=2", "--finetune_min_steps=6"])
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    report = json.loads((output_dir / "report.json").read_text())
    # The tag and the label found only in the test files are counted and reported, once each.
    assert report["data"]["token"]["unseen_test_labels"] == {"SYM": 1}
    assert report["data"]["sentence"]["unseen_test_labels"] == {"mixed": 1}
    assert err.count("carry labels that the training data never had") == 2
    # 60 sentences are 4 steps of 32 an epoch: the reference row trains for its minimum of 6 steps instead.
    assert "token 6 steps (3.2 epochs)" in report["recipe"]["fine_tuned"]
    layer_rows = [f"layer_{i}" for i in range(NUM_LAYERS + 1)]
    expected_rows = set(layer_rows) | set(COMBINATION_ROWS) | {"fine_tuned"}
    for key in ("token", "sentence_mean", "sentence_cls"):
        section = report[key]
        assert set(section["rows"]) == expected_rows, key
        assert set(section["random_init"]["rows"]) == expected_rows - {"fine_tuned"}, key
        assert section["rows"]["last"] == section["rows"][f"layer_{NUM_LAYERS}"]
        assert section["rows"]["second_to_last"] == section["rows"][f"layer_{NUM_LAYERS - 1}"]
        assert section["best_layer"] == max(layer_rows, key=lambda n: section["rows"][n])
        assert len(section["scalar_mix"]["weights"]) == NUM_LAYERS + 1
        assert abs(sum(section["scalar_mix"]["weights"]) - 1) < 1e-5
    # The non-contextual baseline, recomputed here: each word's most frequent training tag.
    train_words = [(w, t) for s in sentences["train"] for w, t in s]
    test_words = [(w, t) for s in sentences["test"] for w, t in s]
    fit_sentences, _ = job.data_lib.dev_split(len(sentences["train"]), 0.1, DEFAULT_SEED)
    fit_words = [(w, t) for i in fit_sentences for w, t in sentences["train"][i]]
    expected = probes.word_baseline(*zip(*fit_words), *zip(*test_words))
    assert report["token"]["baseline"]["accuracy"] == expected
    assert report["data"]["token"]["train_words"] == len(train_words)
    # The [CLS] position of layer 0 is the same vector for every sentence: it can only learn the majority label.
    assert report["sentence_cls"]["rows"]["layer_0"] == report["sentence_cls"]["baseline"]["accuracy"]
    # The fine-tuned reference is the fine-tuning job's own evaluation of the same data.
    tuned = json.loads((output_dir / "fine_tuned_sentence" / "eval_results.json").read_text())
    assert report["sentence_mean"]["rows"]["fine_tuned"] == pytest.approx(tuned["accuracy"])
    markdown = (output_dir / "report.md").read_text()
    for title in ("## Token level", "## Sentence level: mean", "## Sentence level: [CLS]", "scalar mix of all layers"):
        assert title in markdown
    assert "1 test words carry labels that the training file never has (SYM 1)" in markdown
    assert (output_dir / "layers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (output_dir / "report.partial.json").exists()  # replaced by the complete report
    # A line per part with the overall ETA: features, 2 fine-tunings, 3 sections x 2 models, the mixes.
    assert "probe_layers: 1/10 parts (10%), " in err and "probe_layers: 10/10 parts (100%)" in err


@pytest.fixture(scope="module")
def token_cache(probe_inputs):
    """The --cache_dir flag of a first token-level run (no fine-tuning), which filled it; that run's report."""
    from experiments import probe_layers as tool

    root, flags, _ = probe_inputs
    cache, first_dir = f"--cache_dir={root / 'cache'}", root / "first"
    assert run_main(tool, flags + [f"--output_dir={first_dir}", "--nofinetune", "--tasks=token", cache]) == 0
    return cache, json.loads((first_dir / "report.json").read_text())


def test_a_rerun_reuses_the_cached_features(probe_inputs, token_cache, capsys, monkeypatch):
    from bert_tf.probing import layer_features
    from experiments import probe_layers as tool

    root, flags, _ = probe_inputs
    cache, first_report = token_cache
    assert len(os.listdir(root / "cache")) == 4  # pretrained and random init, train and test

    def no_forward_pass(*args, **kwargs):
        raise AssertionError("features were computed again")

    monkeypatch.setattr(layer_features, "token_features", no_forward_pass)
    second_dir = root / "second"
    code = run_main(tool, flags + [f"--output_dir={second_dir}", "--nofinetune", "--tasks=token", cache])
    assert code == 0, capsys.readouterr().err[-3000:]
    assert json.loads((second_dir / "report.json").read_text())["token"]["rows"] == first_report["token"]["rows"]


def test_a_stopped_run_keeps_the_parts_it_finished(probe_inputs, token_cache, capsys, monkeypatch):
    """Stopped in the scalar mixes, after the linear probes (its features read from the token cache)."""
    from bert_tf import child_process
    from experiments import probe_layers as tool

    root, flags, _ = probe_inputs
    run_in_child_process = child_process.run_in_child_process

    def stopped_at_the_mixes(function, *args, description, **kwargs):
        if description == "the scalar mixes":
            raise KeyboardInterrupt  # Ctrl-C
        return run_in_child_process(function, *args, description=description, **kwargs)

    monkeypatch.setattr(child_process, "run_in_child_process", stopped_at_the_mixes)
    output_dir = root / "stopped"
    code = run_main(tool, flags + [f"--output_dir={output_dir}", "--nofinetune", "--tasks=token", token_cache[0]])
    assert code == 130
    assert capsys.readouterr().err.endswith("probe_layers: error: interrupted\n")
    assert not (output_dir / "report.json").exists()
    partial = json.loads((output_dir / "report.partial.json").read_text())
    assert partial["complete"] is False
    assert set(partial["parts"]) == {"features", "pretrained token", "random_init token"}
    assert set(partial["parts"]["pretrained token"]) >= {f"layer_{i}" for i in range(NUM_LAYERS + 1)}


def test_a_jemalloc_named_but_missing_is_refused_before_any_work(probe_inputs, capsys, monkeypatch):
    from experiments import probe_layers as tool

    root, flags, _ = probe_inputs
    monkeypatch.setenv("BERT_TF_JEMALLOC", str(root / "missing.so"))
    output_dir = root / "refused"
    assert run_main(tool, flags + [f"--output_dir={output_dir}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"BERT_TF_JEMALLOC={root / 'missing.so'}: no such file" in err, err
    assert not output_dir.exists()
