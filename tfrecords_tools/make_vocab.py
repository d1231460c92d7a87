"""Learns a BERT WordPiece vocabulary from text files.

    bert_tf_make_vocab --input_file=corpus.txt --vocab_size=30522 --output_file=vocab.txt [--nodo_lower_case]

(or `python -m tfrecords_tools.make_vocab`): flags -> `bert_tf.tokenization.vocab_learning.make_vocab`.

One text per line. Words are split and normalized exactly as
`bert_tf.tokenization.BertTokenizer` will split them (same lower-casing,
accent stripping, punctuation and CJK splitting), so every learned piece is
reachable. The file starts with [PAD] (id 0), [UNK], [CLS], [SEP], [MASK],
then `--num_unused` placeholders [unused0].., then single characters, then
the learned pieces.
"""

import glob

from absl import flags

from bert_tf import cli
from bert_tf.errors import BadInputError
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    job_flags.define(
        "input_file",
        "output_file",
        "do_lower_case",
        notes={
            "input_file": "Text.",
            "output_file": "vocab.txt.",
            "do_lower_case": "Here: learn an uncased vocabulary.",
        },
    )
    job_flags.define("vocab_size", notes={"vocab_size": "At most: a small corpus may give fewer pieces."})
    flags.DEFINE_integer("num_unused", 0, "Placeholder tokens [unused0].. after the special tokens.")
    flags.DEFINE_integer("min_count", 10, "Lowest piece count the learner's threshold search tries.")
    flags.DEFINE_integer("max_unique_chars", 1000, "Alphabet size; words with rarer characters are ignored.")
    flags.DEFINE_integer("max_word_length", 50, "Longer words are ignored.")
    flags.DEFINE_integer("num_iterations", 4, "Refinement passes of the learner.")
    flags.DEFINE_integer(
        "max_input_words",
        5_000_000,
        "Learn from this many of the most frequent distinct words; the others are still "
        "tokenized into the learned pieces. Lower is faster (the learner is pure Python).",
    )
    flags.DEFINE_integer("max_lines", 0, "Read at most this many lines (0: all).")
    flags.DEFINE_bool(
        "learn_phrases",
        False,
        "Also learn collocations (word pairs and triples, PMI and count thresholds) into phrases.txt beside "
        "--output_file, the phrases of create_pretraining_data --masking=phrase.",
    )
    flags.DEFINE_integer("phrase_min_count", 5, "With --learn_phrases: the fewest occurrences of a phrase.")
    flags.DEFINE_float("phrase_min_pmi", 8.0, "With --learn_phrases: the lowest PMI (bits) of a phrase's parts.")


def expand_input_files(pattern_list):
    """Comma-separated paths/globs -> sorted file list; clear error if none."""
    files = []
    for pattern in [p.strip() for p in pattern_list.split(",") if p.strip()]:
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise BadInputError(f"--input_file: no file matches {pattern!r}")
        files.extend(matches)
    if not files:
        raise BadInputError("--input_file is empty")
    return files


@cli.main_function("make_vocab")
def main(argv):
    del argv  # Checked by cli.main_function.
    cli.require_flags("input_file", "output_file")
    from bert_tf.tokenization import vocab_learning  # TensorFlow: keeps --help fast

    vocab_learning.make_vocab(
        expand_input_files(FLAGS.input_file),
        FLAGS.output_file,
        FLAGS.vocab_size,
        do_lower_case=FLAGS.do_lower_case,
        num_unused=FLAGS.num_unused,
        min_count=FLAGS.min_count,
        max_unique_chars=FLAGS.max_unique_chars,
        max_word_length=FLAGS.max_word_length,
        num_iterations=FLAGS.num_iterations,
        max_input_words=FLAGS.max_input_words,
        max_lines=FLAGS.max_lines,
    )
    if FLAGS.learn_phrases:
        _learn_phrases()


def _learn_phrases():
    """--learn_phrases: phrases.txt beside the vocabulary (the input is known to be good: it made the vocabulary)."""
    import os

    from absl import logging

    from bert_tf.pretraining_data.knowledge_units import PHRASE_FILE_NAME
    from bert_tf.tokenization import phrase_learning

    lines = phrase_learning.corpus_lines(expand_input_files(FLAGS.input_file), FLAGS.do_lower_case, FLAGS.max_lines)
    phrases = phrase_learning.learn_phrases(lines, FLAGS.phrase_min_count, FLAGS.phrase_min_pmi)
    path = os.path.join(os.path.dirname(os.path.abspath(FLAGS.output_file)), PHRASE_FILE_NAME)
    phrase_learning.write_phrases(phrases, path)
    logging.info("Wrote %d phrases to %s", len(phrases), path)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
