r"""Creates BERT pretraining TFRecords (masked LM + next sentence) from text.

Replaces google-research/bert's `create_pretraining_data.py`: its flags (plus
the ones below), its input format and its output features (`input_ids`,
`input_mask`, `segment_ids`, `masked_lm_positions`, `masked_lm_ids`,
`masked_lm_weights`, `next_sentence_labels`), so its TFRecords and ours are
interchangeable. As in the original, `--max_predictions_per_seq` below
`round(max_seq_length * masked_lm_prob)` caps the masked positions (long
instances are masked at a lower rate; a warning says so).

    bert_tf_create_pretraining_data \
        --input_file=data/*.txt --output_file=out/pretrain.tfrecord \
        --vocab_file=vocab.txt --num_output_shards=8

(or `python -m tfrecords_tools.create_pretraining_data`): flags -> `bert_tf.pretraining_data.write_pretraining_data`.

Beyond the original: `--sentence_task=sop` (ALBERT's sentence order, label feature
`sentence_order_labels`) or `none` (RoBERTa's full sentences, no label feature), and
`--masking=whole_word|span` (SpanBERT's spans), `--masking=phrase|entity` (ERNIE's knowledge
masking, units from `--phrase_file`, learned phrases or capitalisation); docs/pretraining_objectives.md.

Beyond one machine: `--runner=DataflowRunner|FlinkRunner|SparkRunner|DirectRunner` runs the same chunks as
an Apache Beam pipeline (`bert_tf.pretraining_data.beam_pipeline`; `pip install 'bert_tf[beam]'`) with
the same records as the local run, `--beam_pipeline_options` passing the runner's options
(docs/pretraining.md, "At scale").

Input: one sentence per line, a blank line between documents, UTF-8
(`bert_tf_prepare_corpus` turns plain text into it and holds out documents).

Differences from the original:
* Streaming: the corpus is processed in chunks of about --chunk_mb of text
  cut between documents. Random next sentences are drawn from the same chunk
  and instances are shuffled within the chunk (the original held the whole
  corpus and shuffled globally); read the output with a shuffling reader
  (`bert_tf.data.pretraining_dataset`). Memory does not grow with the corpus.
* Parallel: --num_workers processes (default: all cores). This one
  tokenizes (TensorFlow) and writes; the others make and serialize the
  instances and load only numpy (`bert_tf.pretraining_data.instance_workers`): one
  TensorFlow process's memory, whatever the worker count and corpus size
  (benchmarks/RESULTS.md). The output is
  byte-identical for the same input and --random_seed, whatever the worker
  count.
* Tokenization runs in batches with the in-graph tokenizer
  (`bert_tf.tokenization.BertTokenizer`): the ids of HuggingFace's slow
  `BertTokenizer`, which differ from the original `FullTokenizer`'s in three
  corner cases: private-use and unassigned characters are deleted (the
  original deletes only Cc/Cf), words longer than 100 characters become
  [UNK] (the original: 200), and cased text is NFC-normalized before
  splitting (the original does not).
* A line that is not UTF-8 is an error naming file and line (the original
  silently dropped the bad bytes); --skip_invalid_utf8 skips such lines and
  reports how many. Input is checked before anything is written, and outputs
  are written under temporary names and renamed at the end.
* The end of a file ends a document; whole-word masking never joins a `##`
  piece across [SEP].
"""

import logging as std_logging

from absl import flags, logging

from bert_tf import cli
from bert_tf.pretraining_data import instance_workers, instances, knowledge_units, text_corpus, writer
from experiments import job_flags

FLAGS = flags.FLAGS
# "local", then Beam's runners (any other runner's class path works through the library function).
RUNNERS = ["local", "DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", "PortableRunner", "PrismRunner"]


def define_flags():
    """Defines this tool's flags; run() calls it.

    Flags are not defined at import so that importing several tools (or this
    module and a training script) in one process cannot clash on flag names.
    """
    job_flags.define(
        "input_file",
        "output_file",
        "vocab_file",
        "do_lower_case",
        "max_seq_length",
        "max_predictions_per_seq",
        "masked_lm_prob",
        "masking",
        "compression",
        notes={
            "input_file": "Raw text: one sentence per line, a blank line between documents.",
            "output_file": "TFRecords of tf.train.Examples (or a comma-separated list of files).",
            "vocab_file": "The one the BERT model was trained on.",
            "masking": "The 80/10/10 choice is made per word, span or unit; units for phrase/entity: "
            "--phrase_file, else phrases.txt beside --vocab_file for phrase and capitalised words not at a "
            "sentence start for entity with --nodo_lower_case.",
            "compression": "Of the output files.",
        },
    )
    flags.DEFINE_bool(
        "do_whole_word_mask",
        False,
        "Whether to use whole word masking rather than per-WordPiece masking (the original's; --masking=whole_word).",
    )
    flags.DEFINE_string(
        "phrase_file",
        None,
        "Phrases and entities for --masking=phrase|entity, one per line, matched as whole words, longest first "
        "(case-insensitively with --do_lower_case).",
    )
    flags.DEFINE_enum(
        "sentence_task",
        "nsp",
        instances.SENTENCE_TASKS,
        "nsp: BERT's next-sentence pairs (next_sentence_labels); sop: ALBERT's sentence order, two consecutive "
        "pieces of one document swapped half the time (sentence_order_labels, 1 = swapped); none: RoBERTa's "
        "FULL-SENTENCES, whole sentences packed to --max_seq_length across documents with a [SEP] between them, "
        "one segment, no label feature.",
    )
    flags.DEFINE_integer(
        "random_seed",
        12345,
        "Random seed for data generation (the original's name and default). Any integer; a negative seed gives "
        "its own output (see bert_tf.pretraining_data.instances.chunk_seeds).",
    )
    job_flags.define("dupe_factor")
    flags.DEFINE_float(
        "short_seq_prob", 0.1, "Probability of creating sequences which are shorter than the maximum length."
    )

    flags.DEFINE_integer("num_workers", None, "Worker processes (default: all cores). Does not change the output.")
    flags.DEFINE_enum(
        "runner",
        "local",
        RUNNERS,
        "local: this machine's --num_workers processes. A Beam runner runs the same chunks as an Apache Beam "
        "pipeline with the same records (pip install 'bert_tf[beam]'); --output_file is then one path, sharded "
        "by --num_output_shards.",
    )
    flags.DEFINE_list(
        "beam_pipeline_options",
        [],
        "With a Beam --runner: its pipeline options as key=value pairs, comma-separated, e.g. "
        "project=my-project,region=us-central1,temp_location=gs://bucket/tmp,setup_file=./setup.py",
    )
    flags.DEFINE_integer(
        "num_output_shards",
        None,
        "With one --output_file, write this many shards named FILE-00000-of-0000N; with a list, must equal its length.",
    )
    flags.DEFINE_float(
        "chunk_mb",
        1.0,
        "Megabytes of text per chunk. Random next sentences and the instance "
        "shuffle stay within a chunk; memory grows with chunk_mb x num_workers.",
    )
    flags.DEFINE_bool(
        "do_masking",
        True,
        "If False, write unmasked instances (masked_lm_* all padding) for readers that mask dynamically.",
    )
    flags.DEFINE_bool("skip_invalid_utf8", False, "Skip (and count) lines that are not valid UTF-8 instead of failing.")
    flags.DEFINE_float("progress_seconds", 10.0, "Seconds between progress lines.")


def _beam_pipeline():
    """The Beam pipeline module, or the install command as bad input when Apache Beam is missing."""
    try:
        from bert_tf.pretraining_data import beam_pipeline
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "apache_beam":
            raise
        raise ValueError(f"--runner={FLAGS.runner} needs Apache Beam: pip install 'bert_tf[beam]'") from None
    return beam_pipeline


def _not_a_corpus_error(record) -> bool:
    return not (record.exc_info and isinstance(record.exc_info[1], text_corpus.CorpusError))


def _skip_logged_corpus_errors() -> None:
    """Beam logs a worker's exception with its traceback; a `CorpusError` is bad input, reported in one line."""
    for name in ("apache_beam.runners.common", "apache_beam.runners.worker.bundle_processor"):
        std_logging.getLogger(name).addFilter(_not_a_corpus_error)  # once: the same filter is not added twice


def _beam_arguments() -> list[str]:
    """--beam_pipeline_options as Beam's flags (`a=1,b` -> `["--a=1", "--b"]`), once the runner's flags are checked."""
    if FLAGS.beam_pipeline_options and FLAGS.runner == "local":
        raise ValueError("--beam_pipeline_options needs a Beam --runner (it is local)")
    if FLAGS.runner != "local" and FLAGS.num_workers is not None:
        raise ValueError(f"--num_workers is for --runner=local; {FLAGS.runner}'s workers are set by its own options")
    if FLAGS.runner != "local" and "," in FLAGS.output_file:
        raise ValueError(f"--runner={FLAGS.runner} writes one --output_file, sharded by --num_output_shards")
    return [f"--{option.strip().lstrip('-')}" for option in FLAGS.beam_pipeline_options if option.strip()]


def _masking() -> str:
    """--masking, or "whole_word" for the original's --do_whole_word_mask (which contradicts any other --masking)."""
    if not FLAGS.do_whole_word_mask:
        return FLAGS.masking
    if FLAGS["masking"].present and FLAGS.masking != "whole_word":
        raise ValueError(f"--do_whole_word_mask contradicts --masking={FLAGS.masking}; give one of them.")
    return "whole_word"


# Bad input: one clear line, no traceback; nothing was written.
@cli.main_function("create_pretraining_data", bad_input=(ValueError, FileNotFoundError))
def main(argv):
    del argv  # Checked by cli.main_function.
    logging.set_verbosity(logging.INFO)
    cli.require_flags("input_file", "output_file", "vocab_file")
    config = instances.InstanceConfig(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        dupe_factor=FLAGS.dupe_factor,
        masking=_masking(),
        do_masking=FLAGS.do_masking,
        sentence_task=FLAGS.sentence_task,
    )
    config.validate()
    if FLAGS.chunk_mb <= 0:
        raise ValueError(f"--chunk_mb={FLAGS.chunk_mb} must be > 0")
    beam_arguments = _beam_arguments()
    beam_pipeline = _beam_pipeline() if FLAGS.runner != "local" else None
    if FLAGS.phrase_file and config.masking not in knowledge_units.KNOWLEDGE_MASKING:
        raise ValueError(f"--phrase_file is for --masking=phrase|entity, not --masking={config.masking}")
    units = knowledge_units.unit_tables(
        config.masking, config.do_masking, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.phrase_file
    )
    input_files = text_corpus.resolve_input_files(FLAGS.input_file)
    output_files = writer.resolve_output_files(FLAGS.output_file, FLAGS.num_output_shards)
    common = dict(
        vocab_file=FLAGS.vocab_file,
        config=config,
        do_lower_case=FLAGS.do_lower_case,
        seed=FLAGS.random_seed,
        chunk_bytes=max(1, int(FLAGS.chunk_mb * (1 << 20))),
        compression=None if FLAGS.compression == "NONE" else FLAGS.compression,
        skip_invalid_utf8=FLAGS.skip_invalid_utf8,
        units=units,
    )
    if beam_pipeline:
        _skip_logged_corpus_errors()
        # The same checks of the vocabulary and the arguments; the corpus is read by the workers.
        beam_pipeline.write_pretraining_data_with_beam(
            input_files,
            FLAGS.output_file,
            len(output_files),
            runner=FLAGS.runner,
            pipeline_args=beam_arguments,
            **common,
        )
        return
    # The writer checks the vocabulary and the corpus before it logs anything: bad input prints only
    # the one error line.
    try:
        writer.write_pretraining_data(
            input_files=input_files,
            output_files=output_files,
            num_workers=FLAGS.num_workers,
            progress_seconds=FLAGS.progress_seconds,
            **common,
        )
    except instance_workers.HelperError as e:
        if e.exit_status is None:
            raise  # a helper's builder raised: a bug, reported with its traceback
        # A helper died (a crash, the OOM killer, a kill from outside): one line, exit status 1, no output.
        cli.exit_failure("create_pretraining_data", f"{e}; no output was written")


def run(argv=None):
    """Console-script entry point."""
    # This process tokenizes (TensorFlow) and writes, nothing else: TensorFlow loads without the packages it
    # would import for features this tool never uses. Imported as a module (by tests, by a notebook), the
    # tool leaves them alone.
    cli.run(main, define_flags, argv, lean_tensorflow=True)


if __name__ == "__main__":
    run()
