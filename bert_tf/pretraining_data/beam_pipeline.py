"""create_pretraining_data as an Apache Beam pipeline: the local writer's chunks, spread over a runner's workers.

    from bert_tf.pretraining_data import InstanceConfig, beam_pipeline
    beam_pipeline.write_pretraining_data_with_beam(
        ["gs://bucket/corpus/*.txt"], "gs://bucket/data/train.tfrecord", 256, "vocab.txt",
        InstanceConfig(max_seq_length=128, max_predictions_per_seq=20), runner="DataflowRunner",
        pipeline_args=["--project=my-project", "--region=us-central1", "--temp_location=gs://bucket/tmp"])

The launching process reads only the files' sizes and last bytes
(`text_corpus.corpus_layout`). Each worker takes chunk indices, cuts its
chunk from the files on its own (`text_corpus.chunk_span`), tokenizes it
(`writer.tokenize_chunk`), and makes and serializes its instances with the
numpy code of the local writer's helpers (`instance_workers.InstanceBuilder`),
seeded by (seed, chunk index): the same records as the local writer, for the
same input, flags and seed. Record `j` of chunk `k` goes to shard `(k + j) % n`;
each shard is written by one worker with TensorFlow's TFRecord writer under a
temporary name, and the launcher renames the shards when the whole run has
succeeded. The statistics are Beam counters (namespace `NAMESPACE`); the
launcher prints them as the local writer's summary. Needs `apache-beam`
(`pip install 'bert_tf[beam]'`); workers need `bert_tf` installed (Dataflow:
`--setup_file` or a custom container).
"""

import dataclasses
import os
import time
import uuid
from collections.abc import Sequence

import apache_beam as beam
from absl import logging
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from bert_tf.pretraining_data import instance_workers, instances, text_corpus, writer
from bert_tf.pretraining_data.instance_workers import ChunkStats

NAMESPACE = "bert_tf.create_pretraining_data"
_STAT_NAMES = tuple(field.name for field in dataclasses.fields(ChunkStats))


class _ChunkRecords(beam.DoFn):
    """chunk index -> (shard, serialized `tf.train.Example`) of the chunk's instances; counts its `ChunkStats`."""

    def __init__(self, layout, settings, vocab_file, do_lower_case, chunk_bytes, skip_invalid_utf8, num_shards):
        self._layout = layout
        self._settings = settings
        self._vocab_file = vocab_file
        self._do_lower_case = do_lower_case
        self._chunk_bytes = chunk_bytes
        self._skip_invalid_utf8 = skip_invalid_utf8
        self._num_shards = num_shards
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name in (*_STAT_NAMES, "num_chunks")}

    def setup(self):
        self._reader = text_corpus.CorpusReader(self._layout)
        self._tokenize = writer.bert_tokenizer_factory(self._vocab_file, self._do_lower_case)
        self._build = instance_workers.InstanceBuilder(self._settings)

    def process(self, index):
        begin, end = text_corpus.chunk_span(self._reader, index, self._chunk_bytes)
        if end <= begin:
            return
        data = self._reader.read(begin, end)
        try:
            chunk, stats = writer.tokenize_chunk(data, self._tokenize, self._skip_invalid_utf8)
        except UnicodeDecodeError as error:
            raise self._reader.invalid_utf8_error(begin + error.start, error.reason) from None
        records, instance_stats = self._build(index, chunk)
        stats.add(instance_stats)
        for name in _STAT_NAMES:
            self._counters[name].inc(getattr(stats, name))
        self._counters["num_chunks"].inc()
        for j, record in enumerate(records):
            yield (index + j) % self._num_shards, record

    def teardown(self):
        self._reader.close()


class _WriteShard(beam.DoFn):
    """(shard, records) -> the shard's temporary file; counts the shard's records."""

    def __init__(self, temp_files, compression):
        self._temp_files = temp_files
        self._compression = compression

    def process(self, shard_and_records):
        import tensorflow as tf

        shard, records = shard_and_records
        count = 0
        options = tf.io.TFRecordOptions(compression_type=self._compression or "")
        # A retried bundle writes the whole file again under the same name.
        with tf.io.TFRecordWriter(self._temp_files[shard], options) as output:
            for record in records:
                output.write(record)
                count += 1
        Metrics.counter(NAMESPACE, f"shard_{shard:05d}").inc(count)
        yield shard


def build_pipeline(
    pipeline, layout, settings, vocab_file, do_lower_case, chunk_bytes, skip_invalid_utf8, temp_files, compression
):
    """Adds the steps to `pipeline`: chunk indices -> records -> one temporary file per shard."""
    reader = text_corpus.CorpusReader(layout)
    num_chunks = text_corpus.num_chunk_slots(reader, chunk_bytes)
    num_shards = len(temp_files)
    records = (
        pipeline
        | "NumChunks" >> beam.Create([num_chunks])
        | "ChunkIndices" >> beam.FlatMap(lambda n: range(n))
        | "Spread" >> beam.Reshuffle()
        | "Records"
        >> beam.ParDo(
            _ChunkRecords(layout, settings, vocab_file, do_lower_case, chunk_bytes, skip_invalid_utf8, num_shards)
        )
    )
    shards = (
        records | "ByShard" >> beam.GroupByKey() | "WriteShards" >> beam.ParDo(_WriteShard(temp_files, compression))
    )
    return shards


def write_pretraining_data_with_beam(
    input_files: Sequence[str],
    output_file: str,
    num_output_shards: int,
    vocab_file: str,
    config: instances.InstanceConfig,
    *,
    do_lower_case: bool = True,
    seed: int = 12345,
    chunk_bytes: int = 1 << 20,
    compression: str | None = None,
    skip_invalid_utf8: bool = False,
    runner: str = "DirectRunner",
    pipeline_args: Sequence[str] = (),
    units: dict | None = None,
) -> writer.WriteSummary:
    """`writer.write_pretraining_data` on a Beam runner: the same records, in `num_output_shards` shards.

    Args:
        input_files, vocab_file, config, do_lower_case, seed, chunk_bytes,
            compression, skip_invalid_utf8: as `writer.write_pretraining_data`
            (paths may be gs://; every worker reads them).
        output_file: one path; with `num_output_shards` > 1 the shards are
            `output_file-00000-of-0000N` (`writer.resolve_output_files`).
        runner: a Beam runner name (DirectRunner, DataflowRunner, FlinkRunner, ...).
        units: as `writer.write_pretraining_data` (ERNIE's phrase and entity units).
        pipeline_args: Beam pipeline options, e.g. `["--project=p", "--region=r"]`.

    Returns:
        A `WriteSummary` from the run's counters (with `instances_per_file`).

    Raises:
        ValueError (CorpusError for the corpus), FileNotFoundError: bad input
        found before the run (arguments, vocabulary, missing files) or by a
        worker (a line that is not UTF-8, naming file and line; a corpus
        without instances). No shard is left under its final name.
    """

    start_time = time.time()
    output_files = writer.resolve_output_files(output_file, num_output_shards)
    vocab = writer.check_arguments(input_files, output_files, vocab_file, config, compression)
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    layout = text_corpus.corpus_layout(input_files)
    settings = writer.builder_settings(config, vocab, seed, units)
    run_id = uuid.uuid4().hex[:8]
    temp_files = [f"{path}.incomplete-{run_id}" for path in output_files]
    _make_parents(output_files)
    logging.info("Running on %s: %d input file(s), %d shard(s)", runner, len(input_files), len(output_files))
    try:
        pipeline = beam.Pipeline(runner=_runner(runner), options=PipelineOptions(list(pipeline_args)))
        build_pipeline(
            pipeline,
            layout,
            settings,
            vocab_file,
            do_lower_case,
            chunk_bytes,
            skip_invalid_utf8,
            temp_files,
            compression,
        )
        result = _run(pipeline)
        stats, num_chunks, per_shard = _counted(result, len(output_files))
        if stats.num_text_lines == 0:
            raise text_corpus.empty_corpus_error(input_files)
        if stats.num_instances == 0:
            raise text_corpus.CorpusError(
                "no instance was created: no input line has a token in the "
                f"vocabulary {vocab_file} ({stats.num_text_lines} non-blank lines)"
            )
        _commit(temp_files, output_files, compression)
    except BaseException:
        _remove(temp_files)
        raise
    summary = writer.WriteSummary(
        output_files=output_files,
        instances_per_file=per_shard,
        stats=stats,
        input_bytes=layout.num_bytes,
        num_chunks=num_chunks,
        seconds=time.time() - start_time,
        sentence_task=config.sentence_task,
    )
    logging.info("%s", summary.format())
    return summary


def _runner(name: str):
    """A runner name, or for "DirectRunner" Beam's in-process runner of batch pipelines (FnApiRunner).

    Beam's DirectRunner would first try the Prism runner, a separate binary it
    downloads at the first run; its in-process fallback is the runner here.
    """
    if name == "DirectRunner":
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return FnApiRunner()
    return name


def _run(pipeline):
    """Runs to the end; a worker's `CorpusError` comes back as itself, without Beam's step annotation."""
    try:
        result = pipeline.run()
        result.wait_until_finish()
    except text_corpus.CorpusError as error:
        raise text_corpus.CorpusError(str(error).split(" [while running")[0]) from None
    return result


def _counted(result, num_shards):
    """(ChunkStats, chunks, records per shard) from the run's counters (committed where the runner has them)."""
    values = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        values[counter.key.metric.name] = values.get(counter.key.metric.name, 0) + value
    stats = ChunkStats(**{name: values.get(name, 0) for name in _STAT_NAMES})
    per_shard = [values.get(f"shard_{shard:05d}", 0) for shard in range(num_shards)]
    return stats, values.get("num_chunks", 0), per_shard


def _make_parents(paths):
    import tensorflow as tf

    for path in paths:
        parent = os.path.dirname(path)
        if parent and not tf.io.gfile.exists(parent):
            tf.io.gfile.makedirs(parent)


def _commit(temp_files, output_files, compression):
    """Renames the shards into place; a shard that got no record is written empty (as the local writer's)."""
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type=compression or "")
    for temp, path in zip(temp_files, output_files):
        if not tf.io.gfile.exists(temp):
            tf.io.TFRecordWriter(temp, options).close()
        tf.io.gfile.rename(temp, path, overwrite=True)


def _remove(paths):
    import tensorflow as tf

    for path in paths:
        if tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
