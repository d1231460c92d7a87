"""How every command-line tool of the package reports bad input.

A tool's `main` raises `BadInputError` (or one of the exception types it
declares as bad input) with a message naming the file, line or flag; the
wrapper prints exactly one line, `<tool>: error: <message>`, to stderr and
exits with status 2. Flag-parsing errors (an unknown flag, a bad enum value,
a missing required flag) take the same path. A training run stopped by a
SIGTERM after saving its checkpoint (`TrainingPreempted`) prints one line,
`<tool>: preempted (SIGTERM): ...`, and exits with status 143. absl's own `app.UsageError`
would print the module docstring and the flag help around the message and
exit 1, and its flag-parsing errors also exit 1, hence this wrapper.

    @cli.main_function("make_vocab", bad_input=(FileNotFoundError,))
    def main(argv): ...

    def run(argv=None):
        cli.run(main, define_flags, argv)

Tests call the decorated `main` in-process after parsing flags and catch
`SystemExit`; `run()` is the console-script entry point.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence

from absl import app, flags

from bert_tf import tensorflow_startup
from bert_tf.errors import BadInputError, TrainingPreempted

BAD_INPUT_EXIT_CODE = 2
# A training run stopped by SIGTERM after saving its checkpoint: 128 + SIGTERM, what a shell reports for a
# process that SIGTERM ended, and the status tf.distribute's preemption handling exits with on GCE.
PREEMPTED_EXIT_CODE = 143
# A program stopped by Ctrl-C exits as the shell reports a SIGINT: 128 + 2.
INTERRUPTED_EXIT_CODE = 130


class BadInputExit(SystemExit):
    """Exit status 2 after the error line was printed; `str()` is that line (for tests' `match=`)."""

    def __init__(self, line: str):
        super().__init__(BAD_INPUT_EXIT_CODE)
        self.line = line

    def __str__(self) -> str:
        return self.line


def one_line(message) -> str:
    """Collapses a (possibly multi-line) message into one line."""
    return " ".join(str(message).split())


def exit_bad_input(prog: str, message) -> None:
    """Prints `<prog>: error: <message>` as one line to stderr and exits with status 2."""
    line = f"{prog}: error: {one_line(message)}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    raise BadInputExit(line)


def exit_failure(prog: str, message, code: int = 1) -> None:
    """Prints `<prog>: error: <message>` as one line to stderr and exits with `code` (a failure, not bad input)."""
    sys.stderr.write(f"{prog}: error: {one_line(message)}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def main_function(prog: str, bad_input: Sequence[type] = ()) -> Callable:
    """Decorates a tool's `main(argv)`: bad input becomes one stderr line and exit status 2.

    Ctrl-C (KeyboardInterrupt) becomes `<prog>: error: interrupted` and status 130.

    Args:
      prog: the tool's name, which starts the error line.
      bad_input: further exception types that mean bad input for this tool
        (besides `BadInputError` and absl's `app.UsageError`), e.g. the
        library's own `DataError`.
    """
    caught = (BadInputError, app.UsageError, *bad_input)

    def decorate(main):
        @functools.wraps(main)
        def wrapper(argv):
            if len(argv) > 1:
                exit_bad_input(prog, f"unexpected arguments: {' '.join(argv[1:])}")
            try:
                return main(argv)
            except caught as e:
                exit_bad_input(prog, e)
            except TrainingPreempted as e:
                sys.stderr.write(f"{prog}: {one_line(e)}\n")
                sys.stderr.flush()
                raise SystemExit(PREEMPTED_EXIT_CODE) from None
            except KeyboardInterrupt:
                # What the tool kept (a training loop's checkpoint) was logged; no traceback.
                exit_failure(prog, "interrupted", INTERRUPTED_EXIT_CODE)

        wrapper.prog = prog
        return wrapper

    return decorate


def require_flags(*names: str) -> None:
    """Raises `BadInputError` naming the first of the flags `names` that has no value.

    Checked in `main` rather than with `flags.mark_flags_as_required`, whose
    error is raised by flag parsing itself, outside `main`.
    """
    for name in names:
        if flags.FLAGS[name].value in (None, "", []):
            raise BadInputError(f"--{name} is required")


def parse_flags(prog: str, argv: Sequence[str]) -> list:
    """Parses `argv` into absl's FLAGS; a flag error is bad input (one line, status 2)."""
    try:
        return flags.FLAGS(list(argv))
    except flags.Error as e:
        exit_bad_input(prog, e)


# The arguments that ask for a tool's help (absl's --help, --helpshort and -?, and argparse's -h).
HELP_ARGUMENTS = ("--help", "-help", "--helpshort", "-helpshort", "-?", "-h")


def asks_for_help(argv: Sequence[str]) -> bool:
    """Whether the command line `argv` (program name first) asks for help before a `--` ends the flags."""
    for arg in argv[1:]:
        if arg == "--":
            return False
        if arg in HELP_ARGUMENTS or arg in ("--help=true", "--help=1"):
            return True
    return False


def defining_module(name: str) -> str:
    """The name of the module that defined flag `name`, `__main__` for the program run as `python -m MODULE`.

    absl records a flag defined by the module `__main__` under `sys.argv[0]`, which `python -m` sets to the
    module's file path: no package prefix, so that module's flags would look like a library's.
    """
    module = flags.FLAGS.find_module_defining_flag(name) or ""
    return "__main__" if module == sys.argv[0] else module


def is_project_flag(name: str) -> bool:
    """Whether flag `name` is one of this project's (not one that a library defines when a tool imports it)."""
    return defining_module(name).split(".")[0] in ("bert_tf", "experiments", "tfrecords_tools", "__main__")


def tool_help(define_flags: Callable[[], None], flag_names: Sequence[str], prog: str) -> str:
    """The help of the tool whose flags `define_flags` defines: its module's docstring, then its flags.

    The same text whether the tool runs as `python -m MODULE` or as an installed console script: absl's own
    `--help` reads the docstring of `__main__` and the flags of the module named by `sys.argv[0]`, which for a
    console script are the generated launcher's (no docstring, no flags).
    """
    module = sys.modules[define_flags.__module__]
    # Under `python -m`, the module is `__main__`; its spec still names it.
    module_name = getattr(getattr(module, "__spec__", None), "name", None) or module.__name__
    for name in flag_names:
        flags.FLAGS.register_key_flag_for_module(module_name, flags.FLAGS[name])
    doc = (module.__doc__ or f"USAGE: {prog} [flags]").strip("\n")
    flag_help = flags.FLAGS.module_help(module_name)
    return f"{doc}\n\nflags:\n{flag_help}\n\nTry --helpfull to get a list of all flags.\n"


def run(
    main: Callable,
    define_flags: Callable[[], None],
    argv: Sequence[str] | None = None,
    *,
    lean_tensorflow: bool = False,
) -> None:
    """Defines the tool's flags and runs `main` (decorated by `main_function`) under absl.

    A tool owns its process, so TensorFlow's C++ start-up notes are kept off its console from here on, whatever
    loads TensorFlow first (`bert_tf.tensorflow_startup`). A tool's module therefore loads no TensorFlow at import.
    `lean_tensorflow=True`: TensorFlow loads without `tensorflow_startup.OPTIONAL_PACKAGES`, for a tool that
    uses none of them. `--help` (or `-h`, `-?`, `--helpshort`) prints `tool_help` to stdout and exits with
    status 0: the program's description, its examples and every flag it defines (the shared runtime flags
    included).
    """
    tensorflow_startup.quiet_first_import(lean=lean_tensorflow)
    command_line = list(sys.argv if argv is None else argv)
    before = set(flags.FLAGS)
    define_flags()
    if asks_for_help(command_line):
        defined = sorted(name for name in set(flags.FLAGS) - before if is_project_flag(name))
        sys.stdout.write(tool_help(define_flags, defined, os.path.basename(command_line[0])))
        sys.stdout.flush()
        raise SystemExit(0)
    app.run(main, argv=argv, flags_parser=functools.partial(parse_flags, main.prog))
