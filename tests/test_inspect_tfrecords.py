"""Tests of bert_tf.pretraining_data.inspection and its command line, tfrecords_tools.inspect_tfrecords."""

import io
import os
import pathlib
import re
import subprocess
import sys

import pytest

from bert_tf.pretraining_data import inspection, writer
from bert_tf.pretraining_data import instances as pi

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "pretraining"
VOCAB = FIXTURES / "vocab.txt"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inspect")
    outputs = [str(tmp / "a.tfrecord.gz"), str(tmp / "b.tfrecord.gz")]
    summary = writer.write_pretraining_data(
        [str(FIXTURES / "austen_sample.txt")],
        outputs,
        str(VOCAB),
        pi.InstanceConfig(max_seq_length=48, max_predictions_per_seq=8, dupe_factor=2),
        num_workers=1,
        compression="GZIP",
    )
    return tmp, summary


def test_prints_instances_with_masks_and_statistics(records):
    tmp, summary = records
    out = io.StringIO()
    stats = inspection.inspect(f"{tmp}/*.tfrecord.gz", str(VOCAB), num=3, out=out)
    text = out.getvalue()
    assert "seq_length 48, max_predictions_per_seq 8" in text
    instances = re.findall(r"Instance (\d+): length (\d+), (\d+) masked, next sentence: (random|actual)", text)
    assert [int(i[0]) for i in instances] == [0, 1, 2]
    assert text.count("  A: [CLS] ") == 3 and text.count(" [SEP]\n  B: ") == 3
    # Every prediction is shown as {input token->original token}.
    marks = re.findall(r"\{(\S+)->(\S+)\}", text)
    assert len(marks) == sum(int(i[2]) for i in instances) > 0
    vocab = set(VOCAB.read_text().split("\n"))
    assert all(a in vocab and b in vocab for a, b in marks)
    assert sum(a == "[MASK]" for a, _ in marks) > 0
    assert not any(b in ("[CLS]", "[SEP]", "[PAD]") for _, b in marks)
    # Statistics agree with what the writer counted.
    assert stats.num_records == summary.stats.num_instances
    assert f"Records: {summary.stats.num_instances:,}" in text
    assert stats.num_random_next == summary.stats.num_random_next
    # The file cannot tell a random draw of [MASK] (or of the original) from the real thing.
    assert 0 <= stats.num_mask_token - summary.stats.num_mask_token <= 5
    assert 0 <= stats.num_kept - summary.stats.num_kept_token <= 5
    assert stats.num_special_masked == 0
    assert "Predictions on [CLS]/[SEP] positions: 0" in text
    share = re.search(r"Replacement: \[MASK\] ([\d.]+)%, random ([\d.]+)%, kept ([\d.]+)%", text)
    assert abs(float(share.group(1)) - 80) < 4 and abs(float(share.group(2)) - 10) < 4


def test_without_vocab_prints_ids_and_limits_records(records):
    tmp, _ = records
    out = io.StringIO()
    stats = inspection.inspect(f"{tmp}/a.tfrecord.gz", None, num=1, max_records=10, out=out)
    assert stats.num_records == 10
    assert re.search(r"A: \d+ ", out.getvalue())
    assert "Kept (input token = label)" in out.getvalue()


def test_cli(records):
    tmp, summary = records
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tfrecords_tools.inspect_tfrecords", f"--vocab_file={VOCAB}", "--num=2"]
    result = subprocess.run(
        command + [f"--input_file={tmp}/a.tfrecord.gz,{tmp}/b.tfrecord.gz"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Instance 1:" in result.stdout and "Instance 2:" not in result.stdout
    assert f"Records: {summary.stats.num_instances:,}" in result.stdout


def test_missing_files_and_foreign_records(tmp_path):
    import tensorflow as tf

    with pytest.raises(ValueError, match=r"none-\*.*matches no file"):
        inspection.inspect(f"{tmp_path}/none-*", str(VOCAB), out=io.StringIO())
    other = tmp_path / "other.tfrecord"
    with tf.io.TFRecordWriter(str(other)) as writer:
        feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2]))
        writer.write(tf.train.Example(features=tf.train.Features(feature={"label": feature})).SerializeToString())
    with pytest.raises(ValueError, match="no 'input_ids' feature"):
        inspection.inspect(str(other), None, out=io.StringIO())
