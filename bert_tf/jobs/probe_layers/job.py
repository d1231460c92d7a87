"""`run_probe_layers`: the stages of the job, in order (the rows and controls: `bert_tf.jobs.probe_layers`)."""

from __future__ import annotations

import json
import os
import time

import numpy as np
from absl import logging

from bert_tf.data.finetuning_readers import count_unseen_labels, warn_unseen_labels
from bert_tf.errors import DataError, JobArgumentError
from bert_tf.jobs.probe_layers.child_processes import MixJob, compute_features, fine_tuning_environment, scalar_mixes
from bert_tf.jobs.probe_layers.config import PARTIAL_REPORT_NAME, REPORT_KEYS, ProbeLayersConfig
from bert_tf.jobs.probe_layers.feature_keys import cache_dir, feature_keys
from bert_tf.jobs.probe_layers.fine_tuned_row import fine_tuned_accuracy, finetune_steps
from bert_tf.jobs.probe_layers.report_sections import data_summary, model_section, recipe
from bert_tf.probing import data as data_lib


def run_probe_layers(output_dir: str, config: ProbeLayersConfig) -> dict:
    """Probes every layer of `config.model`; writes the report files and returns the report (as in report.json).

    `output_dir` gets report.md, report.json and layers.png (and the feature cache, unless `config.cache_dir`
    names another); it must not exist or be empty. Every input is read and checked before any forward pass,
    and nothing is written before that.

    Raises:
      DataError: a bad data file (naming the file and line).
      JobArgumentError: a bad option or model (naming the flag), or an `output_dir` that is not empty.
      BadInputError: `BERT_TF_JEMALLOC` names no file (`bert_tf.memory_allocator`).
    """
    start = time.monotonic()
    output_dir = _check_output_dir(output_dir)
    model = config.model.resolve(config.max_seq_length)
    finetune_environment = fine_tuning_environment() if config.finetune else {}
    files = config.files()
    data = _read_data(config.tasks, files)

    from bert_tf.probing import report as report_lib

    parts = _Parts(output_dir, config)
    features, feature_seconds = _all_features(config, model, data, output_dir)
    parts.done("features", {"seconds": round(feature_seconds, 1)})
    fine_tuned, finetune_seconds = {}, None
    if config.finetune:
        fine_tuned, finetune_seconds = _fine_tune(config, files, data, output_dir, parts, finetune_environment)
    probe_start = time.monotonic()
    report = {
        "model": {
            "model_dir": config.model.model_dir,
            "checkpoint": model.checkpoint,
            "num_hidden_layers": model.config.num_hidden_layers,
            "hidden_size": model.config.hidden_size,
        },
        "recipe": recipe(config, {task: data_lib.num_items(task, data[task][0]) for task in config.tasks}),
        "data": {},
        "seconds": {"features": round(feature_seconds, 1)},
    }
    for task in config.tasks:
        train, test = data[task]
        report["data"][task] = data_summary(task, train, test, files[task])
    report.update(_probe_all(config, data, features, parts))
    report["seconds"]["probes"] = round(time.monotonic() - probe_start, 1)
    if config.finetune:
        for task in config.tasks:
            for key in REPORT_KEYS[task]:
                report[key]["rows"]["fine_tuned"] = fine_tuned[task]
        report["seconds"]["finetune"] = finetune_seconds
    report["seconds"]["total"] = round(time.monotonic() - start, 1)
    report_lib.write_report(output_dir, report)
    parts.close()
    return report


def _check_output_dir(output_dir: str) -> str:
    """`output_dir` made absolute; refused unless given and new or empty."""
    if not output_dir:
        raise JobArgumentError("--output_dir is required.")
    output_dir = os.path.abspath(output_dir)
    if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or os.listdir(output_dir)):
        raise JobArgumentError(f"--output_dir={output_dir} exists and is not empty.")
    return output_dir


def _read_data(tasks, files: dict) -> dict:
    """{task: (training items, test items)}, each training set with two labels at least."""
    data = {}
    for task in tasks:
        prefix, train_path, test_path = files[task]
        read = data_lib.read_token_file if task == data_lib.TOKEN else data_lib.read_sentence_file
        data[task] = (read(train_path, f"{prefix}_train_file"), read(test_path, f"{prefix}_test_file"))
        labels = data_lib.task_labels(task, data[task][0])
        if len(set(labels)) < 2:
            raise DataError(f"--{prefix}_train_file: {train_path}: needs at least two distinct labels.")
        # No probe can predict a label it never saw: such test items stay, as errors in every row.
        warn_unseen_labels(
            count_unseen_labels(data_lib.task_labels(task, data[task][1]), set(labels)),
            "words" if task == data_lib.TOKEN else "texts",
            split=f"test ({test_path})",
        )
    return data


def _fine_tune(config: ProbeLayersConfig, files: dict, data: dict, output_dir: str, parts, environment: dict):
    """({task: the fine-tuned row}, seconds): each task fine-tuned in a child process, before the probes (the
    parent holds no features yet, and the fine-tuning's memory goes with the child)."""
    from bert_tf.child_process import run_in_child_process

    start = time.monotonic()
    fine_tuned = {}
    for task in config.tasks:
        fine_tuned[task] = run_in_child_process(
            fine_tuned_accuracy,
            task,
            files[task],
            finetune_steps(config, data_lib.num_items(task, data[task][0])),
            config,
            output_dir,
            description=f"fine-tuning ({task})",
            environment=environment,
        )
        parts.done(f"fine_tuned {task}", fine_tuned[task])
    return fine_tuned, round(time.monotonic() - start, 1)


class _Parts:
    """The job's parts as they finish: a progress line with the overall ETA, and `report.partial.json`.

    The parts: the forward passes, each task's fine-tuning, each linear probe of a (section, model) (its
    layers count as fractions of it, so a line comes at least every `INTERVAL_SECONDS` with the overall ETA),
    and the scalar mixes. The partial report holds each finished part's results and is removed when the
    complete report is written, so a run stopped after 11 minutes keeps what those minutes computed.
    """

    def __init__(self, output_dir: str, config: ProbeLayersConfig):
        from bert_tf import progress

        models = 2 if config.random_control else 1
        sections = sum(len(REPORT_KEYS[task]) for task in config.tasks) * models
        total = 1 + (len(config.tasks) if config.finetune else 0) + sections + 1
        self.path = os.path.join(output_dir, PARTIAL_REPORT_NAME)
        self.partial = {"complete": False, "parts": {}}
        self.tracker = progress.Progress("probe_layers", total=total, unit="parts")

    def done(self, name: str, result) -> None:
        """Part `name` finished with `result` (JSON-able): logs the overall progress, rewrites the partial report."""
        from bert_tf import file_io

        self.partial["parts"][name] = result
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        file_io.write_text(self.path, json.dumps(self.partial, indent=2, sort_keys=True) + "\n")
        self.tracker.update(len(self.partial["parts"]), force=True)

    def advance(self, fraction: float) -> None:
        """A fraction of the current part is done (a line only if the interval passed)."""
        self.tracker.advance(fraction)

    def close(self) -> None:
        if os.path.exists(self.path):
            os.remove(self.path)


def _all_features(config, model, data, output_dir):
    """{(model name, task, split): the cached features' file}, and the seconds spent.

    The files hold float16 [items, L + 1, hidden] arrays: `token`, or `cls` and `mean`. Missing ones are computed
    in a child process (`bert_tf.child_process`), so the memory that TensorFlow keeps after the forward passes is
    not added to the probes'; the probes load one model's arrays at a time.
    """
    from bert_tf.child_process import run_in_child_process
    from bert_tf.probing.layer_features import FeatureCache

    start = time.monotonic()
    cache = FeatureCache(cache_dir(config, output_dir))
    keys = feature_keys(config, model, data)
    paths = {item: cache.path(key) for item, key in keys.items()}
    if not all(os.path.exists(path) for path in paths.values()):
        run_in_child_process(compute_features, config, model, data, output_dir, description="the forward passes")
    return paths, time.monotonic() - start


def _probe_all(config, data, features, parts) -> dict:
    """The report sections of every task: {"token": ..., "sentence_mean": ..., "sentence_cls": ...}.

    The linear probes run here (scikit-learn, no TensorFlow); the scalar mixes, which need Keras, all run
    afterwards in one child process, so this process never holds TensorFlow and the features at once.
    """
    from bert_tf.child_process import run_in_child_process

    sections, mix_jobs = {}, []
    for task in config.tasks:
        train, test = data[task]
        for key, (section, jobs) in _probe_task(task, train, test, features, config, parts).items():
            sections[key] = section
            mix_jobs.extend(jobs)
    from bert_tf.probing.probes import release_memory

    release_memory()  # the linear probes' freed arrays go back to the system before the child needs memory
    mixes = run_in_child_process(scalar_mixes, mix_jobs, config.seed, description="the scalar mixes")
    parts.done("scalar_mixes", {f"{model_name} {key}": mix.test_accuracy for (key, model_name), mix in mixes.items()})
    for (key, model_name), mix in mixes.items():
        rows = sections[key][model_name]
        rows["scalar_mix"] = mix
        logging.info("%s %s scalar_mix: %.4f", model_name, key, mix.test_accuracy)
    for key, section in sections.items():
        pretrained = section.pop("pretrained")
        random_init = section.pop("random_init", None)
        section.update(model_section(pretrained))
        if random_init is not None:
            section["random_init"] = model_section(random_init)
    return sections


def _probe_task(task, train, test, features, config, parts) -> dict:
    """{report key: (section with each model's linear rows, [the scalar-mix jobs of its models])}."""
    from bert_tf.probing import probes
    from bert_tf.probing.layer_features import FeatureCache

    label_list = sorted(set(data_lib.task_labels(task, train)))
    train_y = data_lib.label_ids(data_lib.task_labels(task, train), label_list)
    test_y = data_lib.label_ids(data_lib.task_labels(task, test), label_list)
    if task == data_lib.TOKEN:
        fit_sentences, dev_sentences = data_lib.dev_split(len(train.sentences), config.dev_fraction, config.seed)
        sentence_of_word = np.repeat(np.arange(len(train.sentences)), [len(s) for s in train.sentences])
        is_dev = np.isin(sentence_of_word, dev_sentences)
        fit, dev = np.nonzero(~is_dev)[0], np.nonzero(is_dev)[0]
        train_words = [w for s in train.sentences for w in s]
        train_tags = data_lib.task_labels(task, train)
        test_words = [w for s in test.sentences for w in s]
        baseline = probes.word_baseline(
            [train_words[i] for i in fit], [train_tags[i] for i in fit], test_words, data_lib.task_labels(task, test)
        )
        baseline_name = "most frequent tag per word"
        representations = {"token": "token"}
    else:
        fit, dev = data_lib.dev_split(len(train.texts), config.dev_fraction, config.seed)
        baseline = probes.majority_baseline(train_y[fit], test_y)
        baseline_name = "majority label"
        representations = {"sentence_mean": "mean", "sentence_cls": "cls"}
    result = {}
    for key, representation in representations.items():
        section = {"baseline": {"name": baseline_name, "accuracy": baseline}}
        jobs = []
        for model_name in ("pretrained", "random_init"):
            if (model_name, task, "train") not in features:
                continue
            logging.info("Probing %s %s", model_name, key)
            paths = features[(model_name, task, "train")], features[(model_name, task, "test")]
            train_x, test_x = (FeatureCache.load(path, representation) for path in paths)
            section[model_name] = _linear_rows(train_x, train_y, test_x, test_y, fit, dev, config.seed, parts)
            parts.done(f"{model_name} {key}", {name: r.test_accuracy for name, r in section[model_name].items()})
            del train_x, test_x
            jobs.append(MixJob(key, model_name, *paths, representation, train_y, test_y, fit, dev, len(label_list)))
        result[key] = (section, jobs)
    return result


def _linear_rows(train_x, train_y, test_x, test_y, fit, dev, seed, parts=None) -> dict:
    """Row name -> ProbeResult, for every row of the module docstring but the scalar mix and the fine-tuned."""
    from bert_tf.probing import probes

    def split(train_part, test_part):
        return probes.Split(train_part, train_y, fit, dev, test_part, test_y)

    num_layers = train_x.shape[1] - 1
    results = {}
    for layer in range(num_layers + 1):
        started = time.monotonic()
        results[f"layer_{layer}"] = probes.linear_probe(split(train_x[:, layer], test_x[:, layer]), seed=seed)
        logging.info(
            "  layer_%d: %.4f (%.1f s)", layer, results[f"layer_{layer}"].test_accuracy, time.monotonic() - started
        )
        if parts is not None:
            parts.advance(1 / (num_layers + 4))  # the layers, then the two combinations; `done` counts the last share
    results["second_to_last"] = results[f"layer_{max(num_layers - 1, 0)}"]
    results["last"] = results[f"layer_{num_layers}"]
    last_four = slice(max(1, num_layers - 3), num_layers + 1)
    mean_four = lambda x: x[:, last_four].mean(axis=1, dtype=np.float32)  # noqa: E731 (no float32 copy of x)
    results["mean_last_four"] = probes.linear_probe(split(mean_four(train_x), mean_four(test_x)), seed=seed)
    flat = lambda x: x[:, last_four].reshape(len(x), -1)  # noqa: E731
    results["concat_last_four"] = probes.linear_probe(split(flat(train_x), flat(test_x)), seed=seed)
    return results
