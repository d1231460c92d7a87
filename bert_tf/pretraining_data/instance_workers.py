"""Token ids of a chunk -> serialized pretraining records, here or in helper processes without TensorFlow.

`create_pretraining_data` tokenizes in its own process: the in-graph tokenizer
needs TensorFlow, the largest part of the tool's memory. Making the instances and serializing
them needs numpy only, so the helpers that do it for the other cores are plain
`python -I -c` subprocesses (a small fraction of that each) that read pickled requests
and write pickled results on two pipes of their own (`HelperProcess`). multiprocessing's "spawn" and
"forkserver" would re-import the parent's main module, and with it TensorFlow,
in every helper; a forked helper counts the parent's TensorFlow pages in its
resident memory. Nothing a helper imports may import TensorFlow or Keras: the
helper imports `bert_tf` (a light package namespace, no TensorFlow or Keras)
and this package's numpy-only `instances` and `example_encoder`
(tests/test_instance_workers.py checks it).
"""

import collections
import concurrent.futures
import dataclasses
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import traceback

import numpy as np

from bert_tf.data.pretraining_schema import KNOWLEDGE_MASKING, SENTENCE_LABEL_FEATURES
from bert_tf.pretraining_data import example_encoder, instances

# Instances made and serialized per batch: large enough for numpy to pay off,
# small enough to keep a batch's arrays small.
_INSTANCE_BATCH = 2048


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
    num_instance_tokens: int = 0  # real (non-padding) tokens in instances
    num_masked: int = 0
    num_mask_token: int = 0
    num_random_token: int = 0
    num_kept_token: int = 0
    num_random_next: int = 0  # label 1: B random ("nsp") or A and B swapped ("sop")
    num_one_sentence: int = 0  # random next sentence ("nsp") or a cut inside a sentence ("sop"): one-sentence segment
    num_masked_units: int = 0  # spans ("span"), phrases or entities ("phrase", "entity") masked whole
    num_masked_unit_tokens: int = 0
    num_masked_words: int = 0  # words outside phrases and entities, each masked whole ("phrase", "entity")

    def add(self, other: "ChunkStats"):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass(frozen=True)
class BuilderSettings:
    """What an `InstanceBuilder` needs; picklable, sent once to each helper."""

    config: instances.InstanceConfig
    vocab: instances.VocabInfo
    random_seed: int
    int_features: tuple[str, ...]
    float_features: tuple[str, ...]
    units: dict = dataclasses.field(default_factory=dict)  # "phrase"/"entity" -> knowledge_units.UnitTable


class InstanceBuilder:
    """(chunk index, `DocumentChunk`) -> (serialized `tf.train.Example`s, `ChunkStats` of the instances).

    Every random draw depends only on the seed and the chunk index, so any
    process builds the same records for a chunk.
    """

    def __init__(self, settings: BuilderSettings):
        self._settings = settings
        self._names = settings.int_features + settings.float_features
        label = SENTENCE_LABEL_FEATURES[settings.config.sentence_task]
        # Feature name -> attribute of `PretrainingInstances`.
        self._attributes = {name: "sentence_labels" if name == label else name for name in self._names}
        self._encoder = example_encoder.ExampleEncoder(list(settings.int_features), list(settings.float_features))

    def __call__(self, chunk_index: int, chunk: instances.DocumentChunk) -> tuple[list[bytes], ChunkStats]:
        settings = self._settings
        stats = ChunkStats()
        records = []
        for batch in instances.create_instances(
            chunk,
            settings.config,
            settings.vocab,
            settings.random_seed,
            chunk_index=chunk_index,
            batch_size=_INSTANCE_BATCH,
            units=settings.units,
        ):
            values = {name: getattr(batch, self._attributes[name], None) for name in self._names}
            values.update(batch.unit_features)
            records.extend(self._encoder.encode(values))
            _count_units(batch, stats, settings.config.masking in KNOWLEDGE_MASKING)
            choices = batch.mask_choices
            stats.num_instances += len(batch)
            stats.num_instance_tokens += int(batch.input_mask.sum())
            stats.num_masked += int((choices != 0).sum())
            stats.num_mask_token += int((choices == instances.MASK_CHOICE_MASK).sum())
            stats.num_random_token += int((choices == instances.MASK_CHOICE_RANDOM).sum())
            stats.num_kept_token += int((choices == instances.MASK_CHOICE_KEEP).sum())
            stats.num_random_next += int(np.sum(batch.sentence_labels))
            stats.num_one_sentence += int(np.sum(batch.one_sentence))
        return records, stats


def _count_units(batch: instances.PretrainingInstances, stats: ChunkStats, knowledge: bool) -> None:
    """Adds the masked units (distinct per row) of a batch: spans, or (`knowledge`) phrases/entities and the
    words outside them."""
    rows, cols = np.nonzero(batch.mask_units >= 0)
    if not rows.size:
        return
    first = np.ones(rows.size, bool)  # the unit's first prediction (predictions are in position order)
    units = batch.mask_units[rows, cols]
    first[1:] = (rows[1:] != rows[:-1]) | (units[1:] != units[:-1])
    in_phrase = batch.mask_in_phrase[rows, cols]
    if knowledge:
        stats.num_masked_units += int((first & in_phrase).sum())
        stats.num_masked_unit_tokens += int(in_phrase.sum())
        stats.num_masked_words += int((first & ~in_phrase).sum())
    else:
        stats.num_masked_units += int(first.sum())
        stats.num_masked_unit_tokens += int(rows.size)


class HelperError(RuntimeError):
    """A helper process failed: it died (`exit_status` set) or its builder raised (the traceback in the message)."""

    def __init__(self, message: str, exit_status: int | None = None):
        super().__init__(message)
        self.exit_status = exit_status


def describe_exit_status(status: int | None) -> str:
    """`-9` -> "-9 (killed by SIGKILL)", `1` -> "1"."""
    if status is not None and status < 0:
        try:
            return f"{status} (killed by {signal.Signals(-status).name})"
        except ValueError:
            pass
    return str(status)


def _helper_command(request_fd: int, result_fd: int) -> list[str]:
    """`python -I -c ...` with this process's `sys.path`: the helper imports what this process imports.

    With a plain `python -c`, the helper's current directory comes first on its
    `sys.path`, so a `bert_tf` there (another checkout) would shadow
    this one. `-I` leaves the current directory (and PYTHON* variables) out; the
    helper's path is then this process's own, with the folder holding this
    `bert_tf` first (and the user site, PYTHONPATH entries and editable
    installs this process sees, so numpy comes from where it comes here).
    """
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [package_parent] + [p for p in sys.path if p and p != package_parent]
    code = (
        f"import sys; sys.path[:0] = {paths!r}; "
        f"from bert_tf.pretraining_data.instance_workers import helper_main; helper_main({request_fd}, {result_fd})"
    )
    return [sys.executable, "-I", "-c", code]


def _stderr_fd():
    """This process's stderr file descriptor (where a helper's stray output goes), or /dev/null without one."""
    try:
        return sys.__stderr__.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


class HelperProcess:
    """One helper subprocess running `InstanceBuilder`s; `submit` returns a Future.

    Requests and results travel on two pipes of their own (passed to the helper
    as extra file descriptors), so nothing else the helper or a library in it
    writes, to its stdout or at the C level to fd 1, can reach the results:
    the helper's stdin is /dev/null and its stdout goes to this process's stderr.
    Requests go out from a sender thread and results come back on a reader
    thread, so `submit` never blocks on a full pipe while the helper works.

    When the helper exits, the reader sees the end of the result pipe at once,
    fails every pending future with a `HelperError` naming the exit status, and
    marks the helper dead; `submit` on a dead helper fails the same way, so no
    future can wait on a helper that is gone.
    """

    def __init__(self, settings: BuilderSettings):
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                _helper_command(request_read, result_write),
                stdin=subprocess.DEVNULL,
                stdout=_stderr_fd(),
                pass_fds=(request_read, result_write),
            )
        except BaseException:
            for fd in (request_read, request_write, result_read, result_write):
                os.close(fd)
            raise
        # Only the helper holds these ends now: its exit closes the result pipe.
        os.close(request_read)
        os.close(result_write)
        self.pid = self._process.pid
        self._requests_out = os.fdopen(request_write, "wb")
        self._results_in = os.fdopen(result_read, "rb")
        self._futures = collections.deque()  # in request order
        self._lock = threading.Lock()
        self._exit_status: int | None = None
        self._dead = False
        self._requests = queue.Queue()
        self._requests.put(settings)
        self._sender = threading.Thread(target=self._send, daemon=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._sender.start()
        self._reader.start()

    def _death_error(self) -> HelperError:
        return HelperError(
            f"instance helper process {self.pid} exited with status {describe_exit_status(self._exit_status)}",
            self._exit_status,
        )

    def alive(self) -> bool:
        """False once the helper has exited (its pending futures have then failed)."""
        with self._lock:
            return not self._dead and self._process.poll() is None

    def check_alive(self) -> None:
        """Raises the `HelperError` naming the exit status if the helper has exited."""
        if self.alive():
            return
        # The reader fails the futures within moments of the exit; wait for it so the status is known.
        self._reader.join(timeout=10.0)
        with self._lock:
            if self._exit_status is None:
                self._exit_status = self._process.poll()
        raise self._death_error()

    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for future in self._futures if not future.done())

    def submit(self, chunk_index: int, chunk) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        with self._lock:
            if self._dead:
                future.set_exception(self._death_error())
                return future
            self._futures.append(future)
        self._requests.put((chunk_index, chunk))
        return future

    def _send(self):
        try:
            while True:
                request = self._requests.get()
                if request is None:
                    break
                pickle.dump(request, self._requests_out, protocol=pickle.HIGHEST_PROTOCOL)
                self._requests_out.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the helper is gone; the reader reports it
        finally:
            try:
                self._requests_out.close()
            except OSError:
                pass

    def _read(self):
        try:
            while True:
                try:
                    status, payload = pickle.load(self._results_in)
                except Exception:  # EOF: the helper exited (or, impossible on this pipe, a torn result)
                    break
                with self._lock:
                    future = self._futures.popleft()
                if status == "ok":
                    future.set_result(payload)
                else:
                    future.set_exception(HelperError(f"instance helper process failed:\n{payload}"))
        finally:
            self._results_in.close()
            # The result pipe ends when the helper exits; if it ended otherwise, the helper must not stay.
            try:
                status = self._process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self._process.kill()
                status = self._process.wait(timeout=10.0)
            with self._lock:
                self._exit_status = status
                self._dead = True
                orphans, self._futures = list(self._futures), collections.deque()
            for future in orphans:
                future.set_exception(self._death_error())

    def close(self, kill: bool = False, timeout: float = 30.0):
        """Stops the helper: after its requests (kill=False) or at once; waits at most about `timeout` s."""
        if kill:
            self._process.kill()
        self._requests.put(None)
        try:
            self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10.0)
        self._sender.join(timeout=10.0)
        self._reader.join(timeout=10.0)


class HelperPool:
    """`num_helpers` `HelperProcess`es, each kept at most `max_in_flight` chunks ahead."""

    def __init__(self, settings: BuilderSettings, num_helpers: int, max_in_flight: int = 2):
        self.max_in_flight = max_in_flight
        self._helpers: list[HelperProcess] = []
        try:
            for _ in range(num_helpers):
                self._helpers.append(HelperProcess(settings))
        except BaseException:
            self.close(kill=True)
            raise

    def __len__(self):
        return len(self._helpers)

    def idle_helper(self) -> HelperProcess | None:
        """The least busy helper, if it has room for another chunk; raises `HelperError` if one has died."""
        if not self._helpers:
            return None
        for helper in self._helpers:
            helper.check_alive()
        helper = min(self._helpers, key=HelperProcess.in_flight)
        return helper if helper.in_flight() < self.max_in_flight else None

    def close(self, kill: bool = False):
        for helper in self._helpers:
            helper.close(kill=kill)


def wait_for(future: concurrent.futures.Future, helper: HelperProcess | None, poll_seconds: float = 1.0):
    """`future.result()`, checking every `poll_seconds` that the helper computing it is still alive."""
    while True:
        try:
            return future.result(timeout=poll_seconds)
        except concurrent.futures.TimeoutError:
            if helper is not None:
                helper.check_alive()


def serve(requests, results):
    """A helper's loop: settings, then (chunk index, chunk) requests until EOF; one result per request."""
    builder = InstanceBuilder(pickle.load(requests))
    while True:
        try:
            chunk_index, chunk = pickle.load(requests)
        except EOFError:
            return
        try:
            result = ("ok", builder(chunk_index, chunk))
        except Exception:  # reported to the parent, which fails the run
            result = ("error", traceback.format_exc())
        pickle.dump(result, results, protocol=pickle.HIGHEST_PROTOCOL)
        results.flush()


def helper_main(request_fd: int, result_fd: int):
    """Entry point of a helper subprocess (see `HelperProcess`): requests and results on their own pipes."""
    sys.stdout = sys.stderr  # a stray print goes to the console, never to the parent's results
    # Ctrl-C reaches the whole process group; the parent decides when helpers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with os.fdopen(request_fd, "rb") as requests, os.fdopen(result_fd, "wb") as results:
        try:
            serve(requests, results)
        except (BrokenPipeError, EOFError):
            pass  # the parent is gone
