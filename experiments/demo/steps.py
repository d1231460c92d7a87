"""The demo's steps. Each takes the job's `DemoConfig` and the outputs of earlier steps, and returns (result dict,
`runner.StepResult`); none reads a flag."""

import dataclasses
import json
import os
import re

from bert_tf import file_io
from experiments.demo import runner
from experiments.demo.config import LABEL_NAMES, DemoConfig
from experiments.demo.report import arrow, read_scalars
from experiments.demo.runner import Step

# Step 8's sentences, none of them from the bundled data.
NEW_SENTENCES = (
    "Absolutely delicious, I will order this again.",
    "The coffee was stale and tasted like cardboard.",
    "My dog loves these treats.",
    "Too sweet and the package arrived damaged.",
)


def _run_tool(config: DemoConfig, module, log_path, *args, env=None):
    return runner.run_tool(module, log_path, *args, env=env, time_limit_seconds=config.tool_time_limit_seconds())


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


def _count_records(path):
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(path))


def _count_parameters(config):
    from bert_tf.models import BertEncoder

    return BertEncoder(config).count_params()


def learn_vocabulary(config: DemoConfig, train_texts):
    def work(step_dir):
        corpus = os.path.join(step_dir, "corpus.txt")
        lines = write_pretraining_corpus(corpus, config.corpus_lines, train_texts)
        vocab_file = os.path.join(step_dir, "vocab.txt")
        _run_tool(
            config,
            "tfrecords_tools.make_vocab",
            os.path.join(step_dir, "make_vocab.log"),
            f"--input_file={corpus}",
            f"--output_file={vocab_file}",
            f"--vocab_size={config.vocab_size}",
            "--do_lower_case",
            f"--max_input_words={config.vocab_input_words}",
        )
        from bert_tf.tokenization.vocab import load_vocab

        return {
            "corpus": corpus,
            "corpus_lines": lines,
            "vocab_file": vocab_file,
            "vocab_size": len(load_vocab(vocab_file)),
        }

    return Step(config.output_dir, "vocab").run(
        "1. learn a WordPiece vocabulary",
        work,
        lambda r: f"{r['vocab_size']:,} pieces from {r['corpus_lines']:,} corpus lines",
    )


def write_tfrecords(config: DemoConfig, vocab):
    def work(step_dir):
        from bert_tf.data.unigram_baseline import next_sentence_baseline, unigram_baseline

        # Every 20th document goes to a held-out file for evaluation.
        train_corpus, eval_corpus = os.path.join(step_dir, "train.txt"), os.path.join(step_dir, "eval.txt")
        split_documents(vocab["corpus"], train_corpus, eval_corpus, every=20)
        result = {}
        for split, corpus, dupe in (("train", train_corpus, config.dupe_factor), ("eval", eval_corpus, 1)):
            output = os.path.join(step_dir, f"{split}.tfrecord")
            _run_tool(
                config,
                "tfrecords_tools.create_pretraining_data",
                os.path.join(step_dir, f"{split}.log"),
                f"--input_file={corpus}",
                f"--output_file={output}",
                f"--vocab_file={vocab['vocab_file']}",
                "--do_lower_case",
                f"--max_seq_length={config.max_seq_length}",
                f"--max_predictions_per_seq={config.max_predictions_per_seq}",
                f"--dupe_factor={dupe}",
            )
            result[f"{split}_file"] = output
            result[f"{split}_instances"] = _count_records(output)
        baseline = unigram_baseline(
            result["train_file"],
            result["eval_file"],
            config.max_seq_length,
            config.max_predictions_per_seq,
            vocab["vocab_size"],
        )
        result["mlm_unigram_accuracy"], result["mlm_unigram_loss"] = baseline.accuracy, baseline.loss
        nsp = next_sentence_baseline(result["eval_file"], config.max_seq_length, config.max_predictions_per_seq)
        result["nsp_majority_accuracy"], result["nsp_prior_loss"] = nsp.accuracy, nsp.loss
        return result

    return Step(config.output_dir, "tfrecords").run(
        "2. write pretraining TFRecords",
        work,
        lambda r: (
            f"{r['train_instances']:,} training and {r['eval_instances']:,} held-out instances; "
            f"masked-token unigram baseline: accuracy {r['mlm_unigram_accuracy']:.3f}, "
            f"loss {r['mlm_unigram_loss']:.2f}; held-out NSP majority label {r['nsp_majority_accuracy']:.3f}"
        ),
    )


def pretrain_from_scratch(config: DemoConfig, model_config, vocab, data):
    """Pretrains `model_config` (a `BertConfig`) on step 2's records."""

    def work(step_dir):
        model_dir = os.path.join(step_dir, "model")
        config_file = os.path.join(step_dir, "bert_config.json")
        dropout = config.pretrain_dropout
        dataclasses.replace(
            model_config, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout
        ).to_json_file(config_file)
        eval_every = max(config.pretrain_steps // 5, 1)
        # --max_eval_steps=0: every evaluation reads the whole held-out file, as the unigram baseline does.
        _run_tool(
            config,
            "experiments.pretrain",
            os.path.join(step_dir, "pretrain.log"),
            f"--input_file={data['train_file']}",
            f"--eval_input_file={data['eval_file']}",
            f"--bert_config_file={config_file}",
            f"--vocab_file={vocab['vocab_file']}",
            f"--output_dir={model_dir}",
            f"--max_seq_length={config.max_seq_length}",
            f"--max_predictions_per_seq={config.max_predictions_per_seq}",
            f"--train_batch_size={config.pretrain_batch_size}",
            "--eval_batch_size=64",
            f"--learning_rate={config.pretrain_learning_rate}",
            f"--num_train_steps={config.pretrain_steps}",
            f"--num_warmup_steps={max(config.pretrain_steps // 10, 1)}",
            f"--distribution_strategy={config.distribution_strategy}",
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
            "parameters": _count_parameters(model_config),
            **{
                f"eval_{tag}": evaluation.get(tag, [])
                for tag in ("mlm_accuracy", "mlm_loss", "nsp_accuracy", "nsp_loss")
            },
        }

    def describe(r):
        return (
            f"{r['parameters']:,} parameters; held-out MLM accuracy {arrow(r['eval_mlm_accuracy'])} "
            f"(unigram {data['mlm_unigram_accuracy']:.3f}), MLM loss {arrow(r['eval_mlm_loss'], 2)} "
            f"(unigram {data['mlm_unigram_loss']:.2f}); NSP accuracy {arrow(r['eval_nsp_accuracy'])} "
            f"(chance 0.5, majority label {data['nsp_majority_accuracy']:.3f}), NSP loss "
            f"{arrow(r['eval_nsp_loss'])} (label frequencies {data['nsp_prior_loss']:.3f})"
        )

    return Step(config.output_dir, "pretrain").run(
        f"3. pretrain a {config.num_layers}-layer, H={config.hidden_size} BERT from scratch", work, describe
    )


def convert_real_weights(config: DemoConfig):
    def work(step_dir):
        from bert_tf.checkpoints import published

        source = config.real_weights_dir or published.minilm_l6_v2_dir()
        model_dir = os.path.join(step_dir, "model")
        _run_tool(
            config,
            "experiments.convert",
            os.path.join(step_dir, "convert.log"),
            "--from=hf",
            f"--input={source}",
            f"--output_dir={model_dir}",
        )
        with open(os.path.join(model_dir, "bert_config.json"), encoding="utf-8") as f:
            converted = json.load(f)
        return {
            "source": source,
            "model_dir": model_dir,
            "num_layers": converted["num_hidden_layers"],
            "hidden_size": converted["hidden_size"],
            "vocab_size": converted["vocab_size"],
        }

    return Step(config.output_dir, "real_weights").run(
        "4. convert real published weights (HuggingFace -> bert_tf)",
        work,
        lambda r: (
            f"{os.path.basename(os.path.dirname(r['source'].rstrip('/'))) or r['source']}: "
            f"{r['num_layers']} layers, H={r['hidden_size']}, vocabulary {r['vocab_size']:,}"
        ),
    )


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


def _review_files(config: DemoConfig, step_dir, train_file, test_file):
    """The reviews a step reads: the bundled files, or their first --train_examples / --test_examples rows."""
    files = []
    for path, count in ((train_file, config.train_examples), (test_file, config.test_examples)):
        if count:
            path = _head_lines(path, os.path.join(step_dir, os.path.basename(path)), count, header=True)
        files.append(path)
    return files


def read_labels(path, limit=0):
    """The 0/1 labels of a bundled reviews TSV (`text<TAB>label` after a header), its first `limit` rows (0: all)."""
    with open(path, encoding="utf-8") as f:
        rows = f.read().splitlines()[1:]
    return [int(row.rsplit("\t", 1)[1]) for row in (rows[:limit] if limit else rows)]


def majority_baseline(config: DemoConfig, train_file, test_file):
    """The training reviews' most frequent label scored on the held-out ones: what a classifier must beat."""
    train, test = read_labels(train_file, config.train_examples), read_labels(test_file, config.test_examples)
    majority = int(2 * sum(train) >= len(train))
    return {
        "train_examples": len(train),
        "test_examples": len(test),
        "majority_label": LABEL_NAMES[majority],
        "majority_accuracy": test.count(majority) / len(test),
    }


def fine_tune_real_weights(config: DemoConfig, real, train_file, test_file):
    """Fine-tunes the converted real encoder with `experiments.finetune` on packed rows (`--packing`).

    Packed rows fill each row of `real_weights_seq_length` tokens with whole reviews, each computed as if alone:
    almost no padding, where one review a row pads a short review to its batch's longest. The flag is passed
    either way, so the step does not depend on the job's default. So is `--long_text=truncate`: the job's default
    reads a review longer than the window in windows (a few reviews are), which would cost the demo time and
    change the figures it reports and its README quotes; `benchmarks/long_documents.py` measures windows.
    """

    def work(step_dir):
        train, test = _review_files(config, step_dir, train_file, test_file)
        model_dir = os.path.join(step_dir, "model")
        _run_tool(
            config,
            "experiments.finetune",
            os.path.join(step_dir, "finetune.log"),
            "--task=classification",
            f"--model_dir={real['model_dir']}",
            f"--output_dir={model_dir}",
            f"--train_file={train}",
            f"--eval_file={test}",
            "--text_a_column=text",
            "--label_column=label",
            "--do_train",
            "--do_eval",
            f"--max_seq_length={config.real_weights_seq_length}",
            f"--num_train_epochs={config.real_weights_epochs}",
            f"--learning_rate={config.real_weights_learning_rate}",
            "--warmup_proportion=0.1",
            "--train_batch_size=32",
            "--eval_batch_size=32",
            "--packing" if config.real_weights_packing else "--nopacking",
            "--long_text=truncate",
            "--seed=1",
        )
        with open(os.path.join(model_dir, "eval_results.json"), encoding="utf-8") as f:
            evaluation = json.load(f)
        return {
            "model_dir": model_dir,
            "packing": config.real_weights_packing,
            "test_accuracy": evaluation["accuracy"],
            "test_examples": len(read_labels(test)),
            "train_examples": len(read_labels(train)),
        }

    rows = "packed rows" if config.real_weights_packing else "one review a row"
    return Step(config.output_dir, "classifier_real_weights").run(
        f"5. fine-tune the real encoder (experiments.finetune, {rows})",
        work,
        lambda r: f"held-out accuracy {r['test_accuracy']:.3f} on {r['test_examples']:,} reviews",
    )


def export_models(config: DemoConfig, model_config, vocab, pretrained, real_classifier):
    """Exports the fine-tuned real classifier (encoder, preprocessing and a raw-text classifier) and the small
    encoders, pretrained here and randomly initialised, for `hub.KerasLayer`."""

    def work(step_dir):
        exports = {}

        def export(label, model_dir, seq_length, *extra):
            exports[label] = os.path.join(step_dir, label)
            _run_tool(
                config,
                "experiments.export",
                os.path.join(step_dir, f"export_{label}.log"),
                *([f"--model_dir={model_dir}"] if model_dir else []),
                f"--export_dir={exports[label]}",
                f"--max_seq_length={seq_length}",
                *extra,
            )

        export("real_weights", real_classifier["model_dir"], config.real_weights_seq_length)
        # Pretraining may run without dropout; fine-tuning gets the model's own config (BERT's 0.1).
        config_file = os.path.join(step_dir, "bert_config.json")
        model_config.to_json_file(config_file)
        if config.finetune_from_scratch:
            export("from_scratch", pretrained["model_dir"], config.max_seq_length, f"--bert_config_file={config_file}")
        if config.compare_random_init:
            # The baseline: the same config and vocabulary, random weights (`--init_from=random`, as in finetune).
            export(
                "random_init",
                None,
                config.max_seq_length,
                f"--bert_config_file={config_file}",
                f"--vocab_file={vocab['vocab_file']}",
                "--init_from=random",
                "--seed=0",
            )
        return exports

    def describe(r):
        labels = [label for label in r if label != "seconds"]
        return f"{', '.join(labels)} in {os.path.dirname(r['real_weights'])}"

    return Step(config.output_dir, "export").run(
        "6. export SavedModels: the fine-tuned real classifier (raw text in) and the small encoders",
        work,
        describe,
    )


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How one small encoder is fine-tuned by `experiments.classify_with_hub`."""

    label: str
    title: str
    epochs: int
    learning_rate: float


def fine_tune_with_hub(config: DemoConfig, exports, recipe, train_file, test_file):
    """Fine-tunes an exported small encoder through `hub.KerasLayer` (the TF Hub notebook's program)."""

    def work(step_dir):
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
        _run_tool(
            config,
            "experiments.classify_with_hub",
            os.path.join(step_dir, "classify.log"),
            f"--export_dir={exports[recipe.label]}",
            f"--train_file={train_file}",
            f"--eval_file={test_file}",
            f"--output_dir={os.path.join(step_dir, 'classifier')}",
            f"--num_train_epochs={recipe.epochs}",
            f"--learning_rate={recipe.learning_rate}",
            f"--max_train_examples={config.train_examples}",
            f"--max_eval_examples={config.test_examples}",
            f"--label_names={','.join(LABEL_NAMES)}",
            env=env,
        )
        with open(os.path.join(step_dir, "classifier", "results.json"), encoding="utf-8") as f:
            return json.load(f)

    return Step(config.output_dir, f"classifier_{recipe.label}").run(
        recipe.title,
        work,
        lambda r: (
            f"held-out accuracy {r['test_accuracy']:.3f} vs the training majority class scored on it "
            f"{r['train_majority_class_test_accuracy']:.3f}"
        ),
    )


def serve_new_sentences(config: DemoConfig, exports, sentences=NEW_SENTENCES):
    """Classifies `sentences` with the exported real classifier, loaded as a server loads it
    (`experiments.demo.serve`: `tf.saved_model.load`, its `serving_default` signature on raw strings)."""

    def work(step_dir):
        input_file, output_file = os.path.join(step_dir, "sentences.txt"), os.path.join(step_dir, "predictions.json")
        file_io.write_text(input_file, "".join(f"{text}\n" for text in sentences))
        classifier_dir = os.path.join(exports["real_weights"], "classifier")
        _run_tool(
            config,
            "experiments.demo.serve",
            os.path.join(step_dir, "serve.log"),
            f"--classifier_dir={classifier_dir}",
            f"--input_file={input_file}",
            f"--output_file={output_file}",
        )
        with open(output_file, encoding="utf-8") as f:
            served = json.load(f)
        # The fine-tuned directory names the labels as written in the data: "0" and "1".
        predictions = [
            {"text": p["text"], "score": p["scores"]["1"], "label": LABEL_NAMES[int(p["label"])]} for p in served
        ]
        return {"classifier_dir": classifier_dir, "predictions": predictions}

    def describe(r):
        return "; ".join(f"{p['label']} {p['score']:.3f}" for p in r["predictions"])

    return Step(config.output_dir, "serve").run(
        "7. classify new sentences with the exported classifier (raw text in)", work, describe
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


def _probe_data_flags(config: DemoConfig, step_dir):
    """The probe's data flags: the bundled files, or their first --probe_sentences / --probe_reviews /
    --*_examples records."""
    from bert_tf.datasets import bundled

    data_flags = []
    train_reviews = min((n for n in (config.train_examples, config.probe_reviews) if n), default=0)
    for split, reviews in (("train", train_reviews), ("test", config.test_examples)):
        if config.probe_sentences:
            path = _head_lines(
                bundled.pos_path(split),
                os.path.join(step_dir, f"pos_{split}.conll"),
                config.probe_sentences,
                blank_line_records=True,
            )
            data_flags.append(f"--token_{split}_file={path}")
        if reviews:
            path = _head_lines(
                bundled.sentiment_path(split), os.path.join(step_dir, f"reviews_{split}.tsv"), reviews, header=True
            )
            data_flags.append(f"--sentence_{split}_file={path}")
    return data_flags


def probe_layers(config: DemoConfig, real, pretrained):
    """The probes tour: which layer's frozen features suit which task, against random twins."""

    def work(step_dir):
        results = {}
        data_flags = _probe_data_flags(config, step_dir)
        # The real encoder on both tasks; the small one on the token task, where pretraining shows if anywhere.
        for label, model_dir, extra in (
            ("real_weights", real["model_dir"], []),
            ("from_scratch", pretrained["model_dir"], ["--tasks=token"]),
        ):
            report_dir = os.path.join(step_dir, label)
            with open(os.path.join(model_dir, "bert_config.json"), encoding="utf-8") as f:
                seq_length = min(128, json.load(f)["max_position_embeddings"])
            _run_tool(
                config,
                "experiments.probe_layers",
                os.path.join(step_dir, f"probe_{label}.log"),
                f"--model_dir={model_dir}",
                f"--output_dir={report_dir}",
                f"--max_seq_length={seq_length}",
                "--nofinetune",  # step 5 fine-tunes the real encoder on the reviews already
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

    return Step(config.output_dir, "probe_layers").run(PROBES_TITLE, work, describe)


PROBES_TITLE = "tour: probe every layer's frozen features"


def distillation_title(config: DemoConfig):
    return f"tour: distil the real-weights classifier into a {config.distill_student_layers}-layer student"


def distill_classifier(config: DemoConfig, real_classifier, train_file, test_file):
    """The distillation tour: the real-weights classifier distilled into a shallower student, both exported and
    timed interleaved.

    `experiments.distill_frontier` does the work: it distils the student from the teacher's layers (on packed
    rows, distillation's default), measures both on the held-out reviews, exports both encoders and times the
    SavedModels in one process.
    """

    def work(step_dir):
        train, test = _review_files(config, step_dir, train_file, test_file)
        report_dir = os.path.join(step_dir, "frontier")
        _run_tool(
            config,
            "experiments.distill_frontier",
            os.path.join(step_dir, "distill_frontier.log"),
            f"--teacher_dir={real_classifier['model_dir']}",
            f"--output_dir={report_dir}",
            f"--train_file={train}",
            f"--eval_file={test}",
            "--text_a_column=text",
            "--label_column=label",
            f"--student_layers={config.distill_student_layers}",
            "--forms=float32",
            f"--max_seq_length={config.distill_seq_length}",
            f"--num_train_epochs={config.distill_epochs}",
            f"--learning_rate={config.distill_learning_rate}",
            "--warmup_proportion=0.1",
            "--eval_batch_size=64",
            f"--speed_examples={config.distill_speed_examples}",
            "--speed_rounds=3",
        )
        with open(os.path.join(report_dir, "report.json"), encoding="utf-8") as f:
            report = json.load(f)
        rows = {row["model"]: row for row in report["rows"]}
        teacher, student = rows["teacher"], rows[f"layers_{config.distill_student_layers}"]
        return {
            "report_dir": report_dir,
            "max_seq_length": report["max_seq_length"],
            "speed_examples": report["speed"]["examples"],
            "teacher_layers": teacher["num_layers"],
            "student_layers": student["num_layers"],
            "teacher_accuracy": teacher["metric"],
            "student_accuracy": student["metric"],
            "teacher_sequences_per_second": teacher["sequences_per_second"],
            "student_sequences_per_second": student["sequences_per_second"],
            "speedup": student["speedup"],
        }

    return Step(config.output_dir, "distill").run(
        distillation_title(config),
        work,
        lambda r: (
            f"held-out accuracy at length {r['max_seq_length']}: teacher ({r['teacher_layers']} layers) "
            f"{r['teacher_accuracy']:.3f}, student ({r['student_layers']} layers) {r['student_accuracy']:.3f}; "
            f"exported SavedModels {r['teacher_sequences_per_second']:.0f} and {r['student_sequences_per_second']:.0f} "
            f"sequences/s ({r['speedup']:.2f}x)"
        ),
    )
