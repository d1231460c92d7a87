"""`python -m experiments.write_weights_file` (`bert_tf_write_weights_file`): a model directory's weights file.

    python -m experiments.write_weights_file --model_dir=runs/pretrain

Every job that trains writes `weights.safetensors` beside its checkpoints: the backend-neutral copy of the
weights that `bert_tf.load_encoder` reads on JAX. This program (re)writes it from the directory's latest TF2
checkpoint, for a directory whose file is missing or older than its checkpoints (a run stopped between the two,
or a checkpoint copied in by hand). It needs TensorFlow. The library half is
`bert_tf.checkpoints.model_dir.rewrite_weights_file`.
"""

from __future__ import annotations

from absl import flags

from bert_tf import cli
from experiments import job_flags


def define_flags() -> None:
    """Defines this tool's flags; `run()` calls it, so importing the module adds no flags."""
    job_flags.define("model_dir", notes={"model_dir": "Its weights file is written (again)."})


@cli.main_function("write_weights_file", bad_input=(ValueError, FileNotFoundError))
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.checkpoints.model_dir import rewrite_weights_file

    cli.require_flags("model_dir")
    print(rewrite_weights_file(flags.FLAGS.model_dir))
    return 0


def run(argv=None):
    """Console-script entry point (`bert_tf_write_weights_file`)."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
