"""Deprecated for one release: `python -m bert_tf.convert` is `python -m experiments.convert` (`bert_tf_convert`).

The converter's library half is `bert_tf.checkpoints.conversion.convert` (also importable from here); its
command line moved beside the other programs. Run as a module, this file runs that program, which it names
by string so that the package imports nothing of the programs.
"""

from bert_tf.checkpoints.conversion import SOURCE_FORMATS, convert

__all__ = ["SOURCE_FORMATS", "convert"]

if __name__ == "__main__":
    import runpy

    runpy.run_module("experiments.convert", run_name="__main__", alter_sys=True)
