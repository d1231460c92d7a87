"""Running absl entry points in the test process without leaking their flags."""

import contextlib

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


def run_main(module, argv, program=None) -> int:
    """Runs a tool module's `main` in this process as its command line would; returns the exit status."""
    program = program or module.__name__.rsplit(".", 1)[-1]
    with temporary_flags(module.define_flags, [program, *argv]):
        try:
            module.main([program])
        except SystemExit as exit_:
            return exit_.code
    return 0
