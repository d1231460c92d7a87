"""The main job: what BERT is for, on the bundled data, in one command.

    python -m experiments.demo --output_dir=runs/demo

BERT's life cycle (the default run):
  1. learn a WordPiece vocabulary from the bundled corpus (`tfrecords_tools.make_vocab`);
  2. write pretraining TFRecords (`tfrecords_tools.create_pretraining_data`) and the
     masked LM's unigram baseline on them;
  3. pretrain a small BERT (`experiments.pretrain`): held-out MLM accuracy and loss
     against the unigram baseline, NSP accuracy against chance;
  4. convert all-MiniLM-L6-v2, installed from PyPI, to a bert_tf model directory
     (`experiments.convert --from=hf`);
  5. fine-tune it on the reviews (`experiments.finetune`, packed rows);
  6. export SavedModels (`experiments.export`): the fine-tuned classifier, raw text in, with its
     TF Hub-style encoder and preprocessing; the encoder pretrained in step 3 and a randomly
     initialised one of the same architecture;
  7. classify new sentences with the exported classifier, as a server would;
  8. fine-tune the small encoders through `hub.KerasLayer` (`experiments.classify_with_hub`, the
     TF Hub notebook's program): the random one, the baseline (`--nocompare_random_init` skips
     it), and the one from step 3 (`--nofinetune_from_scratch` skips it).

The tours (`--tours=probes,distillation`; each takes minutes more, so the default run prints the
command that adds it, which reuses every finished step):
  probes: every layer's frozen features (`experiments.probe_layers`, on packed rows): which layer of the
     real encoder is best for part-of-speech tags and for the reviews (--probe_sentences, --probe_reviews),
     against its randomly initialised twin, and whether the encoder from step 3 learned anything a token
     probe sees;
  distillation: the real-weights classifier distilled into a 3-layer student from its own layers, on packed
     rows (`experiments.distill_frontier`): both models' held-out accuracy and the sequences per second of
     their exported encoder SavedModels, timed interleaved in one process.

Every step runs the project's real command-line tool in a subprocess, so its
progress lines are the tool's own. A step whose result is already in
`--output_dir` is reused; `--restart` starts over. The results go to
`<output_dir>/summary.json` and `<output_dir>/curves.png`.

The package: this module holds the program (its flags and the order of the steps), `config` the job's
settings (`DemoConfig`, which the steps read), `steps` the steps, `runner` the step runner, `report` the
summary and the figure; `python -m experiments.demo` runs `run`.
"""

import dataclasses
import os
import shlex
import shutil
import time

from absl import flags, logging

from bert_tf import cli, errors, file_io
from experiments import job_flags
from experiments.demo.config import TOURS, DemoConfig
from experiments.demo.report import plot_curves, print_summary, summarize
from experiments.demo.steps import (
    PROBES_TITLE,
    Recipe,
    convert_real_weights,
    distill_classifier,
    distillation_title,
    export_models,
    fine_tune_real_weights,
    fine_tune_with_hub,
    learn_vocabulary,
    majority_baseline,
    pretrain_from_scratch,
    probe_layers,
    serve_new_sentences,
    write_tfrecords,
)

FLAGS = flags.FLAGS
DEFAULTS = DemoConfig()


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none); defaults: `DemoConfig`'s."""
    d = DEFAULTS
    job_flags.define(
        "output_dir",
        "vocab_size",
        "max_seq_length",
        "max_predictions_per_seq",
        "dupe_factor",
        "distribution_strategy",
        notes={
            "output_dir": "Everything the demo builds.",
            "distribution_strategy": "Here pretraining's on this host: one_device or mirrored (all its GPUs); "
            "multi-worker and TPU pretraining: run experiments.pretrain itself.",
        },
        defaults={
            "output_dir": (d.output_dir, f"Default here: {d.output_dir}."),
            "vocab_size": (d.vocab_size, f"Default here: {d.vocab_size:,}, for the bundled corpus of about 1M words."),
            "max_seq_length": (
                d.max_seq_length,
                f"Here pretraining's and the small encoders' fine-tuning's; default {d.max_seq_length} keeps the "
                "run short on a CPU (a review averages about 90 WordPieces).",
            ),
            "max_predictions_per_seq": (
                d.max_predictions_per_seq,
                f"Default here: {d.max_predictions_per_seq}, 15% of the shorter sequences.",
            ),
            "dupe_factor": (
                d.dupe_factor,
                f"Default here: {d.dupe_factor}, a short run sees each sequence about once.",
            ),
        },
    )
    flags.DEFINE_bool("restart", False, "Delete --output_dir first instead of reusing finished steps.")
    flags.DEFINE_list(
        "tours",
        list(d.tours),
        "Optional tours to run after BERT's life cycle, comma-separated: probes (every layer's frozen features "
        "probed), distillation (the real-weights classifier distilled into a faster student). Each takes minutes "
        "more; a run without them prints the command that adds them, which reuses every finished step.",
    )
    # Pretraining from scratch.
    flags.DEFINE_integer(
        "vocab_input_words",
        d.vocab_input_words,
        "The vocabulary is learned from this many most frequent distinct words (faster).",
    )
    flags.DEFINE_integer("num_layers", d.num_layers, "Transformer layers of the BERT pretrained from scratch.")
    flags.DEFINE_integer("hidden_size", d.hidden_size, "Its hidden size (heads = hidden_size / 64).")
    flags.DEFINE_integer("pretrain_steps", d.pretrain_steps, "Pretraining steps.")
    flags.DEFINE_integer("pretrain_batch_size", d.pretrain_batch_size, "Pretraining batch size.")
    flags.DEFINE_float(
        "pretrain_learning_rate",
        d.pretrain_learning_rate,
        "Peak pretraining learning rate (1e-3 leaves this small model at the unigram plateau in some runs).",
    )
    flags.DEFINE_float(
        "pretrain_dropout",
        d.pretrain_dropout,
        "Dropout while pretraining. Off by default, as in short-budget recipes (Cramming, Geiping & "
        "Goldstein 2022): the model sees each sequence about once, so dropout only slows it down. "
        "The exported encoder fine-tunes with BERT's 0.1.",
    )
    # Real published weights.
    flags.DEFINE_string(
        "real_weights_dir",
        d.real_weights_dir,
        "HuggingFace BERT directory (config.json, model.safetensors, "
        "vocab.txt) to convert; default: all-MiniLM-L6-v2 installed by scripts/setup.sh.",
    )
    flags.DEFINE_integer(
        "real_weights_seq_length",
        d.real_weights_seq_length,
        "Sequence length for fine-tuning the real encoder (128 covers most reviews, which average about 90 "
        "WordPieces; 64 halves the step's cost and loses about 2 points).",
    )
    flags.DEFINE_integer("real_weights_epochs", d.real_weights_epochs, "Fine-tuning epochs of the real encoder.")
    flags.DEFINE_float(
        "real_weights_learning_rate",
        d.real_weights_learning_rate,
        "Peak AdamW learning rate for the real encoder (10% linear warm-up, then linear decay: BERT's "
        "fine-tuning schedule).",
    )
    flags.DEFINE_bool(
        "real_weights_packing",
        d.real_weights_packing,
        "Fine-tune the real encoder on packed rows (experiments.finetune --packing: whole reviews fill each row, "
        "each computed as if alone; almost no padding); --noreal_weights_packing: one review a row.",
    )
    # Fine-tuning the small encoders.
    flags.DEFINE_integer("small_encoder_epochs", d.small_encoder_epochs, "Fine-tuning epochs of the small encoders.")
    flags.DEFINE_float(
        "small_encoder_learning_rate",
        d.small_encoder_learning_rate,
        "Their constant Adam learning rate (Keras' default, which the notebook uses).",
    )
    flags.DEFINE_bool(
        "finetune_from_scratch",
        d.finetune_from_scratch,
        "Export and fine-tune the encoder pretrained in step 3 through hub.KerasLayer.",
    )
    flags.DEFINE_bool(
        "compare_random_init",
        d.compare_random_init,
        "Export and fine-tune a randomly initialised encoder of the same architecture, the baseline.",
    )
    # The distillation tour.
    flags.DEFINE_integer(
        "distill_student_layers",
        d.distill_student_layers,
        "The student's layers, taken evenly spaced from the teacher's (DistilBERT).",
    )
    flags.DEFINE_integer(
        "distill_seq_length",
        d.distill_seq_length,
        "Sequence length of the distillation, the teacher's and the student's evaluation and their timing.",
    )
    flags.DEFINE_float("distill_epochs", d.distill_epochs, "Distillation epochs over the training reviews.")
    flags.DEFINE_float(
        "distill_learning_rate", d.distill_learning_rate, "Peak AdamW learning rate of the student (10% warm-up)."
    )
    flags.DEFINE_integer(
        "distill_speed_examples", d.distill_speed_examples, "Held-out reviews timed per model and round."
    )
    # Smaller runs.
    flags.DEFINE_integer("corpus_lines", d.corpus_lines, "Use only the first N lines of the bundled corpus (0: all).")
    flags.DEFINE_integer("train_examples", d.train_examples, "Use at most N labeled training reviews (0: all 4,000).")
    flags.DEFINE_integer("test_examples", d.test_examples, "Use at most N held-out reviews (0: all 1,000).")
    flags.DEFINE_integer(
        "probe_sentences",
        d.probe_sentences,
        "The probes tour: at most N tagged training and N test sentences (0: all bundled, 2,000 and 1,000).",
    )
    flags.DEFINE_integer(
        "probe_reviews",
        d.probe_reviews,
        "The probes tour: the real encoder's sentence features probed with the first N training reviews (0: all); "
        "the test set is the held-out reviews.",
    )
    flags.DEFINE_integer(
        "tool_time_limit_minutes",
        d.tool_time_limit_minutes,
        "Stop the demo if one step's tool runs longer than this.",
    )


def _config_from_flags() -> DemoConfig:
    """The job's `DemoConfig` from its flags (same names), checked once; the installed weights found."""
    config = job_flags.config_from_flags(DemoConfig, tours=tuple(FLAGS.tours))
    if not config.real_weights_dir:
        from bert_tf.checkpoints import published

        try:
            published.minilm_l6_v2_dir()
        except published.PublishedWeightsNotInstalled as e:
            raise errors.BadInputError(str(e)) from None
    return dataclasses.replace(config, output_dir=os.path.abspath(config.output_dir))


def tour_command(tours) -> str:
    """The command that runs this job again with `tours` added: the same flags given, so every finished step
    is reused and only the tours run."""
    given = [
        FLAGS[field.name].serialize()
        for field in dataclasses.fields(DemoConfig)
        if field.name not in ("output_dir", "tours") and FLAGS[field.name].present
    ]
    words = ["python", "-m", "experiments.demo", f"--output_dir={FLAGS.output_dir}", *given]
    return " ".join(shlex.quote(word) for word in [*words, f"--tours={','.join(tours)}"])


def _skip_tour(title, tour):
    """Prints that `tour` did not run, with the command that runs it; returns its line for the summary."""
    command = tour_command([tour])
    print(f"\n== {title}: skipped (an option: {TOURS[tour]}; minutes more). To run it:\n   {command}", flush=True)
    return {"tour": tour, "title": title, "command": command}


@cli.main_function("demo")
def main(argv):
    del argv
    from bert_tf.datasets import bundled

    config = _config_from_flags()
    # The demo reports through print(); TensorFlow's INFO lines from the steps it runs in this
    # process would interleave with them.
    logging.set_verbosity(logging.WARNING)
    if FLAGS.restart and os.path.exists(config.output_dir):
        shutil.rmtree(config.output_dir)
    os.makedirs(config.output_dir, exist_ok=True)
    start = time.time()
    train_file, test_file = bundled.sentiment_path("train"), bundled.sentiment_path("test")
    train_texts, _ = bundled.read_sentiment("train")
    if config.train_examples:
        train_texts = train_texts[: config.train_examples]
    steps = []

    def step(result_and_step):
        result, step_result = result_and_step
        steps.append(step_result)
        return result

    vocab = step(learn_vocabulary(config, train_texts))
    model_config = config.small_encoder_config(vocab["vocab_size"])
    data = step(write_tfrecords(config, vocab))
    pretrained = step(pretrain_from_scratch(config, model_config, vocab, data))
    real = step(convert_real_weights(config))
    classifiers = {"real_weights": step(fine_tune_real_weights(config, real, train_file, test_file))}
    exports = step(export_models(config, model_config, vocab, pretrained, classifiers["real_weights"]))
    served = step(serve_new_sentences(config, exports))
    recipes = []
    if config.compare_random_init:
        recipes.append(
            Recipe(
                "random_init",
                "8a. fine-tune a randomly initialised small encoder through hub.KerasLayer",
                config.small_encoder_epochs,
                config.small_encoder_learning_rate,
            )
        )
    if config.finetune_from_scratch:
        recipes.append(
            Recipe(
                "from_scratch",
                "8b. the same, from the small encoder pretrained in step 3",
                config.small_encoder_epochs,
                config.small_encoder_learning_rate,
            )
        )
    for recipe in recipes:
        classifiers[recipe.label] = step(fine_tune_with_hub(config, exports, recipe, train_file, test_file))

    probes, distillation, skipped = None, None, []
    if config.runs("probes"):
        probes = step(probe_layers(config, real, pretrained))
    else:
        skipped.append(_skip_tour(PROBES_TITLE, "probes"))
    if config.runs("distillation"):
        distillation = step(distill_classifier(config, classifiers["real_weights"], train_file, test_file))
    else:
        skipped.append(_skip_tour(distillation_title(config), "distillation"))

    baseline = majority_baseline(config, train_file, test_file)
    summary = summarize(data, pretrained, baseline, classifiers, served, probes, steps, distillation, skipped)
    if len(skipped) > 1:
        summary["all_tours_command"] = tour_command([s["tour"] for s in skipped])
    file_io.write_json(os.path.join(config.output_dir, "summary.json"), summary)
    plot_curves(os.path.join(config.output_dir, "curves.png"), pretrained["model_dir"], summary, classifiers)
    print_summary(steps, summary, time.time() - start, config.output_dir)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)
