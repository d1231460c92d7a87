"""Classifies sentences with an exported classifier SavedModel, loaded as a server loads it (the main job's step 7).

    python -m experiments.demo.serve --classifier_dir=runs/demo/export/real_weights/classifier \
        --input_file=sentences.txt --output_file=predictions.json

The classifier is `experiments.export`'s `classifier/` (raw text in, the tokenizer inside):
`tf.saved_model.load`, then its `serving_default` signature on the strings, one per line of
--input_file. Prints and writes (JSON) each sentence with its label and the labels' probabilities.
"""

import sys

from absl import flags

from bert_tf import cli, errors, file_io

FLAGS = flags.FLAGS


def define_flags():
    """Defines this program's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string(
        "classifier_dir", None, "The exported classifier SavedModel (experiments.export's classifier/)."
    )
    from experiments import job_flags

    job_flags.define(
        "input_file",
        "output_file",
        notes={
            "input_file": "Here one file of sentences to classify, one a line (UTF-8).",
            "output_file": "A JSON list of {text, label, scores: {label name: probability}}.",
        },
    )


def classify(classifier_dir, sentences):
    """[{text, label, scores: {name: probability}}] for `sentences` from the SavedModel's `serving_default`."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the TF Text ops the SavedModel's tokenizer calls)

    serve = tf.saved_model.load(classifier_dir).signatures["serving_default"]
    outputs = serve(text=tf.constant(sentences))
    names = [[name.decode() for name in row] for row in outputs["classes"].numpy()]
    return [
        {
            "text": text,
            "label": label.decode(),
            "scores": {name: float(score) for name, score in zip(row_names, scores)},
        }
        for text, label, row_names, scores in zip(sentences, outputs["label"].numpy(), names, outputs["scores"].numpy())
    ]


@cli.main_function("demo.serve", bad_input=(OSError, ValueError))
def main(argv):
    del argv
    cli.require_flags("classifier_dir", "input_file", "output_file")
    with open(FLAGS.input_file, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    if not sentences:
        raise errors.BadInputError(f"--input_file={FLAGS.input_file} holds no sentence.")
    predictions = classify(FLAGS.classifier_dir, sentences)
    for p in predictions:
        print(f"{p['label']:>8s}  {max(p['scores'].values()):.3f}  {p['text']}")
    file_io.write_json(FLAGS.output_file, predictions)
    sys.stdout.flush()


def run(argv=None):
    """Entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
