r"""Exports a BERT checkpoint as TF Hub-style SavedModels: `encoder/` and `preprocess/`.

    python -m experiments.export --model_dir=runs/pretrain --export_dir=runs/export

or with explicit files (google-research/bert naming):

    python -m experiments.export --checkpoint=runs/pretrain/ckpt-10000 \
        --bert_config_file=bert_config.json --vocab_file=vocab.txt --export_dir=runs/export

The result is used exactly like TF Hub's BERT:

    preprocess = hub.KerasLayer("runs/export/preprocess")
    encoder = hub.KerasLayer("runs/export/encoder", trainable=True)

When the checkpoint holds masked-LM weights the encoder also has an `mlm`
sub-object (`hub.load(encoder_dir).mlm(inputs_with_masked_lm_positions)`).
The export directory is written atomically; an existing one is only replaced
with --overwrite.
"""

from absl import flags

from bert_tf import cli
from bert_tf.errors import BadInputError

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string(
        "model_dir",
        None,
        "Model directory: bert_config.json, vocab.txt and TF2 checkpoints (the latest one is exported).",
    )
    flags.DEFINE_string(
        "checkpoint", None, "A checkpoint prefix (or directory) to export instead of the latest one in --model_dir."
    )
    flags.DEFINE_string("bert_config_file", None, "bert_config.json; defaults to the one in --model_dir.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt; defaults to the one in --model_dir.")
    flags.DEFINE_bool(
        "do_lower_case",
        True,
        "Lower-case and strip accents in the preprocessor (uncased models). "
        "Use --nodo_lower_case for cased vocabularies.",
    )
    flags.DEFINE_integer("seq_length", 128, "Sequence length of the preprocessor's default packing.")
    flags.DEFINE_string("export_dir", None, "Directory to create, holding encoder/ and preprocess/.")
    flags.DEFINE_bool("overwrite", False, "Replace an existing non-empty --export_dir.")
    flags.DEFINE_bool("include_mlm", True, "Export the masked-LM head as encoder.mlm when the checkpoint has one.")
    flags.DEFINE_bool("verify", True, "Reload the encoder SavedModel and check it reproduces the Keras model.")


def check_flags() -> None:
    """Raises BadInputError for flag combinations that cannot work."""
    if not FLAGS.export_dir:
        raise BadInputError("--export_dir is required.")
    if not FLAGS.model_dir:
        missing = [name for name in ("checkpoint", "bert_config_file", "vocab_file") if not FLAGS[name].value]
        if missing:
            raise BadInputError(
                "Pass --model_dir, or all of --checkpoint, --bert_config_file and "
                f"--vocab_file (missing: {', '.join('--' + m for m in missing)})."
            )
    # The library's resolver and rule, before TensorFlow starts (importing it takes seconds): errors name the
    # flag, the file and (for the vocabulary) the line.
    from bert_tf.checkpoints.model_source import ModelSource, check_seq_length

    check_seq_length(FLAGS.seq_length, flag="seq_length")
    ModelSource(
        FLAGS.model_dir, FLAGS.checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case
    ).resolve(need_checkpoint=False)


@cli.main_function("export", bad_input=(FileNotFoundError, FileExistsError, ValueError))
def main(argv):
    del argv  # Checked by cli.main_function.
    check_flags()
    from bert_tf.export import export_model_dir  # after flag checks: importing TensorFlow is slow

    paths = export_model_dir(
        FLAGS.model_dir,
        FLAGS.export_dir,
        checkpoint=FLAGS.checkpoint,
        bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file,
        lower_case=FLAGS.do_lower_case,
        seq_length=FLAGS.seq_length,
        include_mlm=FLAGS.include_mlm,
        overwrite=FLAGS.overwrite,
        verify=FLAGS.verify,
    )
    print(f"encoder:    {paths['encoder']}")
    print(f"preprocess: {paths['preprocess']}")


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
