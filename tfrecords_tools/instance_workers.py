"""Token ids of a chunk -> serialized pretraining records, here or in helper processes without TensorFlow.

`create_pretraining_data` tokenizes in its own process: the in-graph tokenizer
needs TensorFlow, about 0.9 GB resident. Making the instances and serializing
them needs numpy only, so the helpers that do it for the other cores are plain
`python -c` subprocesses (about 60 MB each) that read pickled requests on
stdin and write pickled results on stdout. multiprocessing's "spawn" and
"forkserver" would re-import the parent's main module, and with it TensorFlow,
in every helper; a forked helper counts the parent's TensorFlow pages in its
resident memory. Nothing in this module may import TensorFlow or `bert_tf`.
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
from typing import List, Optional, Tuple

import numpy as np

from tfrecords_tools import example_encoder
from tfrecords_tools import pretraining_instances

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
    num_random_next: int = 0
    num_one_sentence: int = 0  # random next sentence because the segment had one sentence

    def add(self, other: "ChunkStats"):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass(frozen=True)
class BuilderSettings:
    """What an `InstanceBuilder` needs; picklable, sent once to each helper."""

    config: pretraining_instances.InstanceConfig
    vocab: pretraining_instances.VocabInfo
    random_seed: int
    int_features: Tuple[str, ...]
    float_features: Tuple[str, ...]


class InstanceBuilder:
    """(chunk index, `DocumentChunk`) -> (serialized `tf.train.Example`s, `ChunkStats` of the instances).

    Every random draw depends only on the seed and the chunk index, so any
    process builds the same records for a chunk.
    """

    def __init__(self, settings: BuilderSettings):
        self._settings = settings
        self._names = settings.int_features + settings.float_features
        self._encoder = example_encoder.ExampleEncoder(list(settings.int_features), list(settings.float_features))

    def __call__(self, chunk_index: int, chunk: pretraining_instances.DocumentChunk) -> Tuple[List[bytes], ChunkStats]:
        settings = self._settings
        stats = ChunkStats()
        records = []
        for batch in pretraining_instances.create_instances(
            chunk,
            settings.config,
            settings.vocab,
            settings.random_seed,
            chunk_index=chunk_index,
            batch_size=_INSTANCE_BATCH,
        ):
            records.extend(self._encoder.encode({name: getattr(batch, name) for name in self._names}))
            choices = batch.mask_choices
            stats.num_instances += len(batch)
            stats.num_instance_tokens += int(batch.input_mask.sum())
            stats.num_masked += int((choices != 0).sum())
            stats.num_mask_token += int((choices == pretraining_instances.MASK_CHOICE_MASK).sum())
            stats.num_random_token += int((choices == pretraining_instances.MASK_CHOICE_RANDOM).sum())
            stats.num_kept_token += int((choices == pretraining_instances.MASK_CHOICE_KEEP).sum())
            stats.num_random_next += int(np.sum(batch.next_sentence_labels))
            stats.num_one_sentence += int(np.sum(batch.one_sentence))
        return records, stats


class HelperProcess:
    """One helper subprocess running `InstanceBuilder`s; `submit` returns a Future.

    Requests go out from a sender thread and results come back on a reader
    thread, so `submit` never blocks on a full pipe while the helper works.
    """

    def __init__(self, settings: BuilderSettings):
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from tfrecords_tools.instance_workers import helper_main; helper_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._futures = collections.deque()  # in request order
        self._lock = threading.Lock()
        self._requests = queue.Queue()
        self._requests.put(settings)
        self._sender = threading.Thread(target=self._send, daemon=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._sender.start()
        self._reader.start()

    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for future in self._futures if not future.done())

    def submit(self, chunk_index: int, chunk) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        with self._lock:
            self._futures.append(future)
        self._requests.put((chunk_index, chunk))
        return future

    def _send(self):
        try:
            while True:
                request = self._requests.get()
                if request is None:
                    break
                pickle.dump(request, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self._process.stdin.flush()
            self._process.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the helper is gone; the reader reports it

    def _read(self):
        while True:
            try:
                status, payload = pickle.load(self._process.stdout)
            except Exception:  # EOF or a torn result: the helper exited
                break
            with self._lock:
                future = self._futures.popleft()
            if status == "ok":
                future.set_result(payload)
            else:
                future.set_exception(RuntimeError(f"instance helper process failed:\n{payload}"))
        returncode = self._process.wait()
        with self._lock:
            orphans, self._futures = list(self._futures), collections.deque()
        for future in orphans:
            future.set_exception(RuntimeError(f"instance helper process exited with status {returncode}"))

    def close(self, kill: bool = False, timeout: float = 30.0):
        """Stops the helper: after its requests (kill=False) or at once."""
        if kill:
            self._process.kill()
        self._requests.put(None)
        try:
            self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join()


class HelperPool:
    """`num_helpers` `HelperProcess`es, each kept at most `max_in_flight` chunks ahead."""

    def __init__(self, settings: BuilderSettings, num_helpers: int, max_in_flight: int = 2):
        self.max_in_flight = max_in_flight
        self._helpers: List[HelperProcess] = []
        try:
            for _ in range(num_helpers):
                self._helpers.append(HelperProcess(settings))
        except BaseException:
            self.close(kill=True)
            raise

    def __len__(self):
        return len(self._helpers)

    def idle_helper(self) -> Optional[HelperProcess]:
        """The least busy helper, if it has room for another chunk."""
        if not self._helpers:
            return None
        helper = min(self._helpers, key=HelperProcess.in_flight)
        return helper if helper.in_flight() < self.max_in_flight else None

    def close(self, kill: bool = False):
        for helper in self._helpers:
            helper.close(kill=kill)


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


def helper_main():
    """Entry point of a helper subprocess (see `HelperProcess`)."""
    results = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the result stream
    # Ctrl-C reaches the whole process group; the parent decides when helpers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.stdin.buffer, results)
