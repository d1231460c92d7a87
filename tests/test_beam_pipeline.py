"""Tests of bert_tf.pretraining_data.beam_pipeline and `create_pretraining_data --runner`, on Beam's DirectRunner.

The Beam run and the local writer get the same small corpus (the Austen sample
cut into several files, with a line that has no token and files with and
without a final newline) and must write the same multiset of records.
"""

import sys

import pytest
import tensorflow as tf

import bert_tf.pretraining_data
from bert_tf.data import pretraining_schema
from bert_tf.pretraining_data import beam_pipeline, text_corpus, writer
from bert_tf.pretraining_data import instances as pi
from tests.helpers.absl_flags import run_main
from tests.test_create_pretraining_data import PREDICTIONS, SAMPLE, SEQ, VOCAB

CHUNK_BYTES = 6000  # several chunks per file, some chunks across file ends


def _config(**overrides):
    return pi.InstanceConfig(
        **{"max_seq_length": SEQ, "max_predictions_per_seq": PREDICTIONS, "dupe_factor": 2, **overrides}
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three files: the sample's documents split unevenly; a line of control characters only (no token)."""
    folder = tmp_path_factory.mktemp("corpus")
    documents = SAMPLE.read_text(encoding="utf-8").split("\n\n")
    third = len(documents) // 3
    parts = [documents[:1], documents[1:third], documents[third:]]
    paths = []
    for i, part in enumerate(parts):
        text = "\n\n".join(part)
        if i == 1:
            text = "\x00\x01\x02\n" + text
        path = folder / f"part{i}.txt"
        path.write_text(text + ("\n" if i != 2 else ""), encoding="utf-8")  # the last one has no final newline
        paths.append(str(path))
    return paths


def _records(paths, compression=""):
    return sorted(bytes(r.numpy()) for r in tf.data.TFRecordDataset(paths, compression_type=compression))


def _local(tmp_path, inputs, config, **kwargs):
    outputs = [str(tmp_path / "local.tfrecord")]
    summary = writer.write_pretraining_data(
        inputs, outputs, str(VOCAB), config, num_workers=1, chunk_bytes=CHUNK_BYTES, **kwargs
    )
    return _records(outputs), summary


@pytest.mark.parametrize("sentence_task", ["nsp", "sop"])
def test_same_records_and_statistics_as_the_local_writer(tmp_path, corpus, sentence_task):
    config = _config(sentence_task=sentence_task, masking="whole_word" if sentence_task == "sop" else "token")
    expected, local = _local(tmp_path, corpus, config, seed=3)
    summary = beam_pipeline.write_pretraining_data_with_beam(
        corpus, str(tmp_path / "beam.tfrecord"), 3, str(VOCAB), config, seed=3, chunk_bytes=CHUNK_BYTES
    )
    assert summary.output_files == [str(tmp_path / f"beam.tfrecord-0000{i}-of-00003") for i in range(3)]
    assert [len(_records([path])) for path in summary.output_files] == summary.instances_per_file
    assert _records(summary.output_files) == expected
    assert summary.stats == local.stats
    assert local.stats.num_empty_token_lines == 1 and local.num_chunks > 3
    assert (summary.num_chunks, summary.input_bytes) == (local.num_chunks, local.input_bytes)
    # Another seed, other records: the equality above is not a coincidence of fixed draws.
    other = beam_pipeline.write_pretraining_data_with_beam(
        corpus, str(tmp_path / "other.tfrecord"), 1, str(VOCAB), config, seed=4, chunk_bytes=CHUNK_BYTES
    )
    assert _records(other.output_files) != expected


@pytest.mark.parametrize("do_masking", [True, False])
def test_ernie_phrase_records_are_the_local_writers(tmp_path, corpus, do_masking):
    from bert_tf.pretraining_data import knowledge_units

    phrases = tmp_path / "phrases.txt"
    phrases.write_text("mrs dashwood\njohn dashwood\nthousand pounds\n", encoding="utf-8")
    config = _config(masking="phrase", do_masking=do_masking)
    units = knowledge_units.unit_tables("phrase", do_masking, str(VOCAB), True, str(phrases))
    expected, local = _local(tmp_path, corpus, config, seed=5, units=units)
    summary = beam_pipeline.write_pretraining_data_with_beam(
        corpus, str(tmp_path / "beam.tfrecord"), 2, str(VOCAB), config, seed=5, chunk_bytes=CHUNK_BYTES, units=units
    )
    assert _records(summary.output_files) == expected
    assert summary.stats == local.stats
    if do_masking:
        assert local.stats.num_masked_units > 0
    else:  # unmasked records carry the units' flags for dynamic masking, on Beam too
        feature = pretraining_schema.UNIT_FEATURES["phrase"]
        example = tf.train.Example.FromString(expected[0])
        assert feature in example.features.feature


def _run_cli(argv):
    from tfrecords_tools import create_pretraining_data

    return run_main(create_pretraining_data, argv)


def _cli_flags(inputs, output, *extra):
    return [
        f"--input_file={','.join(inputs)}",
        f"--output_file={output}",
        f"--vocab_file={VOCAB}",
        f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PREDICTIONS}",
        "--dupe_factor=2",
        f"--chunk_mb={CHUNK_BYTES / 2**20}",
        *extra,
    ]


def test_cli_direct_runner_writes_the_local_records_with_its_summary(tmp_path, corpus, caplog):
    caplog.set_level("INFO", logger="absl")
    assert _run_cli(_cli_flags(corpus, tmp_path / "local.tfrecord", "--num_workers=1")) == 0
    out = tmp_path / "beam" / "train.tfrecord"
    flags = _cli_flags(corpus, out, "--runner=DirectRunner", "--num_output_shards=2", "--compression=GZIP")
    assert _run_cli([*flags, "--beam_pipeline_options=direct_num_workers=1"]) == 0
    shards = sorted(str(p) for p in out.parent.iterdir())
    assert shards == [f"{out}-00000-of-00002", f"{out}-00001-of-00002"]
    assert _records(shards, "GZIP") == _records([str(tmp_path / "local.tfrecord")])
    summaries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Wrote ")]
    assert len(summaries) == 2 and "Next sentence:" in summaries[1] and f"{out}-00001-of-00002:" in summaries[1]


def test_not_utf8_fails_naming_file_and_line_or_is_skipped_as_locally(tmp_path, corpus, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\n\nAnother one.\nBroken \xff\xfe here.\nLast.\n")
    inputs = [corpus[0], str(bad)]
    out = tmp_path / "out" / "beam.tfrecord"
    assert _run_cli(_cli_flags(inputs, out, "--runner=DirectRunner")) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert not any("Traceback" in line for line in error)  # Beam's log of the worker's exception is left out
    assert error[-1] == (
        f"create_pretraining_data: error: {bad}:4: not valid UTF-8 (invalid start byte at byte 7 of the line). "
        "Fix the file or pass --skip_invalid_utf8 to skip such lines."
    )
    assert not out.parent.exists() or list(out.parent.iterdir()) == []  # no shard, no temporary file
    expected, local = _local(tmp_path, inputs, _config(), skip_invalid_utf8=True)
    summary = beam_pipeline.write_pretraining_data_with_beam(
        inputs, str(out), 1, str(VOCAB), _config(), chunk_bytes=CHUNK_BYTES, skip_invalid_utf8=True
    )
    assert summary.stats.num_invalid_utf8_lines == local.stats.num_invalid_utf8_lines == 1
    assert _records([str(out)]) == expected


def test_a_corpus_without_tokens_fails_and_leaves_nothing(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\x00\x01\n\n\x02\n", encoding="utf-8")
    with pytest.raises(text_corpus.CorpusError, match="no instance was created"):
        beam_pipeline.write_pretraining_data_with_beam([str(blank)], str(tmp_path / "o"), 2, str(VOCAB), _config())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.txt"]


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--runner=DirectRunner", "--num_workers=2"], "--num_workers"),
        (["--beam_pipeline_options=direct_num_workers=1"], "--beam_pipeline_options"),
    ],
)
def test_bad_runner_flags_exit_2_naming_the_flag(tmp_path, corpus, capsys, extra, named):
    assert _run_cli(_cli_flags(corpus, tmp_path / "o", *extra)) == 2
    assert named in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_output_file_list_is_refused_on_beam(tmp_path, corpus, capsys):
    assert _run_cli(_cli_flags(corpus, f"{tmp_path}/a,{tmp_path}/b", "--runner=DirectRunner")) == 2
    assert "one --output_file" in capsys.readouterr().err


def test_without_apache_beam_the_runner_flag_exits_2_with_the_install_command(tmp_path, corpus, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # import apache_beam raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "bert_tf.pretraining_data.beam_pipeline")
    monkeypatch.delattr(bert_tf.pretraining_data, "beam_pipeline")
    assert _run_cli(_cli_flags(corpus, tmp_path / "o", "--runner=DataflowRunner")) == 2
    assert "pip install 'bert_tf[beam]'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
