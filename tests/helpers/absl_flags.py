"""Running absl entry points in the test process without leaking their flags."""

import contextlib
import logging as python_logging
import sys

from absl import flags


@contextlib.contextmanager
def temporary_flags(define_flags, argv):
    """Defines a tool's flags, parses `argv`, and removes the flags again afterwards.

    Tools define their flags at run time; two tools defining the same name
    (e.g. --vocab_file) in one test process would otherwise clash.
    """
    before = set(flags.FLAGS)
    define_flags()
    try:
        flags.FLAGS(argv)
        yield flags.FLAGS
    finally:
        flags.FLAGS.unparse_flags()
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)


@contextlib.contextmanager
def absl_logs_to_current_stderr():
    """Logs to `sys.stderr` as it is now, through absl's handler, as `absl.app.run` makes a tool's process do.

    Without `app.run`, absl's handler is not on the root logger (pytest's are),
    and it keeps the stream that was `sys.stderr` when absl was imported; a
    test's capsys/capfd would miss every line a tool logs.
    """
    from absl import logging

    handler = logging.get_absl_handler()
    added = handler not in python_logging.root.handlers
    if added:
        python_logging.root.addHandler(handler)
    saved = handler.python_handler.stream
    handler.python_handler.stream = sys.stderr
    try:
        yield
    finally:
        handler.python_handler.stream = saved
        if added:
            python_logging.root.removeHandler(handler)


@contextlib.contextmanager
def listening_to_absl(handler, level=python_logging.INFO):
    """Sends what absl's logger logs at `level` and above to `handler` (e.g. `caplog.handler`) while entered.

    A tool logs through absl's logger, which an earlier test in the same process may have kept from
    propagating to the root logger, where caplog listens; a handler on absl's logger does not depend on that.
    """
    absl_logger = python_logging.getLogger("absl")
    previous_level = absl_logger.level
    absl_logger.setLevel(level)
    absl_logger.addHandler(handler)
    try:
        yield handler
    finally:
        absl_logger.removeHandler(handler)
        absl_logger.setLevel(previous_level)


def run_main(module, argv, program=None) -> int:
    """Runs a tool module's `main` in this process as its command line would; returns the exit status.

    What the tool logs goes to the current `sys.stderr`, so tests see all of its stderr.
    """
    program = program or module.__name__.rsplit(".", 1)[-1]
    with temporary_flags(module.define_flags, [program, *argv]), absl_logs_to_current_stderr():
        try:
            module.main([program])
        except SystemExit as exit_:
            return exit_.code
    return 0


def run_help(module, command: str) -> int:
    """Runs `module.run([command, "--help"])` (the console script's entry point) in this process.

    Returns its exit status; the help is on stdout. The flags it defined are removed again.
    """
    before = set(flags.FLAGS)
    try:
        module.run([command, "--help"])
    except SystemExit as exit_:
        return exit_.code
    finally:
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)
    return 0
