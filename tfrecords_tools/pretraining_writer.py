"""Text corpus -> BERT pretraining TFRecords, streaming and in parallel.

The corpus is cut into document-aligned chunks (`text_corpus.iter_chunks`).
Each chunk is tokenized in batches with the in-graph WordPiece tokenizer,
turned into instances (`pretraining_instances`), serialized
(`example_encoder`) and written round-robin to the output shards. Chunks are
processed by `num_workers` processes (this one, which also writes, and
`num_workers - 1` helpers); results are written in chunk order and every
random draw of a chunk depends only on (seed, chunk index), so the output
bytes depend on the seed and the input only, not on the worker count or on
which process computed what. Memory is bounded by the chunks in flight, not by
the corpus size.
"""

import collections
import concurrent.futures
import dataclasses
import multiprocessing
import os
import sys
import threading
import time
import uuid
from typing import Callable, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np

from tfrecords_tools import example_encoder
from tfrecords_tools import pretraining_instances
from tfrecords_tools import text_corpus

# Lines per tokenizer call: large enough to amortize the call, small enough
# to keep the ragged result small.
_TOKENIZE_BATCH_LINES = 8192
_INSTANCE_BATCH = 2048


def bert_tokenizer_factory(vocab_file: str, do_lower_case: bool):
    """Returns fn(list[str]) -> (int32 flat ids, int64 ids per line).

    Uses the in-graph `bert_tf.tokenization.BertTokenizer`: the ids of
    HuggingFace's slow `BertTokenizer`, which differ from google-research/bert's
    `FullTokenizer` in three corner cases (see tests/fixtures/tokenization/README.md).
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from bert_tf import tokenization  # pylint: disable=g-import-not-at-top

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


def load_vocab_tokens(vocab_file: str) -> List[str]:
    from bert_tf.tokenization import load_vocab  # pylint: disable=g-import-not-at-top

    return load_vocab(vocab_file)


@dataclasses.dataclass
class ChunkStats:
    """Counts of one chunk (and, summed, of the run)."""

    num_documents: int = 0
    num_text_lines: int = 0
    num_empty_token_lines: int = 0  # non-blank lines with no token
    num_invalid_utf8_lines: int = 0
    num_words: int = 0  # whitespace-separated input words
    num_tokens: int = 0
    num_instances: int = 0
    num_instance_tokens: int = 0  # non-padding positions of all instances
    num_masked: int = 0
    num_mask_token: int = 0
    num_random_token: int = 0
    num_kept_token: int = 0
    num_random_next: int = 0
    num_one_sentence: int = 0  # random next forced: segment of one sentence

    def add(self, other: "ChunkStats"):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def tokenize_chunk(
    data: bytes, tokenize_fn: Callable, skip_invalid_utf8: bool
) -> Tuple[pretraining_instances.DocumentChunk, ChunkStats]:
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
    chunk = pretraining_instances.DocumentChunk(
        token_ids=token_ids,
        sentence_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        document_offsets=np.concatenate([starts, [len(lengths)]]).astype(np.int64),
    )
    stats.num_documents = chunk.num_documents
    stats.num_tokens = chunk.num_tokens
    return chunk, stats


def _features_of(instances: pretraining_instances.PretrainingInstances):
    return {
        name: getattr(instances, name)
        for name in example_encoder.PRETRAINING_INT_FEATURES + example_encoder.PRETRAINING_FLOAT_FEATURES
    }


@dataclasses.dataclass(frozen=True)
class _WorkerSettings:
    vocab_file: str
    do_lower_case: bool
    config: pretraining_instances.InstanceConfig
    random_seed: int
    skip_invalid_utf8: bool
    tokenizer_factory: Callable
    single_threaded_tf: bool


class _ChunkProcessor:
    """Per-process state: tokenizer, vocabulary info, encoder."""

    def __init__(self, settings: _WorkerSettings):
        if settings.single_threaded_tf:
            import tensorflow as tf  # pylint: disable=g-import-not-at-top

            # The worker processes already fill the cores; TF thread pools would
            # oversubscribe them.
            try:
                tf.config.threading.set_intra_op_parallelism_threads(1)
                tf.config.threading.set_inter_op_parallelism_threads(1)
            except RuntimeError:
                pass  # TF already initialized in this process (e.g. a library caller)
        self._settings = settings
        self._tokenize = settings.tokenizer_factory(settings.vocab_file, settings.do_lower_case)
        self._vocab = pretraining_instances.VocabInfo.from_tokens(
            load_vocab_tokens(settings.vocab_file), settings.vocab_file
        )
        self._encoder = example_encoder.pretraining_example_encoder()

    def __call__(self, chunk_index: int, data: bytes):
        settings = self._settings
        chunk, stats = tokenize_chunk(data, self._tokenize, settings.skip_invalid_utf8)
        records = []
        for batch in pretraining_instances.create_instances(
            chunk,
            settings.config,
            self._vocab,
            settings.random_seed,
            chunk_index=chunk_index,
            batch_size=_INSTANCE_BATCH,
        ):
            records.extend(self._encoder.encode(_features_of(batch)))
            choices = batch.mask_choices
            stats.num_instances += len(batch)
            stats.num_instance_tokens += int(batch.input_mask.sum())
            stats.num_masked += int((choices != 0).sum())
            stats.num_mask_token += int((choices == pretraining_instances.MASK_CHOICE_MASK).sum())
            stats.num_random_token += int((choices == pretraining_instances.MASK_CHOICE_RANDOM).sum())
            stats.num_kept_token += int((choices == pretraining_instances.MASK_CHOICE_KEEP).sum())
            stats.num_random_next += int(batch.next_sentence_labels.sum())
            stats.num_one_sentence += int(batch.one_sentence.sum())
        return records, stats


_PROCESSOR: Optional[_ChunkProcessor] = None


class _Finished:
    """A result computed in this process, with the interface of a Future."""

    def __init__(self, result):
        self._result = result

    def done(self):
        return True

    def result(self):
        return self._result


def _init_worker(settings: _WorkerSettings):
    global _PROCESSOR
    _PROCESSOR = _ChunkProcessor(settings)


def _process_in_worker(chunk_index: int, data: bytes):
    return _PROCESSOR(chunk_index, data)


def _warm_up():
    return None


def _start_method() -> str:
    """ "fork" when this process has not started TensorFlow's runtime, else "spawn".

    A forked helper inherits the imported modules (no second TensorFlow import,
    seconds saved), which is safe until the eager context starts its thread
    pools; a library caller that already ran TensorFlow gets "spawn".
    """
    if sys.platform != "linux" or threading.active_count() > 1:
        return "spawn"
    if "tensorflow" not in sys.modules:
        return "fork"
    try:
        # Private API, on purpose: no public one says whether the runtime has started without
        # changing anything. The tf.config getters do not tell; the setters that refuse after start-up
        # (threading, visible devices) return silently when given the current value, so probing with
        # one would change a setting; and tf.config.list_logical_devices starts the runtime itself.
        # If these internals change, "spawn" (always safe, only slower to start) is used.
        from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top

        runtime = context.context_safe()
        return "fork" if runtime is None or not runtime._initialized else "spawn"  # pylint: disable=protected-access
    except (ImportError, AttributeError):
        return "spawn"


@dataclasses.dataclass
class WriteSummary:
    """What a run wrote, for the log and for callers."""

    output_files: List[str]
    instances_per_file: List[int]
    stats: ChunkStats
    input_bytes: int
    num_chunks: int
    seconds: float

    @property
    def masked_fraction(self):
        return self.stats.num_masked / max(self.stats.num_instance_tokens, 1)

    @property
    def random_next_fraction(self):
        return self.stats.num_random_next / max(self.stats.num_instances, 1)

    @property
    def words_per_second(self):
        return self.stats.num_words / max(self.seconds, 1e-9)

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
            f"Next sentence: {s.num_random_next:,} random "
            f"({self.random_next_fraction:.1%}; {s.num_one_sentence:,} of them "
            "because the segment had one sentence), "
            f"{s.num_instances - s.num_random_next:,} actual.",
        ]
        for path, count in zip(self.output_files, self.instances_per_file):
            lines.append(f"  {path}: {count:,} instances")
        return "\n".join(lines)


def resolve_output_files(output_file: str, num_output_shards: Optional[int]) -> List[str]:
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
    config: pretraining_instances.InstanceConfig,
    do_lower_case: bool = True,
    random_seed: int = 12345,
    num_workers: Optional[int] = None,
    chunk_bytes: int = 1 << 20,
    compression: Optional[str] = None,
    skip_invalid_utf8: bool = False,
    progress_seconds: float = 10.0,
    tokenizer_factory: Callable = bert_tokenizer_factory,
) -> WriteSummary:
    """Writes pretraining TFRecords with google-research/bert's features.

    Args:
        input_files: text files (one sentence per line, blank line between
            documents); see `text_corpus.resolve_input_files` for globs.
        output_files: TFRecord paths; instances go round-robin to them.
        vocab_file: WordPiece vocabulary (needs [CLS], [SEP], [MASK]).
        config: instance parameters (validated here).
        do_lower_case: uncased tokenization.
        random_seed: seed of every random choice.
        num_workers: processes working on chunks, this one included (default:
            all cores). The output does not depend on it.
        chunk_bytes: text per chunk. Random next sentences come from the same
            chunk and instances are shuffled within it; peak memory grows with
            chunk_bytes x num_workers, not with the corpus.
        compression: None or "GZIP" (TFRecord compression).
        skip_invalid_utf8: skip and count lines that are not UTF-8 instead of
            failing.
        progress_seconds: seconds between progress lines (logged with absl
            logging, like the summary).
        tokenizer_factory: fn(vocab_file, do_lower_case) -> tokenize fn; must be
            picklable (module level) when num_workers > 1.

    Returns:
        A `WriteSummary`.

    Raises:
        ValueError (CorpusError for the corpus), FileNotFoundError: bad input,
        before anything is written. Outputs are written under temporary names
        and renamed only when everything succeeded.
    """
    start_time = time.time()
    _check_arguments(input_files, output_files, vocab_file, config, compression)
    scan = text_corpus.scan_corpus(input_files, skip_invalid_utf8)
    num_workers = num_workers or default_num_workers()
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} must be >= 1")
    settings = _WorkerSettings(
        vocab_file=vocab_file,
        do_lower_case=do_lower_case,
        config=config,
        random_seed=random_seed,
        skip_invalid_utf8=skip_invalid_utf8,
        tokenizer_factory=tokenizer_factory,
        single_threaded_tf=num_workers > 1,
    )
    output = _ShardedOutput(output_files, compression, start_time, progress_seconds)
    executor = None
    try:
        if num_workers > 1:
            executor = _start_helpers(settings, num_workers - 1)
        output.open()
        _process_chunks(input_files, chunk_bytes, settings, num_workers, executor, output.write)
        output.close()
        if output.total.num_instances == 0:
            raise text_corpus.CorpusError(
                "no instance was created: no input line has a token in the "
                f"vocabulary {vocab_file} ({scan.num_text_lines} non-blank lines)"
            )
        output.commit()
    except BaseException:
        output.abort()
        raise
    finally:
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    summary = WriteSummary(
        output_files=list(output_files),
        instances_per_file=output.instances_per_file,
        stats=output.total,
        input_bytes=scan.num_bytes,
        num_chunks=output.num_chunks,
        seconds=time.time() - start_time,
    )
    logging.info("%s", summary.format())
    return summary


def _check_arguments(input_files, output_files, vocab_file, config, compression) -> None:
    """Refuses bad arguments before anything is read or written."""
    config.validate()
    if compression not in (None, "", "GZIP"):
        raise ValueError(f"compression must be None or 'GZIP', got {compression!r}")
    if not output_files:
        raise ValueError("no output file given")
    # Validated here; the workers build their own.
    pretraining_instances.VocabInfo.from_tokens(load_vocab_tokens(vocab_file), f"vocabulary {vocab_file}")
    inputs = {os.path.abspath(p) for p in input_files}
    for path in output_files:
        if os.path.abspath(path) in inputs:
            raise ValueError(f"output file {path} is also an input file")


def _start_helpers(settings: _WorkerSettings, num_helpers: int) -> concurrent.futures.ProcessPoolExecutor:
    """Starts the helper processes, each with its own `_ChunkProcessor`."""
    # Helpers start now, before this process opens files or starts
    # TensorFlow's runtime, and set up while this one does.
    executor = concurrent.futures.ProcessPoolExecutor(
        max_workers=num_helpers,
        mp_context=multiprocessing.get_context(_start_method()),
        initializer=_init_worker,
        initargs=(settings,),
    )
    try:
        for _ in range(num_helpers):
            executor.submit(_warm_up)
    except BaseException:
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    return executor


def _process_chunks(input_files, chunk_bytes, settings, num_workers, executor, write) -> None:
    """Computes every chunk's records, here or in a helper, and passes them to `write` in chunk order."""
    chunks = enumerate(text_corpus.iter_chunks(input_files, chunk_bytes))
    processor = _ChunkProcessor(settings)
    pending = collections.deque()  # results or futures, in chunk order
    helpers = num_workers - 1
    for index, data in chunks:
        # Keep each helper process two chunks ahead; when they are all
        # busy this process (which also writes the output) takes the chunk
        # itself. Who computes a chunk does not change its result.
        busy = sum(1 for item in pending if not item.done())
        if busy < 2 * helpers:
            pending.append(executor.submit(_process_in_worker, index, data))
        else:
            pending.append(_Finished(processor(index, data)))
        # Write in chunk order (deterministic output); the bounded window
        # keeps memory bounded.
        while pending and (len(pending) > 4 * num_workers or pending[0].done()):
            write(pending.popleft().result())
    while pending:
        write(pending.popleft().result())


class _ShardedOutput:
    """The output files: written round-robin under temporary names, renamed into place by `commit`."""

    def __init__(self, output_files, compression, start_time, progress_seconds):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

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
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.temp_files]

    def write(self, result) -> None:
        """Writes one chunk's records and adds its stats; logs progress every `progress_seconds`."""
        records, stats = result
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
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        for temp, path in zip(self.temp_files, self.output_files):
            tf.io.gfile.rename(temp, path, overwrite=True)

    def abort(self) -> None:
        """Closes the files and removes the temporary ones."""
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        self.close()
        for temp in self.temp_files:
            if tf.io.gfile.exists(temp):
                tf.io.gfile.remove(temp)
