"""Runs one function in a fresh Python process and returns its result: memory the work leaves behind goes with it.

TensorFlow keeps hundreds of megabytes after a model's forward passes (its runtime caches and the C heap's
fragments) that `gc` and `malloc_trim` do not give back; a job that must stay within a memory budget runs such
a stage here, so the process that goes on holds only the stage's result.

    from bert_tf.child_process import run_in_child_process
    accuracy = run_in_child_process(fine_tuned_accuracy, task, config, description="fine-tuning")

The child is started with `spawn` (no fork of a process that has loaded TensorFlow), with the caller's environment
plus `environment` (e.g. `bert_tf.memory_allocator.releasing_allocator_environment()`), logs at the caller's absl
verbosity, and sends back the return value or the exception it raised (re-raised here). The wait has a
liveness check: a child that dies without an answer (killed, out of memory) is an error naming its exit status,
never a hang.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import traceback

from absl import logging

# How often the wait looks whether the child is still alive.
_POLL_SECONDS = 1.0


def run_in_child_process(function, *args, description: str, environment: dict | None = None, **kwargs):
    """`function(*args, **kwargs)` in a spawned child process; its return value, or its exception re-raised.

    `function`, the arguments and the result must be picklable (module-level functions, dataclasses, arrays).
    `environment`: variables set in the child's environment on top of this process's (which is left as it is).

    Raises:
      whatever `function` raised, and RuntimeError if the child exits without an answer.
    """
    context = multiprocessing.get_context("spawn")
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(
        target=_child_main, args=(writer, function, args, kwargs, logging.get_verbosity()), name=description
    )
    with _environment_for_children(environment or {}):
        process.start()
    writer.close()  # the child holds the only writer: a dead child ends the pipe
    try:
        answer = None
        while answer is None:
            if reader.poll(_POLL_SECONDS):
                try:
                    answer = reader.recv()
                except EOFError:
                    break
            elif not process.is_alive():
                if reader.poll(0):  # it answered just before it exited
                    continue
                break
    finally:
        process.join(timeout=60 if answer is not None else 5)
        if process.is_alive():
            process.terminate()
            process.join(timeout=5)
        reader.close()
    if answer is None:
        raise RuntimeError(f"{description}: its child process exited with status {process.exitcode} and no result.")
    status, value = answer
    if status == "error":
        raise value
    return value


@contextlib.contextmanager
def _environment_for_children(variables: dict):
    """`os.environ` with `variables` while a child starts (a spawned child inherits it), then as before."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _child_main(writer, function, args, kwargs, verbosity) -> None:
    logging.set_verbosity(verbosity)
    try:
        answer = ("ok", function(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 (every failure goes back to the parent, which re-raises it)
        answer = ("error", e)
    try:
        writer.send(answer)
    except Exception as e:  # the result or the exception does not pickle: send the text of what happened
        text = "".join(traceback.format_exception(answer[1])) if answer[0] == "error" else str(e)
        writer.send(("error", RuntimeError(text)))
    writer.close()
