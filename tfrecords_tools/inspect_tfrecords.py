r"""Prints pretraining TFRecords as text, and statistics of their features.

    bert_tf_inspect_tfrecords --input_file=out/pretrain.tfrecord* --vocab_file=vocab.txt --num=5

(or `python -m tfrecords_tools.inspect_tfrecords`). What is shown and counted:
`bert_tf.pretraining_data.inspection`, which this command line calls.
"""

from absl import flags

from bert_tf import cli
from bert_tf.pretraining_data import inspection
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this tool's flags; run() calls it.

    Flags are not defined at import so that importing several tools (or this
    module and a training script) in one process cannot clash on flag names.
    """
    job_flags.define(
        "input_file",
        "vocab_file",
        "compression",
        notes={"input_file": "TFRecords.", "vocab_file": "Shows the tokens (ids are shown without it)."},
        defaults={"compression": (None, "Default here: detect GZIP (a reader can tell).")},
    )
    flags.DEFINE_integer("num", 5, "Instances to print.")
    flags.DEFINE_integer("max_records", None, "Records to compute statistics on (default: all).")


@cli.main_function("inspect_tfrecords")
def main(argv):
    del argv  # Checked by cli.main_function.
    cli.require_flags("input_file")
    inspection.inspect(FLAGS.input_file, FLAGS.vocab_file, FLAGS.num, FLAGS.max_records, FLAGS.compression)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
