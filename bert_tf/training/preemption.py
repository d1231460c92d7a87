"""Training that survives preemption: SIGTERM stops the loop after the current step, with a checkpoint.

A spot VM's or a TPU's maintenance warning, and Kubernetes' stop, are a SIGTERM followed by a SIGKILL a grace
period later. While `train` runs with a `PreemptionWatcher`, a SIGTERM makes the loop finish the step in
progress, write a checkpoint at that step (with the data position, as every checkpoint), and raise
`bert_tf.errors.TrainingPreempted`; the command lines exit with status 143 (`cli.PREEMPTED_EXIT_CODE`), and the
same command run again resumes there, bit-identical to an uninterrupted run with `--deterministic`.

    with PreemptionWatcher(grace_seconds=30) as watcher:   # `train(..., preemption=watcher)` enters it itself
        ...

Why a thread and a variable: Python runs a signal handler only between bytecodes of the main thread, which sits
in one `tf.function` call for `steps_per_loop` steps. So the C-level handler's wake-up byte
(`signal.set_wakeup_fd`) wakes a watcher thread at once, which sets a `tf.Variable` that the loop's graph reads
after every step. Under multi_worker_mirrored the flag is all-reduced (a sum, once per step), so every worker
stops after the same step even when only one was signalled, and all of them take part in the save.
(`tf.distribute.experimental.PreemptionCheckpointHandler` agrees only at the boundaries of its `run()` calls,
the loop's `tf.function` calls, and keeps a checkpoint layout and exit of its own.) On TPU the flag is read on
the host, not agreed between hosts.

A second SIGTERM, or a SIGINT, after the first is logged and ignored, so it cannot interrupt the save (the save
is atomic anyway: the `checkpoint` index is replaced last, see `bert_tf.training.loop`). A SIGINT before any
SIGTERM goes to the handler that was there before (Ctrl-C still raises KeyboardInterrupt). If the process has
not left the watcher `grace_seconds` after the SIGTERM (a slow save, a peer that died inside a collective), the
watcher ends it with exit status 1 and a line saying that the previous checkpoint is the one to resume from. The
handlers and the wake-up fd are installed on entering the watcher and the previous ones restored on leaving; in a
thread other than the main one (where Python allows no signal handlers) the watcher does nothing.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

import tensorflow as tf
from absl import logging

GRACE_EXPIRED_EXIT_CODE = 1


class PreemptionWatcher:
    """Turns SIGTERM into a request to stop after the current step, while entered (see the module docstring).

    Args:
      grace_seconds: how long after the first SIGTERM the process may take to save and exit (> 0).

    Example:

        watcher = PreemptionWatcher(grace_seconds=30)
        with watcher:
            watcher.requested()  # False until a SIGTERM arrives
    """

    def __init__(self, grace_seconds: float = 30.0):
        if not grace_seconds > 0:
            raise ValueError(f"grace_seconds must be > 0, got {grace_seconds!r}.")
        self.grace_seconds = float(grace_seconds)
        self._requested = threading.Event()
        self._flag = None  # the tf.Variable the loop reads; 1.0 once a SIGTERM arrived
        self._active = False
        self._deadline = None

    # --- inside the training graph -----------------------------------------------

    def stop_requested(self, strategy: tf.distribute.Strategy, num_workers: int, use_tpu: bool) -> tf.Tensor:
        """A scalar bool: whether any worker was signalled (all-reduced over workers); call inside the loop's graph."""
        flag = self._flag.read_value()
        if num_workers > 1 and not use_tpu:
            per_replica = strategy.experimental_distribute_values_from_function(lambda _: flag)
            flag = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        return flag > 0

    # --- in Python -----------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether the watcher is entered and handles SIGTERM (it does not outside the main thread)."""
        return self._active

    def requested(self) -> bool:
        """Whether this process received a SIGTERM while the watcher was entered."""
        return self._requested.is_set()

    def wait_until_requested(self, timeout: float) -> bool:
        """Blocks until a SIGTERM was seen (or `timeout` seconds passed); returns `requested()`."""
        return self._requested.wait(timeout)

    def __enter__(self) -> PreemptionWatcher:
        if threading.current_thread() is not threading.main_thread():
            logging.warning("Training outside the main thread: SIGTERM will not stop it with a checkpoint.")
            return self
        with tf.init_scope():
            self._flag = tf.Variable(0.0, trainable=False, name="preemption_requested")
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)
        self._previous_handlers = {
            signum: signal.signal(signum, self._handle) for signum in (signal.SIGTERM, signal.SIGINT)
        }
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="PreemptionWatcher", daemon=True)
        self._thread.start()
        self._active = True
        return self

    def __exit__(self, *exc_info):
        if not self._active:
            return
        self._active = False
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._reader.shutdown(socket.SHUT_RDWR)  # ends the thread's recv()
        self._thread.join(timeout=10)
        self._reader.close()
        self._writer.close()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline.join(timeout=10)

    def _handle(self, signum, frame):
        """The Python-level handler (main thread, between bytecodes); the watcher thread did the work."""
        if signum == signal.SIGINT and not self._requested.is_set():
            previous = self._previous_handlers[signal.SIGINT]
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                raise KeyboardInterrupt

    def _watch(self):
        """The watcher thread: reads the signal numbers the C-level handler writes to the wake-up fd."""
        while True:
            try:
                received = self._reader.recv(64)
            except OSError:
                return
            if not received:
                return
            for signum in received:
                if signum == signal.SIGTERM and not self._requested.is_set():
                    self._on_first_sigterm()
                elif self._requested.is_set() and signum in (signal.SIGTERM, signal.SIGINT):
                    logging.warning(
                        "%s ignored: stopping for preemption, saving the checkpoint.", signal.Signals(signum).name
                    )

    def _on_first_sigterm(self):
        self._flag.assign(1.0)
        self._requested.set()
        self._deadline = threading.Timer(self.grace_seconds, self._grace_expired)
        self._deadline.name = "PreemptionGraceDeadline"
        self._deadline.daemon = True
        self._deadline.start()
        logging.warning(
            "SIGTERM: stopping after the current step with a checkpoint (grace period %g s).", self.grace_seconds
        )

    def _grace_expired(self):
        sys.stderr.write(
            f"error: preemption: no checkpoint saved within the grace period of {self.grace_seconds:g} s after "
            "SIGTERM; exiting. The previous checkpoint is intact: run the same command again to resume from it.\n"
        )
        sys.stderr.flush()
        os._exit(GRACE_EXPIRED_EXIT_CODE)
