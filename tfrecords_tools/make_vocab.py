"""Learns a BERT WordPiece vocabulary from text files.

    python -m tfrecords_tools.make_vocab --input_file=corpus.txt \\
        --vocab_size=30522 --output_file=vocab.txt [--nodo_lower_case]

One text per line. Words are split and normalized exactly as
`bert_tf.tokenization.BertTokenizer` will split them (same lower-casing,
accent stripping, punctuation and CJK splitting), so every learned piece is
reachable. The file starts with [PAD] (id 0), [UNK], [CLS], [SEP], [MASK],
then `--num_unused` placeholders [unused0].., then single characters, then
the learned pieces.
"""

import glob
import os

from absl import flags
from absl import logging

from bert_tf import cli
from bert_tf.cli import BadInputError

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("input_file", None, "Text file(s): comma-separated paths or glob patterns.")
    flags.DEFINE_string("output_file", None, "Where to write vocab.txt.")
    flags.DEFINE_integer("vocab_size", 30522, "Maximum vocabulary size, special tokens included.")
    flags.DEFINE_bool(
        "do_lower_case",
        True,
        "Learn an uncased vocabulary (lower-case, strip accents); --nodo_lower_case for a cased one.",
    )
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


def _first_invalid_utf8_line(input_files):
    """(file, line number) of the first line that is not UTF-8, or None.

    Only called after counting failed, so a good corpus is read once.
    """
    for path in input_files:
        with open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return path, number
    return None


def make_vocab(
    input_files,
    output_file,
    vocab_size,
    do_lower_case=True,
    num_unused=0,
    min_count=10,
    max_unique_chars=1000,
    max_word_length=50,
    num_iterations=4,
    max_input_words=5_000_000,
    max_lines=0,
):
    """Learns a vocabulary from `input_files` and writes it to `output_file`.

    Returns the list of tokens written.
    """
    import tensorflow as tf  # heavy; keep `--help` fast

    from bert_tf.tokenization import vocab as vocab_lib
    from bert_tf.tokenization import vocab_learning

    reserved = list(vocab_lib.SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(num_unused)]
    if vocab_size <= len(reserved):
        raise BadInputError(
            f"--vocab_size={vocab_size} leaves no room after the {len(reserved)} reserved "
            "tokens (special tokens and --num_unused)"
        )
    for path in input_files:
        if not os.path.isfile(path):
            raise BadInputError(f"--input_file: {path!r} is not a file")
    if output_file and os.path.isdir(output_file):
        raise BadInputError(f"--output_file={output_file} is a directory")
    lines = tf.data.TextLineDataset(input_files)
    if max_lines:
        lines = lines.take(max_lines)
    # The tokenizer would quietly replace bytes that are not UTF-8; fail instead, then find the line.
    lines = lines.map(
        lambda line: tf.strings.unicode_transcode(line, "UTF-8", "UTF-8", errors="strict"),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    try:
        counts = vocab_learning.count_words(lines, lower_case=do_lower_case)
    except (tf.errors.OpError, UnicodeDecodeError) as e:
        bad_line = _first_invalid_utf8_line(input_files)
        if bad_line:
            raise BadInputError(f"{bad_line[0]}:{bad_line[1]}: not valid UTF-8") from None
        message = e.message if isinstance(e, tf.errors.OpError) else e
        raise BadInputError(f"--input_file: cannot read {', '.join(input_files)}: {message}") from None
    logging.info("%d distinct words, %d in all", len(counts), sum(counts.values()))
    if not counts:
        raise BadInputError(f"--input_file: no words in {', '.join(input_files)}")
    try:
        tokens = vocab_learning.learn_vocab(
            counts,
            vocab_size,
            reserved_tokens=reserved,
            min_count=min_count,
            max_unique_chars=max_unique_chars,
            max_word_length=max_word_length,
            num_iterations=num_iterations,
            max_input_words=max_input_words,
        )
    except ValueError as e:
        # The alphabet of the corpus does not fit: only the flags can fix it.
        raise BadInputError(f"--vocab_size={vocab_size}: {e}") from None
    vocab_lib.write_vocab(tokens, output_file)
    logging.info("Wrote %d tokens to %s", len(tokens), output_file)
    return tokens


@cli.main_function("make_vocab")
def main(argv):
    del argv  # Checked by cli.main_function.
    cli.require_flags("input_file", "output_file")
    make_vocab(
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


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
