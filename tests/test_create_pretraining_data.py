"""Tests of bert_tf.pretraining_data (the writer and its building blocks) and its command line, create_pretraining_data.

Statistics run on a real text sample (tests/fixtures/pretraining/, five
chapters of Sense and Sensibility) tokenized by the in-graph tokenizer.
"""

import os
import pathlib
import random
import re
import signal

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.pretraining_data import example_encoder, text_corpus, writer
from bert_tf.pretraining_data import instances as pi
from tests.helpers.processes import children

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "pretraining"
SAMPLE = FIXTURES / "austen_sample.txt"
VOCAB = FIXTURES / "vocab.txt"

SEQ = 64
PREDICTIONS = 10
FEATURES = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([PREDICTIONS], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([PREDICTIONS], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([PREDICTIONS], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


def _vocab():
    from bert_tf.tokenization import load_vocab

    return load_vocab(str(VOCAB))


def _config(**overrides):
    args = dict(max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=4)
    args.update(overrides)
    return pi.InstanceConfig(**args)


def _write(tmp_path, name="out", config=None, inputs=(SAMPLE,), num_files=2, **kwargs):
    outputs = [str(tmp_path / f"{name}-{i}.tfrecord") for i in range(num_files)]
    summary = writer.write_pretraining_data(
        [str(p) for p in inputs],
        outputs,
        str(VOCAB),
        config or _config(),
        num_workers=kwargs.pop("num_workers", 1),
        **kwargs,
    )
    return outputs, summary


def _read(paths, compression=""):
    dataset = tf.data.TFRecordDataset(paths, compression_type=compression).batch(100000)
    batch = next(iter(dataset.map(lambda r: tf.io.parse_example(r, FEATURES))))
    return {k: v.numpy() for k, v in batch.items()}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("written")
    outputs, summary = _write(tmp)
    return outputs, summary, _read(outputs)


@pytest.fixture(scope="module")
def corpus_tokens():
    """Token ids of the sample: flat stream + the document of every token."""
    from bert_tf.tokenization import BertTokenizer

    tokenizer = BertTokenizer(str(VOCAB), lower_case=True)
    lines, line_documents = [], []
    for document, text in enumerate(SAMPLE.read_text(encoding="utf-8").split("\n\n")):
        for line in text.split("\n"):
            if line.strip():
                lines.append(line)
                line_documents.append(document)
    ragged = tokenizer(tf.constant(lines))
    documents = np.repeat(line_documents, ragged.row_lengths().numpy())
    return ragged.flat_values.numpy().astype(np.int64), documents


def _unmasked(batch):
    ids = batch["input_ids"].copy()
    for row in range(len(ids)):
        real = batch["masked_lm_weights"][row] > 0
        ids[row, batch["masked_lm_positions"][row][real]] = batch["masked_lm_ids"][row][real]
    return ids


def _segments(batch, row, ids):
    length = int(batch["input_mask"][row].sum())
    b_size = int(batch["segment_ids"][row].sum())  # B + its [SEP]
    a_len = length - b_size - 2
    return ids[row, 1 : 1 + a_len], ids[row, a_len + 2 : length - 1], a_len, length


# -- the written files --------------------------------------------------------


def test_writes_exactly_the_original_feature_set(written):
    outputs, summary, _ = written
    for path in outputs:
        record = next(iter(tf.data.TFRecordDataset(path))).numpy()
        feature = tf.train.Example.FromString(record).features.feature
        assert sorted(feature.keys()) == sorted(FEATURES)
        for name in ("input_ids", "input_mask", "segment_ids"):
            assert len(feature[name].int64_list.value) == SEQ
        for name in ("masked_lm_positions", "masked_lm_ids"):
            assert len(feature[name].int64_list.value) == PREDICTIONS
        assert len(feature["masked_lm_weights"].float_list.value) == PREDICTIONS
        assert len(feature["next_sentence_labels"].int64_list.value) == 1
    # Round-robin: the shards differ by at most one instance.
    assert abs(summary.instances_per_file[0] - summary.instances_per_file[1]) <= 1
    assert sum(summary.instances_per_file) == summary.stats.num_instances > 500


def test_layout_fits_and_specials_are_never_masked(written):
    _, _, batch = written
    vocab = _vocab()
    cls_id, sep_id = vocab.index("[CLS]"), vocab.index("[SEP]")
    lengths = batch["input_mask"].sum(axis=1)
    assert lengths.max() <= SEQ and lengths.min() >= 5
    positions = np.arange(SEQ)[None, :]
    np.testing.assert_array_equal(batch["input_mask"], positions < lengths[:, None])
    assert not batch["input_ids"][positions >= lengths[:, None]].any()
    assert not batch["segment_ids"][positions >= lengths[:, None]].any()
    assert (batch["input_ids"][:, 0] == cls_id).all()
    rows = np.arange(len(lengths))
    a_sep = lengths - batch["segment_ids"].sum(axis=1) - 1
    assert (batch["input_ids"][rows, a_sep] == sep_id).all()
    assert (batch["input_ids"][rows, lengths - 1] == sep_id).all()
    # Segment ids: 0 through the first [SEP], then 1 through the last.
    expected_segments = (positions > a_sep[:, None]) & (positions < lengths[:, None])
    np.testing.assert_array_equal(batch["segment_ids"], expected_segments)
    real = batch["masked_lm_weights"] > 0
    masked_positions = np.where(real, batch["masked_lm_positions"], -1)
    assert not (masked_positions == 0).any()
    assert not (masked_positions == a_sep[:, None]).any()
    assert not (masked_positions == (lengths - 1)[:, None]).any()
    assert (masked_positions < lengths[:, None]).all()
    # Predictions come first, sorted, then padding with weight 0, id 0, position 0.
    for row in range(len(lengths)):
        count = int(real[row].sum())
        assert real[row, :count].all() and not real[row, count:].any()
        assert (np.diff(batch["masked_lm_positions"][row, :count]) > 0).all()
        assert not batch["masked_lm_positions"][row, count:].any()
        assert not batch["masked_lm_ids"][row, count:].any()


def test_number_of_predictions_follows_the_original_formula(written):
    _, summary, batch = written
    lengths = batch["input_mask"].sum(axis=1)
    expected = np.minimum(PREDICTIONS, np.maximum(1, [int(round(n * 0.15)) for n in lengths]))
    np.testing.assert_array_equal((batch["masked_lm_weights"] > 0).sum(axis=1), expected)
    assert summary.masked_fraction == pytest.approx(expected.sum() / lengths.sum())


def test_masked_lm_ids_are_the_original_tokens(written, corpus_tokens):
    """Unmasked A and B are spans of the tokenized text, A/B obey the NSP label."""
    _, _, batch = written
    stream, documents = corpus_tokens
    haystack = stream.astype(">i4").tobytes()

    def locate(segment):
        found = haystack.find(segment.astype(">i4").tobytes())
        while found != -1 and found % 4:
            found = haystack.find(segment.astype(">i4").tobytes(), found + 1)
        return -1 if found == -1 else found // 4

    ids = _unmasked(batch)
    checked_actual = checked_random = 0
    for row in range(len(ids)):
        a, b, _, _ = _segments(batch, row, ids)
        a_at, b_at = locate(a), locate(b)
        assert a_at >= 0 and b_at >= 0, f"instance {row}: A or B is not a span of the text"
        if len(a) < 12 or len(b) < 12:
            continue  # short spans may occur more than once
        same_document = documents[a_at] == documents[b_at]
        if batch["next_sentence_labels"][row, 0] == 0:
            assert same_document and b_at >= a_at + len(a), f"instance {row}"
            checked_actual += 1
        else:
            assert not same_document, f"instance {row}: random B from A's document"
            checked_random += 1
    assert checked_actual > 100 and checked_random > 100


def test_mask_random_keep_split_and_nsp_split(written):
    _, summary, batch = written
    vocab = _vocab()
    real = batch["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(real))[:, None], real.shape)
    in_input = batch["input_ids"][rows, batch["masked_lm_positions"]][real]
    original = batch["masked_lm_ids"][real]
    total = real.sum()
    assert total > 5000
    mask_share = np.mean(in_input == vocab.index("[MASK]"))
    keep_share = np.mean(in_input == original)
    random_share = 1 - mask_share - keep_share
    assert abs(mask_share - 0.8) < 0.02
    assert abs(keep_share - 0.1) < 0.02  # includes random draws equal to the original
    assert abs(random_share - 0.1) < 0.02
    # Random replacements come from the whole vocabulary.
    randoms = in_input[(in_input != original) & (in_input != vocab.index("[MASK]"))]
    expected_distinct = len(vocab) * (1 - (1 - 1 / len(vocab)) ** len(randoms))  # if uniform
    assert len(np.unique(randoms)) > 0.9 * expected_distinct
    labels = batch["next_sentence_labels"][:, 0]
    s = summary.stats
    assert s.num_random_next == labels.sum()
    # A segment of one sentence always gets a random B; the others flip a coin.
    assert 0 < s.num_one_sentence < 0.5 * s.num_instances
    coin = (s.num_random_next - s.num_one_sentence) / (s.num_instances - s.num_one_sentence)
    assert abs(coin - 0.5) < 0.07
    assert s.num_mask_token + s.num_random_token + s.num_kept_token == s.num_masked == total


def test_whole_word_masking_masks_whole_words(tmp_path):
    vocab = _vocab()
    is_piece = np.array([t.startswith("##") for t in vocab])
    outputs, _ = _write(tmp_path, config=_config(masking="whole_word", dupe_factor=2), num_files=1)
    batch = _read(outputs)
    ids = _unmasked(batch)
    real = batch["masked_lm_weights"] > 0
    lengths = batch["input_mask"].sum(axis=1)
    grouped = 0
    for row in range(len(ids)):
        masked = set(batch["masked_lm_positions"][row][real[row]].tolist())
        a_sep = lengths[row] - batch["segment_ids"][row].sum() - 1
        special = {0, a_sep, lengths[row] - 1}
        for position in masked:
            # The word's earlier pieces are masked ...
            if is_piece[ids[row, position]] and position - 1 not in special:
                assert position - 1 in masked, f"instance {row}, position {position}"
                grouped += 1
            # ... and so are its later pieces.
            following = position + 1
            if following < lengths[row] and following not in special and is_piece[ids[row, following]]:
                assert following in masked, f"instance {row}, position {following}"
        assert len(masked) <= min(PREDICTIONS, max(1, round(lengths[row] * 0.15)))
    assert grouped > 100


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, written):
    outputs, _, _ = written
    again, _ = _write(tmp_path, "again")
    other, _ = _write(tmp_path, "other", seed=7)
    for first, second, third in zip(outputs, again, other):
        assert pathlib.Path(first).read_bytes() == pathlib.Path(second).read_bytes()
        assert pathlib.Path(first).read_bytes() != pathlib.Path(third).read_bytes()


def _run_cli(argv):
    """Runs the absl entry point in this process; returns its exit code."""
    from tests.helpers.absl_flags import run_main
    from tfrecords_tools import create_pretraining_data

    return run_main(create_pretraining_data, argv)


def test_cli_with_two_workers_matches_one_worker(tmp_path, caplog):
    """The absl entry point, 2 processes and 2 small chunks: same bytes as 1 in-process worker."""
    single, _ = _write(tmp_path, "single", chunk_bytes=20000)
    caplog.set_level("INFO", logger="absl")
    before = set(children())
    code = _run_cli(
        [
            f"--input_file={FIXTURES}/austen_*.txt",
            f"--vocab_file={VOCAB}",
            f"--output_file={tmp_path}/cli.tfrecord",
            "--num_output_shards=2",
            f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDICTIONS}",
            "--dupe_factor=4",
            f"--chunk_mb={20000 / 2**20}",
            "--num_workers=2",
        ]
    )
    assert code == 0
    assert "Masked:" in caplog.text and "Next sentence:" in caplog.text and "2 chunks" in caplog.text
    shards = sorted(tmp_path.glob("cli.tfrecord-*"))
    assert [p.name for p in shards] == ["cli.tfrecord-00000-of-00002", "cli.tfrecord-00001-of-00002"]
    for ours, theirs in zip(single, shards):
        assert pathlib.Path(ours).read_bytes() == theirs.read_bytes()
    assert not list(tmp_path.glob("*incomplete*"))
    assert set(children()) <= before  # the helper was stopped and reaped


def test_cli_reports_bad_flags_before_writing(tmp_path, capsys):
    common = [f"--input_file={SAMPLE}", f"--vocab_file={VOCAB}", f"--output_file={tmp_path}/o/x"]
    assert _run_cli(common + ["--masked_lm_prob=1.5"]) == 2
    assert "--masked_lm_prob=1.5 must be in (0, 1)" in capsys.readouterr().err
    assert _run_cli(common[1:]) == 2
    assert "--input_file is required" in capsys.readouterr().err
    assert _run_cli(common + ["--num_output_shards=0"]) == 2
    assert "--num_output_shards=0" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_gzip_output(tmp_path):
    outputs, summary = _write(tmp_path, config=_config(dupe_factor=1), num_files=1, compression="GZIP")
    assert pathlib.Path(outputs[0]).read_bytes()[:2] == b"\x1f\x8b"
    assert len(_read(outputs, "GZIP")["input_ids"]) == summary.stats.num_instances


def test_unmasked_output(tmp_path):
    outputs, _ = _write(tmp_path, config=_config(dupe_factor=1, do_masking=False), num_files=1)
    batch = _read(outputs)
    assert not batch["masked_lm_weights"].any() and not batch["masked_lm_positions"].any()
    assert not (batch["input_ids"] == _vocab().index("[MASK]")).any()


# -- bad input ------------------------------------------------------------------


def _assert_nothing_written(directory):
    assert not list(pathlib.Path(directory).glob("*")), list(pathlib.Path(directory).glob("*"))


def test_missing_vocab_file(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(FileNotFoundError, match="missing_vocab.txt"):
        writer.write_pretraining_data(
            [str(SAMPLE)], [str(out / "x.tfrecord")], str(tmp_path / "missing_vocab.txt"), _config()
        )
    assert not out.exists()


def test_missing_input_and_empty_glob():
    with pytest.raises(text_corpus.CorpusError, match="file not found: .*nope.txt"):
        text_corpus.resolve_input_files(f"{SAMPLE},{FIXTURES}/nope.txt")
    with pytest.raises(text_corpus.CorpusError, match=r"pattern '.*\*\.nothing' matches no file"):
        text_corpus.resolve_input_files(f"{FIXTURES}/*.nothing")
    assert text_corpus.resolve_input_files(f"{FIXTURES}/austen_*.txt, {SAMPLE}") == [str(SAMPLE)] * 2


def test_empty_corpus(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\t\n\n")
    out = tmp_path / "out"
    with pytest.raises(text_corpus.CorpusError, match="empty.*empty.txt"):
        _write(out, inputs=[empty])
    assert not out.exists() or not list(out.iterdir())


def test_invalid_utf8_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\nAnother one.\nBroken \xff\xfe here.\n\nNext document.\nLast.\n")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(text_corpus.CorpusError, match=r"bad.txt:3: not valid UTF-8"):
        _write(out, inputs=[bad])
    _assert_nothing_written(out)
    outputs, summary = _write(out, inputs=[bad], num_files=1, skip_invalid_utf8=True)
    assert summary.stats.num_invalid_utf8_lines == 1
    assert summary.stats.num_text_lines == 4
    assert "1 not UTF-8" in summary.format()
    assert os.path.exists(outputs[0])


def test_max_predictions_below_the_rate_caps_as_the_original(tmp_path):
    # round(64 * 0.15) = 10 predictions wanted; the original accepts a cap of 3 and masks long instances less.
    config = _config(max_predictions_per_seq=3, dupe_factor=1)
    config.validate()
    assert config.masking_shortfall() == 7 and _config().masking_shortfall() == 0
    outputs, _ = _write(tmp_path, config=config, num_files=1)
    spec = dict(
        FEATURES,
        **{
            name: tf.io.FixedLenFeature([3], FEATURES[name].dtype)
            for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
        },
    )
    batch = next(iter(tf.data.TFRecordDataset(outputs).batch(100000).map(lambda r: tf.io.parse_example(r, spec))))
    predictions = batch["masked_lm_weights"].numpy().sum(axis=1)
    lengths = batch["input_mask"].numpy().sum(axis=1)
    expected = np.minimum(3, np.maximum(1, [int(round(n * 0.15)) for n in lengths]))
    np.testing.assert_array_equal(predictions, expected)
    assert (predictions == 3).any()


def test_bad_instance_flags_name_the_flag():
    for bad, flag in [
        (dict(max_seq_length=4), "--max_seq_length"),
        (dict(dupe_factor=0), "--dupe_factor"),
        (dict(masked_lm_prob=1.5), "--masked_lm_prob"),
        (dict(short_seq_prob=-0.1), "--short_seq_prob"),
        (dict(max_predictions_per_seq=0), "--max_predictions_per_seq"),
    ]:
        with pytest.raises(ValueError, match=flag):
            _config(**bad).validate()


def test_failure_mid_run_leaves_no_output(tmp_path):
    calls = []

    def failing_factory(vocab_file, do_lower_case):
        real = writer.bert_tokenizer_factory(vocab_file, do_lower_case)

        def tokenize(lines):
            calls.append(len(lines))
            if len(calls) > 2:
                raise RuntimeError("tokenizer broke")
            return real(lines)

        return tokenize

    with pytest.raises(RuntimeError, match="tokenizer broke"):
        _write(tmp_path, chunk_bytes=5000, tokenizer_factory=failing_factory)
    _assert_nothing_written(tmp_path)


def test_a_helper_killed_mid_run_fails_the_run_in_one_line_and_leaves_nothing(tmp_path, capfd, monkeypatch):
    """A helper killed from outside (as the OOM killer does): exit status 1, one error line naming the
    helper's exit status, no output file (not even a temporary one), no process left behind."""
    before = set(children())
    tokenized = []
    tokenize_chunk = writer.tokenize_chunk

    def tokenize_then_kill_the_helpers(*args):
        result = tokenize_chunk(*args)
        tokenized.append(1)
        if len(tokenized) == 3:
            for pid in set(children()) - before:
                os.kill(pid, signal.SIGKILL)
        return result

    monkeypatch.setattr(writer, "tokenize_chunk", tokenize_then_kill_the_helpers)
    out = tmp_path / "out"
    out.mkdir()
    capfd.readouterr()
    code = _run_cli(
        [
            f"--input_file={SAMPLE}",
            f"--vocab_file={VOCAB}",
            f"--output_file={out}/x.tfrecord",
            f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDICTIONS}",
            "--dupe_factor=1",
            f"--chunk_mb={5000 / 2**20}",
            "--num_workers=2",
        ]
    )
    err = capfd.readouterr().err
    assert code == 1, err[-3000:]
    assert len(tokenized) >= 3 and "Traceback" not in err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and err.endswith(errors[0] + "\n"), err[-3000:]
    assert re.fullmatch(
        r"create_pretraining_data: error: instance helper process \d+ exited with status -9 \(killed by SIGKILL\); "
        "no output was written",
        errors[0],
    )
    _assert_nothing_written(out)
    assert set(children()) <= before


def test_a_negative_seed_is_accepted_and_gives_its_own_output(tmp_path):
    """As in the original, any integer seed works (`instances.chunk_seeds` maps negative ones)."""
    code = _run_cli(
        [
            f"--input_file={SAMPLE}",
            f"--vocab_file={VOCAB}",
            f"--output_file={tmp_path}/cli.tfrecord",
            f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDICTIONS}",
            "--dupe_factor=1",
            f"--chunk_mb={20000 / 2**20}",
            "--num_workers=2",
            "--random_seed=-1",
        ]
    )
    assert code == 0
    config = _config(dupe_factor=1)
    (here,), _ = _write(tmp_path, "here", config=config, num_files=1, chunk_bytes=20000, seed=-1)
    (positive,), _ = _write(tmp_path, "positive", config=config, num_files=1, chunk_bytes=20000, seed=1)
    cli_bytes = (tmp_path / "cli.tfrecord").read_bytes()
    assert cli_bytes == pathlib.Path(here).read_bytes() != pathlib.Path(positive).read_bytes()
    seeds = {seed: pi.chunk_seeds(seed, 3)[0] for seed in (-1, 0, 1, 2**40, -(2**40))}
    assert len(set(seeds.values())) == len(seeds)


def test_output_file_lists_and_shards():
    assert writer.resolve_output_files("a,b", None) == ["a", "b"]
    assert writer.resolve_output_files("o.tfrecord", 3) == [f"o.tfrecord-0000{i}-of-00003" for i in range(3)]
    with pytest.raises(ValueError, match="--num_output_shards=3"):
        writer.resolve_output_files("a,b", 3)
    with pytest.raises(ValueError, match="twice"):
        writer.resolve_output_files("a,a", None)


# -- building blocks ---------------------------------------------------------------


def test_chunks_are_cut_between_documents(tmp_path):
    first = tmp_path / "one.txt"
    second = tmp_path / "two.txt"
    documents = [[f"doc {d} sentence {s}." for s in range(1 + d % 7)] for d in range(60)]
    first.write_text("\n\n".join("\n".join(d) for d in documents[:40]))  # no final newline
    second.write_text("\n\n".join("\n".join(d) for d in documents[40:]) + "\n")
    indexed = list(text_corpus.iter_chunks([str(first), str(second)], chunk_bytes=200))
    indices = [index for index, _ in indexed]
    assert indices == sorted(set(indices))
    chunks = [chunk for _, chunk in indexed]
    assert len(chunks) > 5
    seen = []
    for chunk in chunks:
        text = chunk.decode()
        assert text.endswith("\n")
        for document in text.split("\n\n"):
            lines = [line for line in document.split("\n") if line]
            if lines:
                seen.append(lines)
    assert seen == documents  # no document cut, none lost, file end = document end
    # A corpus without blank lines is still cut, at line boundaries, with bounded chunks.
    one_document = tmp_path / "long.txt"
    one_document.write_text("".join(f"sentence number {i}.\n" for i in range(2000)))
    chunks = [chunk for _, chunk in text_corpus.iter_chunks([str(one_document)], chunk_bytes=1000)]
    assert len(chunks) > 5 and max(len(c) for c in chunks) <= 4 * 1000 + 100
    assert b"".join(chunks).replace(b"\n\n", b"\n") == one_document.read_bytes()


def test_any_chunk_is_cut_alone_as_in_the_sequence(tmp_path):
    """`chunk_span` of one index (what a Beam worker computes) is the chunk `iter_chunks` yields at that index."""
    rng = random.Random(7)
    files = []
    for f in range(4):
        lines = []
        for _ in range(rng.randrange(0, 60)):
            kind = rng.random()
            lines.append("" if kind < 0.2 else " \t" if kind < 0.25 else "w" * rng.randrange(1, 90))
        path = tmp_path / f"f{f}.txt"
        path.write_text("\n".join(lines) + ("\n" if f % 2 else ""))
        files.append(str(path))
    layout = text_corpus.corpus_layout(files)
    contents = [pathlib.Path(p).read_bytes() for p in files]
    # Each file, a newline added if it lacks its last one, then a blank line.
    stream = b"".join(c + b"\n" * (bool(c) and not c.endswith(b"\n")) + b"\n" for c in contents)
    for chunk_bytes in (1, 7, 50, 333, 10**6):
        sequence = list(text_corpus.iter_chunks(files, chunk_bytes, layout))
        assert b"".join(chunk for _, chunk in sequence) == stream
        reader = text_corpus.CorpusReader(layout)
        alone = []
        for index in range(text_corpus.num_chunk_slots(reader, chunk_bytes)):
            begin, end = text_corpus.chunk_span(reader, index, chunk_bytes)
            if end > begin:
                alone.append((index, reader.read(begin, end)))
        assert alone == sequence


def _reference_truncation(a_length, b_length, max_tokens):
    a, b = a_length, b_length
    while a + b > max_tokens:
        if a > b:
            a -= 1
        else:
            b -= 1
    return a_length - a, b_length - b


def test_truncation_matches_the_original_pop_loop():
    rng = np.random.default_rng(0)
    a = rng.integers(1, 200, 2000)
    b = rng.integers(1, 200, 2000)
    spans = pi.PairSpans(
        np.zeros(2000, np.int64), a, np.full(2000, 1000), b, np.zeros(2000, np.int32), np.zeros(2000, bool)
    )
    cut = pi.truncate_pairs(spans, 125, rng)
    expected = np.array([_reference_truncation(x, y, 125) for x, y in zip(a, b)])
    np.testing.assert_array_equal(a - cut.a_length, expected[:, 0])
    np.testing.assert_array_equal(b - cut.b_length, expected[:, 1])
    assert ((cut.a_length + cut.b_length) <= 125).all() and (cut.a_length >= 1).all()
    # Front removals are about half of all removals, and stay inside the cut.
    front = cut.a_start.sum() + (cut.b_start - 1000).sum()
    assert abs(front / expected.sum() - 0.5) < 0.02
    assert (cut.a_start <= expected[:, 0]).all() and (cut.b_start - 1000 <= expected[:, 1]).all()


def test_pairs_put_unused_sentences_back():
    """Every sentence is used by the A segment of some instance in each dupe round."""
    documents = [[[d * 1000 + s * 10 + t for t in range(3 + (s % 5))] for s in range(40)] for d in range(40)]
    chunk = pi.DocumentChunk.from_documents(documents)
    config = pi.InstanceConfig(
        max_seq_length=20, max_predictions_per_seq=3, dupe_factor=1, short_seq_prob=0.0
    )  # one round: coverage is per round
    spans = pi.create_pair_spans(chunk, config, random.Random(3))
    covered = np.zeros(chunk.num_tokens, bool)
    for start, length, b_start, b_length, is_random, one in zip(
        spans.a_start, spans.a_length, spans.b_start, spans.b_length, spans.is_random_next, spans.one_sentence
    ):
        assert is_random or not one
        covered[start : start + length] = True
        if not is_random:
            assert b_start == start + length  # B continues A
            covered[b_start : b_start + b_length] = True
    assert covered.all()
    coin = spans.is_random_next[~spans.one_sentence]
    assert len(coin) > 400 and abs(coin.mean() - 0.5) < 0.08


def test_short_seq_prob_shortens_segments():
    documents = [[[d * 1000 + s * 10 + t for t in range(4)] for s in range(200)] for d in range(20)]
    chunk = pi.DocumentChunk.from_documents(documents)

    def segment_lengths(short_seq_prob):
        config = pi.InstanceConfig(
            max_seq_length=64, max_predictions_per_seq=10, dupe_factor=3, short_seq_prob=short_seq_prob
        )
        spans = pi.create_pair_spans(chunk, config, random.Random(0))
        actual = spans.is_random_next == 0
        return (spans.a_length + spans.b_length)[actual]

    never, always = segment_lengths(0.0), segment_lengths(1.0)
    # Without short targets an actual-next pair has >= 61 tokens (sentences of 4),
    # except a document's last segment; with them, targets are uniform in [2, 61]
    # (short targets make more, shorter instances).
    assert np.mean(never >= 61) > 0.9
    assert np.mean(always >= 61) < 0.2 and always.mean() < 40


def test_create_instances_is_seeded_per_chunk():
    documents = [[[5 + (d * 31 + s * 7 + t) % 50 for t in range(8)] for s in range(12)] for d in range(5)]
    chunk = pi.DocumentChunk.from_documents(documents)
    vocab = pi.VocabInfo.from_tokens(["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"] + [f"w{i}" for i in range(60)])
    config = pi.InstanceConfig(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2)

    def run(seed, index):
        batches = list(pi.create_instances(chunk, config, vocab, seed, chunk_index=index, batch_size=7))
        return np.concatenate([b.input_ids for b in batches]), np.concatenate([b.masked_lm_positions for b in batches])

    first = run(1, 0)
    np.testing.assert_array_equal(first[0], run(1, 0)[0])
    np.testing.assert_array_equal(first[1], run(1, 0)[1])
    assert not np.array_equal(first[0], run(2, 0)[0])
    assert not np.array_equal(first[0], run(1, 1)[0])
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        pi.VocabInfo.from_tokens(["[CLS]", "[SEP]", "a"], "my_vocab.txt")


def test_example_encoder_round_trip():
    rng = np.random.default_rng(1)
    encoder = example_encoder.ExampleEncoder(["small", "large", "empty"], ["weights"])
    features = {
        "small": rng.integers(0, 2, (50, 7)),
        "large": rng.integers(0, 2**40, (50, 3)) * rng.integers(0, 2, (50, 3)),
        "empty": np.zeros((50, 0), np.int64),
        "weights": rng.normal(size=(50, 4)).astype(np.float32),
    }
    records = encoder.encode(features)
    assert len(records) == 50
    for row, record in enumerate(records):
        feature = tf.train.Example.FromString(record).features.feature
        assert list(feature["small"].int64_list.value) == features["small"][row].tolist()
        assert list(feature["large"].int64_list.value) == features["large"][row].tolist()
        assert list(feature["empty"].int64_list.value) == []
        np.testing.assert_array_equal(
            np.array(feature["weights"].float_list.value, np.float32), features["weights"][row]
        )
    with pytest.raises(ValueError, match="negative"):
        encoder.encode(dict(features, small=-features["small"] - 1))
