"""The whole BERT life cycle on the bundled data, in one command.

    python -m experiments.demo --output_dir=runs/demo

1. learn a WordPiece vocabulary from the bundled corpus (`tfrecords_tools.make_vocab`);
2. write pretraining TFRecords (`tfrecords_tools.create_pretraining_data`);
3. pretrain a small BERT (`experiments.pretrain`), evaluating MLM and NSP accuracy as it goes;
4. export the encoder and preprocessing SavedModels (`experiments.export`);
5. fine-tune a sentiment classifier through `hub.KerasLayer` (`experiments.classify_with_hub`),
   once on the pretrained encoder and once on a randomly initialised one, against the
   majority-class baseline;
6. classify a few new sentences.

Every step runs the project's real command-line tool in a subprocess, so its
progress lines are the tool's own. A step whose result is already in
`--output_dir` is reused; `--restart` starts over.
"""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    flags.DEFINE_string("output_dir", "runs/demo", "Where the demo writes everything it builds.")
    flags.DEFINE_bool("restart", False, "Delete --output_dir first instead of reusing finished steps.")
    flags.DEFINE_integer("vocab_size", 8000, "Size of the learned WordPiece vocabulary.")
    flags.DEFINE_integer("vocab_input_words", 8000,
                         "The vocabulary is learned from this many most frequent distinct words (faster).")
    flags.DEFINE_integer("num_layers", 2, "Transformer layers of the demo BERT.")
    flags.DEFINE_integer("hidden_size", 128, "Hidden size of the demo BERT (heads = hidden_size / 64).")
    flags.DEFINE_integer("max_seq_length", 64, "Sequence length for pretraining and fine-tuning (64 keeps the run "
                         "short on a CPU; a review averages about 90 WordPieces).")
    flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions per pretraining sequence.")
    flags.DEFINE_integer("dupe_factor", 2, "Times the corpus is masked differently (create_pretraining_data).")
    flags.DEFINE_integer("pretrain_steps", 1500, "Pretraining steps.")
    flags.DEFINE_integer("pretrain_batch_size", 32, "Pretraining batch size.")
    flags.DEFINE_float("pretrain_learning_rate", 1e-3, "Peak pretraining learning rate.")
    flags.DEFINE_float("pretrain_dropout", 0.0,
                       "Dropout while pretraining. Off by default, as in short-budget recipes (Cramming, Geiping & "
                       "Goldstein 2022): the model sees each sequence about once, so dropout only slows it down (by "
                       "30-45% on a CPU). The exported encoder fine-tunes with BERT's 0.1.")
    flags.DEFINE_integer("finetune_epochs", 2, "Fine-tuning epochs.")
    flags.DEFINE_float("finetune_learning_rate", 1e-3,
                       "Fine-tuning learning rate (Adam; 1e-3 is Keras' default, which the notebook uses).")
    flags.DEFINE_integer("corpus_lines", 0, "Use only the first N lines of the bundled corpus (0: all), for quick runs.")
    flags.DEFINE_integer("train_examples", 0, "Use at most N labeled training reviews (0: all 4,000).")
    flags.DEFINE_integer("test_examples", 0, "Use at most N held-out reviews (0: all 1,000).")
    flags.DEFINE_bool("compare_random_init", True, "Also fine-tune a randomly initialised encoder, for comparison.")


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass
class StepResult:
    name: str
    seconds: float
    summary: str


def _run_tool(module, log_path, *args, env=None):
    """Runs `python -m module args...`, echoing its output and keeping a log."""
    command = [sys.executable, "-m", module, *args]
    print(f"    $ python -m {module} {' '.join(args)}", flush=True)
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   cwd=REPO_ROOT, env=env)
        for line in process.stdout:
            log.write(line)
            if _is_progress_line(line):
                print("    " + _ABSL_PREFIX.sub("", line.rstrip()), flush=True)
        returncode = process.wait()
    if returncode != 0:
        with open(log_path, encoding="utf-8") as log:
            tail = "".join(log.readlines()[-30:])
        raise RuntimeError(f"python -m {module} failed with exit code {returncode}; log: {log_path}\n{tail}")


_NOISE = re.compile(r"oneDNN|cuda|cuInit|absl::InitializeLog|cpu_feature_guard|rebuild TensorFlow|"
                    r"functional_saver|Sharding callback|WARNING: All log messages|TF_ENABLE_ONEDNN|"
                    r"AVX|computation placer|UserWarning|warnings.warn|DeprecationWarning|"
                    r"unsupported characters which will be renamed|Assets written to|Writing fingerprint")


_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


def _is_progress_line(line):
    return bool(line.strip()) and not _NOISE.search(line)


class Step:
    """A demo step whose result is stored in `<output_dir>/<name>/result.json` once it succeeds."""

    def __init__(self, output_dir, name):
        self.dir = os.path.join(output_dir, name)
        self.name = name
        self.result_path = os.path.join(self.dir, "result.json")

    def done(self):
        return os.path.exists(self.result_path)

    def load(self):
        with open(self.result_path, encoding="utf-8") as f:
            return json.load(f)

    def save(self, result):
        tmp = self.result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        os.replace(tmp, self.result_path)

    def run(self, title, work, describe):
        """Runs `work(step_dir) -> result dict` unless already done; returns a StepResult."""
        print(f"\n== {title}", flush=True)
        if self.done():
            result = self.load()
            print(f"   reusing {self.dir} (pass --restart to rebuild)")
        else:
            if os.path.exists(self.dir):
                shutil.rmtree(self.dir)
            os.makedirs(self.dir)
            start = time.time()
            result = work(self.dir)
            result["seconds"] = time.time() - start
            self.save(result)
        summary = describe(result)
        print(f"-> {title}: {summary} ({result['seconds']:.0f} s)", flush=True)
        return StepResult(title, result["seconds"], summary)


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


def _read_scalars(summary_dir):
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


def plot_curves(path, pretrain_dir, classifier_results):
    """Pretraining (train and eval) and fine-tuning curves in one PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = _read_scalars(os.path.join(pretrain_dir, "summaries", "train"))
    evaluation = _read_scalars(os.path.join(pretrain_dir, "summaries", "eval"))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for tag in ("loss", "mlm_loss", "nsp_loss"):
        if tag in train:
            steps, values = zip(*train[tag])
            axes[0].plot(steps, values, label=f"train {tag}")
    axes[0].set(title="Pretraining loss", xlabel="step")
    for tag in ("mlm_accuracy", "nsp_accuracy"):
        for source, series in (("train", train), ("eval", evaluation)):
            if tag in series:
                steps, values = zip(*series[tag])
                axes[1].plot(steps, values, marker="o" if source == "eval" else None, label=f"{source} {tag}")
    axes[1].set(title="Pretraining accuracy", xlabel="step")
    for label, results in classifier_results.items():
        history = results["history"]
        epochs = range(1, len(history["val_accuracy"]) + 1)
        axes[2].plot(epochs, history["val_accuracy"], marker="o", label=f"{label}: held-out accuracy")
        axes[2].axhline(results["majority_baseline_accuracy"], color="gray", linestyle="--")
    axes[2].set(title="Fine-tuning (dashed: majority class)", xlabel="epoch")
    for ax in axes:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv):
    del argv
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from bert_tf.config import BertConfig
    from bert_tf.datasets import bundled

    output_dir = os.path.abspath(FLAGS.output_dir)
    if FLAGS.restart and os.path.exists(output_dir):
        shutil.rmtree(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    if FLAGS.hidden_size % 64:
        raise app.UsageError(f"--hidden_size={FLAGS.hidden_size} must be a multiple of 64 (heads of size 64).")
    start = time.time()
    steps = []
    train_file, test_file = bundled.sentiment_path("train"), bundled.sentiment_path("test")
    train_texts, _ = bundled.read_sentiment("train")
    if FLAGS.train_examples:
        train_texts = train_texts[:FLAGS.train_examples]

    # 1. Vocabulary.
    vocab_step = Step(output_dir, "vocab")

    def learn_vocab(step_dir):
        corpus = os.path.join(step_dir, "corpus.txt")
        lines = write_pretraining_corpus(corpus, FLAGS.corpus_lines, train_texts)
        vocab_file = os.path.join(step_dir, "vocab.txt")
        _run_tool("tfrecords_tools.make_vocab", os.path.join(step_dir, "make_vocab.log"),
                  f"--input_file={corpus}", f"--output_file={vocab_file}", f"--vocab_size={FLAGS.vocab_size}",
                  "--do_lower_case", f"--max_input_words={FLAGS.vocab_input_words}")
        with open(vocab_file, encoding="utf-8") as f:
            size = sum(1 for _ in f)
        return {"corpus": corpus, "corpus_lines": lines, "vocab_file": vocab_file, "vocab_size": size}

    steps.append(vocab_step.run(
        "1. learn a WordPiece vocabulary", learn_vocab,
        lambda r: f"{r['vocab_size']:,} pieces from {r['corpus_lines']:,} corpus lines"))
    vocab = vocab_step.load()

    # 2. Pretraining TFRecords.
    data_step = Step(output_dir, "tfrecords")

    def write_tfrecords(step_dir):
        # Every 20th document goes to a held-out file for evaluation.
        train_corpus, eval_corpus = os.path.join(step_dir, "train.txt"), os.path.join(step_dir, "eval.txt")
        _split_documents(vocab["corpus"], train_corpus, eval_corpus, every=20)
        results = {}
        for split, corpus, dupe in (("train", train_corpus, FLAGS.dupe_factor), ("eval", eval_corpus, 1)):
            output = os.path.join(step_dir, f"{split}.tfrecord")
            _run_tool("tfrecords_tools.create_pretraining_data", os.path.join(step_dir, f"{split}.log"),
                      f"--input_file={corpus}", f"--output_file={output}", f"--vocab_file={vocab['vocab_file']}",
                      "--do_lower_case", f"--max_seq_length={FLAGS.max_seq_length}",
                      f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}", f"--dupe_factor={dupe}")
            results[f"{split}_file"] = output
            results[f"{split}_instances"] = _count_records(output)
        return results

    steps.append(data_step.run(
        "2. write pretraining TFRecords", write_tfrecords,
        lambda r: f"{r['train_instances']:,} training and {r['eval_instances']:,} held-out instances"))
    data = data_step.load()

    # 3. Pretraining.
    pretrain_step = Step(output_dir, "pretrain")
    config = BertConfig(vocab_size=vocab["vocab_size"], hidden_size=FLAGS.hidden_size,
                        num_hidden_layers=FLAGS.num_layers, num_attention_heads=FLAGS.hidden_size // 64,
                        intermediate_size=4 * FLAGS.hidden_size, max_position_embeddings=max(128, FLAGS.max_seq_length))

    def pretrain(step_dir):
        model_dir = os.path.join(step_dir, "model")
        config_file = os.path.join(step_dir, "bert_config.json")
        dataclasses.replace(config, hidden_dropout_prob=FLAGS.pretrain_dropout,
                            attention_probs_dropout_prob=FLAGS.pretrain_dropout).to_json_file(config_file)
        eval_every = max(FLAGS.pretrain_steps // 5, 1)
        _run_tool("experiments.pretrain", os.path.join(step_dir, "pretrain.log"),
                  f"--input_file={data['train_file']}", f"--eval_input_file={data['eval_file']}",
                  f"--bert_config_file={config_file}", f"--vocab_file={vocab['vocab_file']}",
                  f"--output_dir={model_dir}", f"--max_seq_length={FLAGS.max_seq_length}",
                  f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
                  f"--train_batch_size={FLAGS.pretrain_batch_size}", "--eval_batch_size=32",
                  f"--learning_rate={FLAGS.pretrain_learning_rate}", f"--num_train_steps={FLAGS.pretrain_steps}",
                  f"--num_warmup_steps={max(FLAGS.pretrain_steps // 10, 1)}",
                  f"--save_checkpoints_steps={eval_every}", f"--steps_per_loop={min(eval_every, 50)}",
                  f"--eval_every_steps={eval_every}", "--max_eval_steps=20", "--jit_compile")
        evaluation = _read_scalars(os.path.join(model_dir, "summaries", "eval"))
        return {"model_dir": model_dir,
                "eval_mlm_accuracy": evaluation.get("mlm_accuracy", []),
                "eval_nsp_accuracy": evaluation.get("nsp_accuracy", []),
                "parameters": _count_parameters(config)}

    def describe_pretraining(r):
        mlm = " -> ".join(f"{v:.3f}" for _, v in r["eval_mlm_accuracy"])
        nsp = " -> ".join(f"{v:.3f}" for _, v in r["eval_nsp_accuracy"])
        return f"{r['parameters']:,} parameters; held-out MLM accuracy {mlm}; NSP accuracy {nsp}"

    steps.append(pretrain_step.run(f"3. pretrain a {FLAGS.num_layers}-layer, H={FLAGS.hidden_size} BERT",
                                   pretrain, describe_pretraining))
    pretrained = pretrain_step.load()

    # 4. Export.
    export_step = Step(output_dir, "export")

    def export(step_dir):
        export_dir = os.path.join(step_dir, "pretrained")
        # The pretraining config may have dropout off; fine-tuning gets the model's own.
        config_file = os.path.join(step_dir, "bert_config.json")
        config.to_json_file(config_file)
        _run_tool("experiments.export", os.path.join(step_dir, "export.log"),
                  f"--model_dir={pretrained['model_dir']}", f"--bert_config_file={config_file}",
                  f"--export_dir={export_dir}", f"--seq_length={FLAGS.max_seq_length}")
        result = {"pretrained": export_dir}
        if FLAGS.compare_random_init:
            random_dir = os.path.join(step_dir, "random_init_model")
            _write_random_init_model_dir(random_dir, config, vocab["vocab_file"])
            result["random_init"] = os.path.join(step_dir, "random_init")
            _run_tool("experiments.export", os.path.join(step_dir, "export_random_init.log"),
                      f"--model_dir={random_dir}", f"--export_dir={result['random_init']}",
                      f"--seq_length={FLAGS.max_seq_length}")
        return result

    steps.append(export_step.run("4. export encoder and preprocessing SavedModels", export,
                                 lambda r: f"{r['pretrained']}/{{encoder,preprocess}}"))
    exports = export_step.load()

    # 5 and 6. Fine-tuning through hub.KerasLayer, then new sentences.
    classifier_results = {}
    for label in ("pretrained", "random_init"):
        if label not in exports:
            continue
        step = Step(output_dir, f"classifier_{label}")

        def finetune(step_dir, export_dir=exports[label]):
            env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
            _run_tool("experiments.classify_with_hub", os.path.join(step_dir, "classify.log"),
                      f"--export_dir={export_dir}", f"--train_file={train_file}", f"--test_file={test_file}",
                      f"--output_dir={step_dir}", f"--epochs={FLAGS.finetune_epochs}",
                      f"--learning_rate={FLAGS.finetune_learning_rate}",
                      f"--max_train_examples={FLAGS.train_examples}", f"--max_test_examples={FLAGS.test_examples}",
                      env=env)
            with open(os.path.join(step_dir, "results.json"), encoding="utf-8") as f:
                return json.load(f)

        title = ("5. fine-tune a sentiment classifier via hub.KerasLayer" if label == "pretrained"
                 else "5b. the same, from a randomly initialised encoder")
        steps.append(step.run(title, finetune, lambda r: (
            f"held-out accuracy {r['test_accuracy']:.3f} vs majority class {r['majority_baseline_accuracy']:.3f}")))
        classifier_results[label] = step.load()

    print("\n== 6. classify new sentences (pretrained encoder)")
    for prediction in classifier_results["pretrained"]["predictions"]:
        print(f"   {prediction['score']:.3f}  {prediction['label']:5s}  {prediction['text']}")

    curves = os.path.join(output_dir, "curves.png")
    plot_curves(curves, pretrained["model_dir"], classifier_results)

    print("\n== Summary")
    print(f"   {'step':58s} {'time':>7s}  result")
    for step in steps:
        print(f"   {step.name:58s} {step.seconds:6.0f}s  {step.summary}")
    print(f"   steps {sum(step.seconds for step in steps):.0f} s in all; this run {time.time() - start:.0f} s "
          f"(finished steps are reused); curves: {curves}; "
          f"TensorBoard: tensorboard --logdir {output_dir}")


def _split_documents(corpus, train_path, eval_path, every):
    """Writes every `every`-th blank-line-separated document to `eval_path`, the rest to `train_path`."""
    with open(corpus, encoding="utf-8") as f, open(train_path, "w", encoding="utf-8") as train, \
            open(eval_path, "w", encoding="utf-8") as evaluation:
        document, index = [], 0
        for line in list(f) + ["\n"]:
            if line.strip():
                document.append(line)
                continue
            if document:
                target = evaluation if index % every == every - 1 else train
                target.write("".join(document) + "\n")
                document, index = [], index + 1


def _count_records(path):
    import tensorflow as tf
    return sum(1 for _ in tf.data.TFRecordDataset(path))


def _count_parameters(config):
    import keras  # noqa: F401  (builds on the TensorFlow backend in this process)
    from bert_tf.models import BertEncoder
    return BertEncoder(config).count_params()


def _write_random_init_model_dir(model_dir, config, vocab_file):
    import keras
    from bert_tf.checkpoints import write_model_dir
    from bert_tf.models import BertEncoder, BertPretrainer

    keras.utils.set_random_seed(0)
    write_model_dir(model_dir, BertPretrainer(BertEncoder(config)), vocab_file=vocab_file)


def run():
    define_flags()
    app.run(main)


if __name__ == "__main__":
    run()
