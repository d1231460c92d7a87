"""Text corpus -> BERT pretraining TFRecords, streaming and in parallel.

The corpus is cut into document-aligned chunks (`text_corpus.iter_chunks`).
This process tokenizes each chunk in batches with the in-graph WordPiece
tokenizer; the chunk's token ids then go to a helper process (or, when they
are all busy, stay here) to be turned into instances (`instances`)
and serialized (`example_encoder`); see `instance_workers`. This process
writes the records round-robin to the output shards, in chunk order. Every
random draw of a chunk depends only on (seed, chunk index), so the output
bytes depend on the seed and the input only, not on the worker count or on
which process computed what. Memory is bounded by the chunks in flight, not
by the corpus size, and only this process loads TensorFlow (when it tokenizes
and writes: importing this module loads neither TensorFlow nor Keras).
"""

import collections
import dataclasses
import os
import time
import uuid
from collections.abc import Callable, Sequence

import numpy as np
from absl import logging

from bert_tf.data.pretraining_schema import KNOWLEDGE_MASKING, UNIT_FEATURES
from bert_tf.pretraining_data import instance_workers, instances, text_corpus
from bert_tf.pretraining_data.instance_workers import ChunkStats

# Lines per tokenizer call: large enough to amortize the call, small enough
# to keep the ragged result small.
_TOKENIZE_BATCH_LINES = 8192


def bert_tokenizer_factory(vocab_file: str, do_lower_case: bool):
    """Returns fn(list[str]) -> (int32 flat ids, int64 ids per line).

    Uses the in-graph `bert_tf.tokenization.BertTokenizer`: the ids of
    HuggingFace's slow `BertTokenizer`, which differ from google-research/bert's
    `FullTokenizer` in three corner cases (see tests/fixtures/tokenization/README.md).
    """
    import tensorflow as tf

    from bert_tf import tokenization

    tokenizer = tokenization.BertTokenizer(vocab_file, lower_case=do_lower_case)

    # One graph for the whole batch: about twice as fast as op-by-op eager.
    # autograph=False: the tokenizer is plain TF ops; converting it costs seconds.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def ids_and_lengths(lines):
        ragged = tokenizer(lines)
        return ragged.flat_values, ragged.row_lengths()

    def tokenize(lines: Sequence[str]):
        flat, lengths = ids_and_lengths(tf.constant(list(lines), tf.string))
        return flat.numpy().astype(np.int32), lengths.numpy().astype(np.int64)

    return tokenize


def load_vocab_tokens(vocab_file: str) -> list[str]:
    from bert_tf.tokenization import load_vocab

    return load_vocab(vocab_file)


def tokenize_chunk(
    data: bytes, tokenize_fn: Callable, skip_invalid_utf8: bool
) -> tuple[instances.DocumentChunk, ChunkStats]:
    """Splits a chunk into lines and documents and tokenizes it in batches."""
    stats = ChunkStats()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if not skip_invalid_utf8:
            raise
        decoded = []
        for raw in data.split(b"\n"):
            try:
                decoded.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                stats.num_invalid_utf8_lines += 1
        text = "\n".join(decoded)
    stats.num_words = len(text.split())
    lines = text.split("\n")

    texts = []
    document_of_line = []
    document = 0
    in_document = False
    for line in lines:
        line = line.strip()
        if line:
            texts.append(line)
            document_of_line.append(document)
            in_document = True
        elif in_document:
            document += 1
            in_document = False
    stats.num_text_lines = len(texts)

    flat_parts, length_parts = [], []
    for begin in range(0, len(texts), _TOKENIZE_BATCH_LINES):
        flat, lengths = tokenize_fn(texts[begin : begin + _TOKENIZE_BATCH_LINES])
        flat_parts.append(flat)
        length_parts.append(lengths)
    token_ids = np.concatenate(flat_parts).astype(np.int32) if flat_parts else np.zeros([0], np.int32)
    lengths = np.concatenate(length_parts) if length_parts else np.zeros([0], np.int64)
    kept = lengths > 0
    stats.num_empty_token_lines = int((~kept).sum())
    lengths = lengths[kept]
    documents = np.asarray(document_of_line, np.int64)[kept]
    # A document starts at every kept sentence whose document differs from the
    # previous kept sentence's (documents with no tokens vanish).
    starts = np.flatnonzero(np.diff(documents, prepend=-1) != 0)
    chunk = instances.DocumentChunk(
        token_ids=token_ids,
        sentence_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        document_offsets=np.concatenate([starts, [len(lengths)]]).astype(np.int64),
    )
    stats.num_documents = chunk.num_documents
    stats.num_tokens = chunk.num_tokens
    return chunk, stats


class _Finished:
    """A result computed in this process, with the interface of a Future."""

    def __init__(self, result):
        self._result = result

    def done(self):
        return True

    def result(self):
        return self._result


@dataclasses.dataclass
class WriteSummary:
    """What a run wrote, for the log and for callers."""

    output_files: list[str]
    instances_per_file: list[int]
    stats: ChunkStats
    input_bytes: int
    num_chunks: int
    seconds: float
    sentence_task: str = "nsp"
    masking: str = "token"

    @property
    def masked_fraction(self):
        return self.stats.num_masked / max(self.stats.num_instance_tokens, 1)

    @property
    def random_next_fraction(self):
        return self.stats.num_random_next / max(self.stats.num_instances, 1)

    @property
    def words_per_second(self):
        return self.stats.num_words / max(self.seconds, 1e-9)

    @property
    def mean_unit_length(self):
        """Tokens per masked span, phrase or entity."""
        return self.stats.num_masked_unit_tokens / max(self.stats.num_masked_units, 1)

    def _format_units(self) -> str:
        s = self.stats
        name = {"span": "spans", "phrase": "phrases", "entity": "entities"}[self.masking]
        line = (
            f"Units masked: {s.num_masked_units:,} {name}, mean {self.mean_unit_length:.2f} tokens "
            f"({s.num_masked_unit_tokens / max(s.num_masked, 1):.1%} of the masked tokens)"
        )
        if self.masking == "span":
            return line + "."
        return line + f"; {s.num_masked_words:,} other words, each whole."

    def format(self) -> str:
        s = self.stats
        masked = max(s.num_masked, 1)
        lines = [
            f"Wrote {s.num_instances:,} instances in {self.seconds:.1f} s "
            f"({s.num_instances / max(self.seconds, 1e-9):,.0f} instances/s, "
            f"{self.words_per_second:,.0f} input words/s).",
            f"Input: {self.input_bytes:,} bytes, {s.num_words:,} words, "
            f"{s.num_text_lines:,} lines, {s.num_documents:,} documents, "
            f"{s.num_tokens:,} tokens, {self.num_chunks:,} chunks.",
            f"Skipped lines: {s.num_empty_token_lines:,} with no token, {s.num_invalid_utf8_lines:,} not UTF-8.",
            f"Masked: {s.num_masked:,} of {s.num_instance_tokens:,} tokens "
            f"({self.masked_fraction:.2%}); [MASK] {s.num_mask_token / masked:.1%}"
            f", random {s.num_random_token / masked:.1%}, "
            f"kept {s.num_kept_token / masked:.1%}.",
        ]
        if self.masking == "span" or self.masking in KNOWLEDGE_MASKING:
            lines.append(self._format_units())
        if self.sentence_task == "nsp":
            lines.append(
                f"Next sentence: {s.num_random_next:,} random "
                f"({self.random_next_fraction:.1%}; {s.num_one_sentence:,} of them "
                "because the segment had one sentence), "
                f"{s.num_instances - s.num_random_next:,} actual."
            )
        elif self.sentence_task == "sop":
            lines.append(
                f"Sentence order: {s.num_random_next:,} swapped ({self.random_next_fraction:.1%}), "
                f"{s.num_instances - s.num_random_next:,} in order; {s.num_one_sentence:,} pairs cut inside "
                "a one-sentence segment."
            )
        else:
            lines.append(
                f"Full sentences (no sentence label): {s.num_instance_tokens / max(s.num_instances, 1):.1f} "
                "tokens per sequence."
            )
        for path, count in zip(self.output_files, self.instances_per_file):
            lines.append(f"  {path}: {count:,} instances")
        return "\n".join(lines)


def resolve_output_files(output_file: str, num_output_shards: int | None) -> list[str]:
    """Comma-separated output paths, or one path expanded into N shards."""
    outputs = [p.strip() for p in output_file.split(",") if p.strip()]
    if not outputs:
        raise ValueError("--output_file is empty")
    if num_output_shards is not None:
        if num_output_shards < 1:
            raise ValueError(f"--num_output_shards={num_output_shards} must be >= 1")
        if len(outputs) == 1 and num_output_shards > 1:
            outputs = [f"{outputs[0]}-{i:05d}-of-{num_output_shards:05d}" for i in range(num_output_shards)]
        elif len(outputs) != num_output_shards:
            raise ValueError(
                f"--num_output_shards={num_output_shards} does not match the "
                f"{len(outputs)} files given in --output_file"
            )
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"--output_file lists a file twice: {output_file!r}")
    return outputs


def default_num_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def write_pretraining_data(
    input_files: Sequence[str],
    output_files: Sequence[str],
    vocab_file: str,
    config: instances.InstanceConfig,
    *,
    do_lower_case: bool = True,
    seed: int = 12345,
    num_workers: int | None = None,
    chunk_bytes: int = 1 << 20,
    compression: str | None = None,
    skip_invalid_utf8: bool = False,
    progress_seconds: float = 10.0,
    tokenizer_factory: Callable = bert_tokenizer_factory,
    units: dict | None = None,
) -> WriteSummary:
    """Writes pretraining TFRecords with google-research/bert's features (those of `config.sentence_task`).

    Args:
        input_files: text files (one sentence per line, blank line between
            documents); see `text_corpus.resolve_input_files` for globs.
        output_files: TFRecord paths; instances go round-robin to them.
        vocab_file: WordPiece vocabulary (needs [CLS], [SEP], [MASK]).
        config: instance parameters (validated here).
        do_lower_case: uncased tokenization.
        seed: seed of every random choice.
        num_workers: processes working on chunks, this one included (default:
            all cores): this one tokenizes and writes, `num_workers - 1`
            helpers without TensorFlow make and serialize the instances. The
            output does not depend on it.
        chunk_bytes: text per chunk. Random next sentences come from the same
            chunk and instances are shuffled within it; peak memory grows with
            chunk_bytes x num_workers, not with the corpus.
        compression: None or "GZIP" (TFRecord compression).
        skip_invalid_utf8: skip and count lines that are not UTF-8 instead of
            failing.
        progress_seconds: seconds between progress lines (logged with absl
            logging, like the summary).
        tokenizer_factory: fn(vocab_file, do_lower_case) -> tokenize fn (called
            in this process only).
        units: "phrase"/"entity" -> `knowledge_units.UnitTable`
            (`knowledge_units.unit_tables`): the phrases or entities of
            `config.masking`; unmasked records carry each table's unit flags
            (`pretraining_schema.UNIT_FEATURES`) for dynamic masking.

    Returns:
        A `WriteSummary`.

    Raises:
        ValueError (CorpusError for the corpus), FileNotFoundError: bad input,
        before anything is written. Outputs are written under temporary names
        and renamed only when everything succeeded.
        instance_workers.HelperError: a helper process died (the message names
        its exit status) or failed; the temporary files are removed and every
        helper is stopped and waited for.
    """

    start_time = time.time()
    vocab = check_arguments(input_files, output_files, vocab_file, config, compression)
    scan = text_corpus.scan_corpus(input_files, skip_invalid_utf8)
    num_workers = num_workers or default_num_workers()
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} must be >= 1")
    # Logged only now that the input is known to be good: bad input prints nothing but its error.
    _log_run(input_files, output_files, config)
    for mode, table in (units or {}).items():
        what = f"{len(table.phrases):,} phrases from {table.source}" if table.capitalised is None else table.source
        logging.info("Units of %s masking: %s.", mode, what)
    settings = builder_settings(config, vocab, seed, units)
    output = _ShardedOutput(output_files, compression, start_time, progress_seconds)
    helpers = None
    try:
        # The helpers start first and set up while this process loads the tokenizer.
        helpers = instance_workers.HelperPool(settings, num_workers - 1)
        if helpers:
            _use_one_tensorflow_thread()
        tokenize = tokenizer_factory(vocab_file, do_lower_case)
        output.open()
        _process_chunks(
            input_files,
            chunk_bytes,
            tokenize,
            skip_invalid_utf8,
            instance_workers.InstanceBuilder(settings),
            helpers,
            output.write,
        )
        output.close()
        if output.total.num_instances == 0:
            raise text_corpus.CorpusError(
                "no instance was created: no input line has a token in the "
                f"vocabulary {vocab_file} ({scan.num_text_lines} non-blank lines)"
            )
        output.commit()
        helpers.close()
    except BaseException:
        # No helper outlives the run, and no output is left under its final name.
        try:
            if helpers is not None:
                helpers.close(kill=True)
        finally:
            output.abort()
        raise

    summary = WriteSummary(
        output_files=list(output_files),
        instances_per_file=output.instances_per_file,
        stats=output.total,
        input_bytes=scan.num_bytes,
        num_chunks=output.num_chunks,
        seconds=time.time() - start_time,
        sentence_task=config.sentence_task,
        masking=config.masking if config.do_masking else "token",
    )
    logging.info("%s", summary.format())
    return summary


def builder_settings(config, vocab, seed, units) -> instance_workers.BuilderSettings:
    """What every chunk's builder needs (the local helpers' and Beam's workers' alike): the same records."""
    from bert_tf.data import pretraining_features  # TensorFlow: the reader's feature specs live beside the names

    units = dict(units or {})
    unit_features = ()
    if not config.do_masking and config.masking in KNOWLEDGE_MASKING:
        # Unmasked "phrase"/"entity" records carry their units' flags for dynamic masking.
        unit_features = tuple(UNIT_FEATURES[m] for m in KNOWLEDGE_MASKING if m in units)
    return instance_workers.BuilderSettings(
        config=config,
        vocab=vocab,
        random_seed=seed,
        int_features=pretraining_features.int_features(config.sentence_task) + unit_features,
        float_features=pretraining_features.FLOAT_FEATURES,
        units=units,
    )


def check_arguments(input_files, output_files, vocab_file, config, compression) -> instances.VocabInfo:
    """Refuses bad arguments before anything is read or written; returns the vocabulary's `VocabInfo`."""
    config.validate()
    if compression not in (None, "", "GZIP"):
        raise ValueError(f"compression must be None or 'GZIP', got {compression!r}")
    if not output_files:
        raise ValueError("no output file given")
    vocab = instances.VocabInfo.from_tokens(load_vocab_tokens(vocab_file), f"vocabulary {vocab_file}")
    inputs = {os.path.abspath(p) for p in input_files}
    for path in output_files:
        if os.path.abspath(path) in inputs:
            raise ValueError(f"output file {path} is also an input file")
    return vocab


def _log_run(input_files, output_files, config) -> None:
    if config.masking_shortfall():
        logging.warning(
            "--max_predictions_per_seq=%d caps the masked positions: full-length instances are "
            "masked at %.3f instead of --masked_lm_prob=%g (as the original does).",
            config.max_predictions_per_seq,
            config.max_predictions_per_seq / config.max_seq_length,
            config.masked_lm_prob,
        )
    for what, paths in (("Reading %d input file(s): %s", input_files), ("Writing %d output file(s): %s", output_files)):
        logging.info(what, len(paths), ", ".join(paths[:5]) + (", ..." if len(paths) > 5 else ""))


def _use_one_tensorflow_thread() -> None:
    """The helpers fill the other cores; TensorFlow's thread pools here would oversubscribe them."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass  # TensorFlow already started in this process (a library caller): its pools stay


def _process_chunks(input_files, chunk_bytes, tokenize, skip_invalid_utf8, build, helpers, write) -> None:
    """Tokenizes every chunk here, builds its records here or in a helper, and writes them in chunk order."""
    pending = collections.deque()  # (tokenization stats, result or future of the records, helper), in chunk order
    # Written as soon as they are done; at most this many wait, which bounds memory.
    max_pending = helpers.max_in_flight * len(helpers) + 1 if helpers else 1
    for index, data in text_corpus.iter_chunks(input_files, chunk_bytes):
        chunk, token_stats = tokenize_chunk(data, tokenize, skip_invalid_utf8)
        # While this process tokenizes the next chunk, a helper builds this one; when
        # they are all busy, this process builds it. Who builds a chunk does not change it.
        # A helper that has died fails the run here (HelperError), before anything more is sent to it.
        helper = helpers.idle_helper() if helpers else None
        records = helper.submit(index, chunk) if helper else _Finished(build(index, chunk))
        pending.append((token_stats, records, helper))
        while pending and (pending[0][1].done() or len(pending) > max_pending):
            _write_chunk(write, *pending.popleft())
    while pending:
        _write_chunk(write, *pending.popleft())


def _write_chunk(write, token_stats, records, helper):
    # Waits while the helper computing the records is alive; its death fails the future at once.
    records, stats = instance_workers.wait_for(records, helper) if helper else records.result()
    stats.add(token_stats)
    write(records, stats)


class _ShardedOutput:
    """The output files: written round-robin under temporary names, renamed into place by `commit`."""

    def __init__(self, output_files, compression, start_time, progress_seconds):
        import tensorflow as tf

        for path in output_files:
            parent = os.path.dirname(path)
            if parent and not tf.io.gfile.exists(parent):
                tf.io.gfile.makedirs(parent)
        run_id = uuid.uuid4().hex[:8]
        self.output_files = list(output_files)
        self.temp_files = [f"{path}.incomplete-{run_id}" for path in output_files]
        self._options = tf.io.TFRecordOptions(compression_type=compression or "")
        self._writers = []
        self.total = ChunkStats()
        self.instances_per_file = [0] * len(output_files)
        self.num_chunks = 0
        self._next_file = 0
        self._start_time = start_time
        self._last_progress = time.time()
        self._progress_seconds = progress_seconds

    def open(self) -> None:
        import tensorflow as tf

        self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.temp_files]

    def write(self, records, stats) -> None:
        """Writes one chunk's records and adds its stats; logs progress every `progress_seconds`."""
        # Round-robin over the files, continuing from the last chunk.
        num_files = len(self._writers)
        for offset in range(min(num_files, len(records))):
            file_index = (self._next_file + offset) % num_files
            share = records[offset::num_files]
            write_record = self._writers[file_index].write
            for record in share:
                write_record(record)
            self.instances_per_file[file_index] += len(share)
        self._next_file = (self._next_file + len(records)) % num_files
        self.total.add(stats)
        self.num_chunks += 1
        now = time.time()
        if now - self._last_progress >= self._progress_seconds:
            self._last_progress = now
            elapsed = now - self._start_time
            total = self.total
            logging.info(
                "%s",
                f"{total.num_documents:,} documents, "
                f"{total.num_instances:,} instances, "
                f"{total.num_instances / elapsed:,.0f} instances/s, "
                f"{total.num_words / elapsed:,.0f} words/s "
                f"({self.num_chunks} chunks)",
            )

    def close(self) -> None:
        for writer in self._writers:
            writer.close()

    def commit(self) -> None:
        """Renames the complete temporary files to the output names."""
        import tensorflow as tf

        for temp, path in zip(self.temp_files, self.output_files):
            tf.io.gfile.rename(temp, path, overwrite=True)

    def abort(self) -> None:
        """Closes the files and removes the temporary ones."""
        import tensorflow as tf

        self.close()
        for temp in self.temp_files:
            if tf.io.gfile.exists(temp):
                tf.io.gfile.remove(temp)
