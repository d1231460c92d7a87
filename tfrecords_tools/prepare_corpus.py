r"""Turns plain text into the pretraining writer's input and holds out a fraction of its documents.

    bert_tf_prepare_corpus --input_file=book.txt --output_train=corpus/train.txt \
        --output_heldout=corpus/heldout.txt --heldout_fraction=0.05 --document_start_regex='^CHAPTER '

(or `python -m tfrecords_tools.prepare_corpus`): flags -> `bert_tf.pretraining_data.corpus_preparation`.

`bert_tf_create_pretraining_data` reads one sentence per line and a blank line between documents; a raw
book or article dump is not in that form (each wrapped line would be a "sentence", each paragraph a
"document"). This tool joins wrapped lines, splits sentences by a documented rule (pure Python, nothing to
download; see `bert_tf.pretraining_data.corpus_preparation` for the rule and its limits: it is written for
English-like punctuation and knows a list of abbreviations), cuts the text into documents and writes every
document to --output_train, or, for --heldout_fraction of them (spread evenly through the corpus, the same
on every run), to --output_heldout. Then:

    bert_tf_create_pretraining_data --input_file=corpus/train.txt --output_file=data/train.tfrecord ...
    bert_tf_create_pretraining_data --input_file=corpus/heldout.txt --output_file=data/heldout.tfrecord \
        --dupe_factor=1 ...

Documents (--document_boundary): `paragraph` (a blank line ends one; the default), `line` (one document
per line, as in many dumps) or `file`; --document_start_regex (a Python regex searched in each line, e.g.
'^CHAPTER ' or '^= [^=]') makes each matching line start a document instead, which suits a book: next
sentence prediction then draws its actual next sentences from a chapter. Input is UTF-8; an existing
output is refused unless --overwrite.
"""

import contextlib
import os
import re

from absl import flags, logging

from bert_tf import cli, errors, file_io
from bert_tf.errors import BadInputError
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    from bert_tf.pretraining_data.corpus_preparation import DOCUMENT_BOUNDARIES

    job_flags.define(
        "input_file", "overwrite", notes={"input_file": "Plain text, UTF-8.", "overwrite": "Existing output files."}
    )
    flags.DEFINE_string("output_train", None, "Where to write the training corpus (one sentence per line).")
    flags.DEFINE_string("output_heldout", None, "Where to write the held-out documents (same format).")
    flags.DEFINE_float(
        "heldout_fraction",
        0.05,
        "Fraction of the documents written to --output_heldout, spread evenly (0: none, no --output_heldout).",
    )
    flags.DEFINE_enum(
        "document_boundary",
        "paragraph",
        list(DOCUMENT_BOUNDARIES),
        "What ends a document: a blank line, every line, or the end of a file.",
    )
    flags.DEFINE_string(
        "document_start_regex",
        None,
        "A Python regex; each line it matches starts a new document (e.g. '^CHAPTER '). Overrides "
        "--document_boundary (blank lines then only end paragraphs).",
    )
    flags.DEFINE_integer(
        "min_sentences_per_document", 1, "Drop shorter documents (a lone heading or page number: set 2)."
    )


def _check_flags():
    cli.require_flags("input_file", "output_train")
    if not 0.0 <= FLAGS.heldout_fraction < 1.0:
        raise BadInputError(f"--heldout_fraction must be in [0, 1), got {FLAGS.heldout_fraction}")
    if FLAGS.heldout_fraction > 0 and not FLAGS.output_heldout:
        raise BadInputError("--output_heldout is required with --heldout_fraction > 0 (or set --heldout_fraction=0)")
    if FLAGS.min_sentences_per_document < 1:
        raise BadInputError(f"--min_sentences_per_document must be >= 1, got {FLAGS.min_sentences_per_document}")
    outputs = [("output_train", FLAGS.output_train)]
    if FLAGS.heldout_fraction > 0:
        outputs.append(("output_heldout", FLAGS.output_heldout))
    if len({os.path.abspath(path) for _, path in outputs}) < len(outputs):
        raise BadInputError("--output_train and --output_heldout are the same file")
    for flag, path in outputs:
        if os.path.exists(path) and not FLAGS.overwrite:
            raise BadInputError(f"--{flag}: {path} exists; choose another file or pass --overwrite")
    document_start = None
    if FLAGS.document_start_regex:
        try:
            document_start = re.compile(FLAGS.document_start_regex)
        except re.error as e:
            raise BadInputError(f"--document_start_regex={FLAGS.document_start_regex!r}: {e}") from None
    return document_start


def _read_lines(files):
    """(name, lines) for each file, opened one at a time."""
    for path in files:
        with open(path, encoding="utf-8") as f:
            yield path, f


@cli.main_function("prepare_corpus", bad_input=(OSError, errors.DataError))
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.pretraining_data import corpus_preparation
    from tfrecords_tools.make_vocab import expand_input_files

    document_start = _check_flags()
    files = expand_input_files(FLAGS.input_file)
    for path in files:  # before anything is written
        errors.check_utf8(path, "input_file")
    fraction = FLAGS.heldout_fraction
    for path in (FLAGS.output_train, FLAGS.output_heldout if fraction > 0 else None):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    with contextlib.ExitStack() as stack:
        # Written under temporary names, renamed into place only when complete.
        train_path = stack.enter_context(file_io.atomic_path(FLAGS.output_train))
        train = stack.enter_context(open(train_path, "w", encoding="utf-8"))
        heldout = None
        if fraction > 0:
            heldout_path = stack.enter_context(file_io.atomic_path(FLAGS.output_heldout))
            heldout = stack.enter_context(open(heldout_path, "w", encoding="utf-8"))
        stats = corpus_preparation.prepare_corpus(
            _read_lines(files),
            train,
            heldout,
            heldout_fraction=fraction,
            document_boundary=FLAGS.document_boundary,
            document_start=document_start,
            min_sentences=FLAGS.min_sentences_per_document,
        )
        if not stats.train_documents:
            raise BadInputError(f"--input_file: no text in {', '.join(files)}")
    logging.info(
        "Wrote %d documents (%d sentences) to %s%s.",
        stats.train_documents,
        stats.train_sentences,
        FLAGS.output_train,
        f" and {stats.heldout_documents} held-out documents ({stats.heldout_sentences} sentences) to "
        f"{FLAGS.output_heldout}"
        if heldout is not None
        else "",
    )
    if heldout is not None and not stats.heldout_documents:
        logging.warning(
            "No document held out: %d documents x --heldout_fraction=%g rounds to 0; raise the fraction, or cut "
            "the text into more documents (--document_boundary, --document_start_regex).",
            stats.train_documents,
            fraction,
        )


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
