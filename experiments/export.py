r"""Exports a BERT checkpoint as TF Hub-style SavedModels: `encoder/` and `preprocess/`.

    python -m experiments.export --model_dir=runs/pretrain --export_dir=runs/export

or with explicit files (google-research/bert naming):

    python -m experiments.export --init_checkpoint=runs/pretrain/ckpt-10000 \
        --bert_config_file=bert_config.json --vocab_file=vocab.txt --export_dir=runs/export

The result is used exactly like TF Hub's BERT. `hub.KerasLayer` is tf_keras
(Keras 2): set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported, and import
tensorflow_text, which registers the preprocessing model's ops:

    import os
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (the preprocessing model's ops)

    preprocess = hub.KerasLayer("runs/export/preprocess")
    encoder = hub.KerasLayer("runs/export/encoder", trainable=True)
    outputs = encoder(preprocess(tf.constant(["hello world"])))  # pooled_output, sequence_output, ...

When the checkpoint holds masked-LM weights the encoder also has an `mlm`
sub-object (`hub.load(encoder_dir).mlm(inputs_with_masked_lm_positions)`).

A fine-tuned classification or regression directory (an `experiments.finetune`
--output_dir, with its task_config.json) also gets `classifier/`: a servable
SavedModel with the preprocessing inside. Its `serving_default` signature takes
`text` (tf.string [batch]; and `text_b` for sentence pairs) and returns
`scores` (float32 [batch, num_labels], softmax), `classes` (the label names,
[batch, num_labels]), `label` (the most probable name) and `label_id`:

    python -m experiments.export --model_dir=runs/sst --export_dir=runs/sst_export
    saved_model_cli show --dir runs/sst_export/classifier --tag_set serve --signature_def serving_default

A server needs TF Text's ops registered (`import tensorflow_text` in Python;
they are listed in classifier/assets.extra/required_ops.txt, and checked at
export). A fine-tuned tagging directory gets `tagger/`: `serving_default` takes a sentence
(`text`, words split on whitespace) and returns `words`, their `tags` and
`scores`, and `num_words`, tagged as `experiments.finetune --do_predict` tags.
With --litert=float32 (or dynamic_int8, or full_int8 calibrated on
--calibration_examples texts of --train_file) the classifier is also written
as litert/classifier.tflite, raw text in, the tokenizer inside, for the LiteRT
interpreter with TF Text's ops (bert_tf.export.litert):

    python -m experiments.export --model_dir=runs/sst --export_dir=runs/sst_export --litert=dynamic_int8

With --verify (the default) one line says what was checked: the
encoder and the classifier reloaded and compared with the Keras model.
Casing follows the fine-tuned directory's task_config.json unless
--do_lower_case is given. The export directory is written atomically; an
existing one is only replaced with --overwrite. See docs/export_and_serving.md.
"""

import os
import sys

from absl import flags

from bert_tf import cli
from bert_tf.errors import BadInputError
from experiments import job_flags

FORMS = ("float32", "dynamic_int8", "full_int8")  # bert_tf.export.litert.FORMS, without importing TensorFlow

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    job_flags.define_model_source_flags(
        notes={
            "model_dir": "Its latest checkpoint is exported.",
            "do_lower_case": "In the preprocessor (default: a fine-tuned directory's recorded casing).",
        }
    )
    job_flags.define("max_seq_length", notes={"max_seq_length": "The preprocessor's default packing."})
    job_flags.define(
        "export_dir", "overwrite", notes={"export_dir": "Created here.", "overwrite": "A non-empty --export_dir."}
    )
    flags.DEFINE_bool("include_mlm", True, "Export the masked-LM head as encoder.mlm when the checkpoint has one.")
    flags.DEFINE_enum(
        "quantize",
        None,
        ["bfloat16", "int8"],
        "Export the encoder in a cheaper inference form: bfloat16 weights and compute, or int8 kernels (Keras' "
        "post-training quantization); outputs stay float32, the masked-LM head is left out; a fine-tuned "
        "classifier is exported in the same form. See docs/distillation.md.",
    )
    flags.DEFINE_enum(
        "litert",
        None,
        list(FORMS),
        "Also write the fine-tuned classifier as litert/classifier.tflite in this form: raw text in, the tokenizer "
        "inside, built-in and TF Text ops only (float32; dynamic_int8: int8 weights; full_int8: int8 weights and "
        "activations, calibrated on --train_file). See docs/export_and_serving.md, 'On a device'.",
    )
    job_flags.define(
        "train_file",
        notes={"train_file": "--litert=full_int8: the calibration texts are drawn from it (its recorded columns)."},
    )
    flags.DEFINE_integer(
        "calibration_examples", 200, "--litert=full_int8: how many training texts calibrate the activations' ranges."
    )
    job_flags.define_init_from_flag()
    job_flags.define("seed", notes={"seed": "With --init_from=random: the weights'."})
    flags.DEFINE_bool(
        "verify",
        True,
        "Reload the encoder (and classifier) SavedModels, check they reproduce the Keras model and print what "
        "was checked.",
    )


SERVING_NEEDS = {
    "int8": "any CPU with TensorFlow; oneDNN's int8 kernel where it runs (AVX-512 VNNI or AMX), an exact float32 "
    "product of the same integers elsewhere",
    "bfloat16": "any CPU with TensorFlow; native bfloat16 with AVX-512 BF16 or AMX, emulated (slower) elsewhere",
}


def check_flags() -> None:
    """Raises BadInputError for flag combinations that cannot work."""
    if not FLAGS.export_dir:
        raise BadInputError("--export_dir is required.")
    if not FLAGS.model_dir and FLAGS.init_from == "random":
        missing = [name for name in ("bert_config_file", "vocab_file") if not FLAGS[name].value]
        if missing:
            raise BadInputError(
                "--init_from=random: pass --model_dir, or --bert_config_file and --vocab_file "
                f"(missing: {', '.join('--' + m for m in missing)})."
            )
    elif not FLAGS.model_dir:
        missing = [name for name in ("init_checkpoint", "bert_config_file", "vocab_file") if not FLAGS[name].value]
        if missing:
            raise BadInputError(
                "Pass --model_dir, or all of --init_checkpoint, --bert_config_file and "
                f"--vocab_file (missing: {', '.join('--' + m for m in missing)})."
            )
    # The library's resolver and rule, before TensorFlow starts (importing it takes seconds): errors name the
    # flag, the file and (for the vocabulary) the line.
    from bert_tf.checkpoints.model_source import ModelSource, check_seq_length

    check_seq_length(FLAGS.max_seq_length)
    if FLAGS.litert == "full_int8":
        if not FLAGS.train_file:
            raise BadInputError("--litert=full_int8 needs --train_file (the calibration texts are drawn from it).")
        if FLAGS.calibration_examples < 1:
            raise BadInputError(f"--calibration_examples must be at least 1, got {FLAGS.calibration_examples}.")
        if not os.path.isfile(FLAGS.train_file):
            raise BadInputError(f"--train_file: file not found: {FLAGS.train_file}")
    elif FLAGS.train_file:
        raise BadInputError("--train_file is for --litert=full_int8's calibration only.")
    ModelSource(
        FLAGS.model_dir,
        FLAGS.init_checkpoint,
        FLAGS.bert_config_file,
        FLAGS.vocab_file,
        FLAGS.do_lower_case,
        init_from=FLAGS.init_from,
    ).resolve(need_checkpoint=False)


@cli.main_function("export", bad_input=(FileNotFoundError, FileExistsError, ValueError))
def main(argv):
    del argv  # Checked by cli.main_function.
    check_flags()
    from bert_tf.checkpoints.model_source import read_task_config

    lower_case = FLAGS.do_lower_case
    recorded = read_task_config(FLAGS.model_dir) if FLAGS.model_dir else None
    if recorded and "do_lower_case" in recorded and not FLAGS["do_lower_case"].present:
        lower_case = recorded["do_lower_case"]  # the fine-tuned model's own casing
    litert = None
    if FLAGS.litert:
        litert = _litert_config(recorded)
    if FLAGS.quantize:
        from bert_tf.cpu_features import form_cost_warning

        warning = form_cost_warning(FLAGS.quantize)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    from bert_tf.export import export_model_dir  # after flag checks: importing TensorFlow is slow

    paths = export_model_dir(
        FLAGS.model_dir,
        FLAGS.export_dir,
        init_checkpoint=FLAGS.init_checkpoint,
        bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file,
        lower_case=lower_case,
        max_seq_length=FLAGS.max_seq_length,
        include_mlm=FLAGS.include_mlm,
        overwrite=FLAGS.overwrite,
        verify=FLAGS.verify,
        quantize=FLAGS.quantize,
        litert=litert,
        init_from=FLAGS.init_from,
        seed=FLAGS.seed,
    )
    print(f"encoder:    {paths['encoder']}")
    print(f"preprocess: {paths['preprocess']}")
    if "classifier" in paths:
        print(f"classifier: {paths['classifier']}")
    if "tagger" in paths:
        print(f"tagger:     {paths['tagger']}")
    if "litert" in paths:
        print(f"litert:     {paths['litert']}")
    if paths["verified"]:
        print(f"verified:   {paths['verified']}")
    if FLAGS.quantize:
        print(f"serving:    {SERVING_NEEDS[FLAGS.quantize]}")


def _litert_config(task_config):
    """The LiteRT form of the flags, with full_int8's calibration texts read from --train_file."""
    from bert_tf.export.litert import LiteRTConfig, calibration_texts

    texts = ()
    if FLAGS.litert == "full_int8" and task_config:  # without one the export refuses --litert, naming the flag
        texts = calibration_texts(task_config, FLAGS.train_file, FLAGS.calibration_examples)
    return LiteRTConfig(form=FLAGS.litert, calibration_texts=texts)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
