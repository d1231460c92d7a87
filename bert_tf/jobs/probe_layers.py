"""`probe_layers`: which layer, and which combination of layers, gives a model's best frozen features.

For a model directory and two tasks (token tagging and sentence classification, from the user's files or the
bundled Brown part-of-speech tags and fine-food reviews), it computes every layer's features once
(`bert_tf.probing.layer_features`), fits the fixed linear probe of `bert_tf.probing.probes` to each row of the
BERT paper's Table 7 and the probing literature, and writes `report.md`, `report.json` and `layers.png`:

* rows: `layer_0` (the embeddings) to `layer_<L>` separately, `second_to_last`, `last`, `mean_last_four`,
  `concat_last_four` (the last min(4, L) Transformer layers), `scalar_mix` (a learned softmax mix of all
  layers), and as a reference `fine_tuned` (the whole encoder fine-tuned with `bert_tf.jobs.finetune.run_finetuning`
  on the same training file, scored on the test file);
* controls: the same architecture randomly initialised (same probes, same rows), and a non-contextual
  baseline (each word's most frequent training tag, the most frequent tag for unseen words; the majority
  label for sentences).

Sentences are represented by `[CLS]` (`sentence_cls`) and by the mean over real tokens (`sentence_mean`);
words by their first WordPiece or the mean of their pieces (`word_piece`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import numpy as np
from absl import logging

from bert_tf.checkpoints.model_source import ModelSource
from bert_tf.data.finetuning_readers import count_unseen_labels, warn_unseen_labels
from bert_tf.data.length_buckets import DEFAULT_BUCKET_WIDTH
from bert_tf.errors import DataError, JobArgumentError, check_int
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.probing import data as data_lib
from bert_tf.probing.layer_features import WORD_PIECE_MODES

TASKS = (data_lib.TOKEN, data_lib.SENTENCE)
REPORT_KEYS = {data_lib.TOKEN: ("token",), data_lib.SENTENCE: ("sentence_mean", "sentence_cls")}


@dataclasses.dataclass(frozen=True)
class ProbeLayersConfig:
    """What to probe and how (the flags of the same names).

    Attributes:
      model: the model's files.
      token_train_file, token_test_file: `word<TAB>tag` files; None: the bundled Brown tags.
      sentence_train_file, sentence_test_file: `text<TAB>label` TSVs; None: the bundled reviews.
      tasks: a subset of `TASKS`.
      max_seq_length, batch_size, bucket_width: the forward passes (bucket_width 0: pad to max_seq_length).
      word_piece: "first" or "mean": a word's representation.
      random_control: also probe the randomly initialised twin.
      finetune: add the fine-tuned reference row; finetune_epochs, finetune_learning_rate,
        finetune_batch_size its recipe (BERT's schedule: 10% warm-up, then linear decay);
        finetune_min_steps: at least this many steps however small the training file (more epochs), so that
        the reference row is a fine-tuned model rather than one barely past its warm-up;
        finetune_microbatches: each batch runs as this many pieces with summed gradients (the loop's
        `num_microbatches`), so activation memory shrinks and the default run keeps its memory budget.
      dev_fraction: the training file's share held out to choose each probe's strength.
      seed: the development split, the random twin's weights, the probes and the fine-tuning.
      cache_dir: the features' cache; None: `<output_dir>/feature_cache`.
    """

    model: ModelSource
    token_train_file: str | None = None
    token_test_file: str | None = None
    sentence_train_file: str | None = None
    sentence_test_file: str | None = None
    tasks: tuple = TASKS
    max_seq_length: int = 128
    batch_size: int = 32
    bucket_width: int = DEFAULT_BUCKET_WIDTH
    word_piece: str = "first"
    random_control: bool = True
    finetune: bool = True
    finetune_epochs: float = 1.0
    finetune_learning_rate: float = 1e-4
    finetune_batch_size: int = 32
    finetune_min_steps: int = 300
    finetune_microbatches: int = 8
    dev_fraction: float = 0.1
    seed: int = DEFAULT_SEED
    cache_dir: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "tasks", tuple(self.tasks))
        unknown = [task for task in self.tasks if task not in TASKS]
        if unknown or not self.tasks:
            raise JobArgumentError(f"--tasks must name some of {', '.join(TASKS)}, got {list(self.tasks)}.")
        check_int("max_seq_length", self.max_seq_length, minimum=3)  # [CLS], one piece, [SEP]
        check_int("batch_size", self.batch_size)
        check_int("finetune_batch_size", self.finetune_batch_size)
        check_int("finetune_microbatches", self.finetune_microbatches)
        check_int("finetune_min_steps", self.finetune_min_steps, minimum=0)
        if self.finetune_batch_size % self.finetune_microbatches:
            raise JobArgumentError(
                f"--finetune_microbatches={self.finetune_microbatches} must divide "
                f"--finetune_batch_size={self.finetune_batch_size}."
            )
        check_int("bucket_width", self.bucket_width, minimum=0)
        if self.word_piece not in WORD_PIECE_MODES:
            raise JobArgumentError(
                f"--word_piece must be one of {', '.join(WORD_PIECE_MODES)}, got {self.word_piece!r}."
            )
        if not 0.0 < self.dev_fraction < 0.5:
            raise JobArgumentError(f"--dev_fraction must be in (0, 0.5), got {self.dev_fraction}.")
        if not self.finetune_epochs > 0 or not self.finetune_learning_rate > 0:
            raise JobArgumentError("--finetune_epochs and --finetune_learning_rate must be positive.")

    def files(self) -> dict:
        """task -> (flag prefix, train path, test path), the bundled files where none was given."""
        from bert_tf.datasets import bundled

        return {
            data_lib.TOKEN: (
                "token",
                self.token_train_file or str(bundled.pos_path("train")),
                self.token_test_file or str(bundled.pos_path("test")),
            ),
            data_lib.SENTENCE: (
                "sentence",
                self.sentence_train_file or str(bundled.sentiment_path("train")),
                self.sentence_test_file or str(bundled.sentiment_path("test")),
            ),
        }


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
    if not output_dir:
        raise JobArgumentError("--output_dir is required.")
    output_dir = os.path.abspath(output_dir)
    if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or os.listdir(output_dir)):
        raise JobArgumentError(f"--output_dir={output_dir} exists and is not empty.")
    model = config.model.resolve(config.max_seq_length)
    finetune_environment = _fine_tuning_environment() if config.finetune else {}
    files = config.files()
    data = {}
    for task in config.tasks:
        prefix, train_path, test_path = files[task]
        read = data_lib.read_token_file if task == data_lib.TOKEN else data_lib.read_sentence_file
        data[task] = (read(train_path, f"{prefix}_train_file"), read(test_path, f"{prefix}_test_file"))
        labels = _labels(task, data[task][0])
        if len(set(labels)) < 2:
            raise DataError(f"--{prefix}_train_file: {train_path}: needs at least two distinct labels.")
        # No probe can predict a label it never saw: such test items stay, as errors in every row.
        warn_unseen_labels(
            count_unseen_labels(_labels(task, data[task][1]), set(labels)),
            "words" if task == data_lib.TOKEN else "texts",
            split=f"test ({test_path})",
        )

    from bert_tf.probing import report as report_lib

    features, feature_seconds = _all_features(config, model, data, output_dir)
    fine_tuned, finetune_seconds = {}, None
    if config.finetune:
        # Before the probes, in a child process: the parent holds no features yet, and the fine-tuning's memory
        # goes with the child.
        from bert_tf.child_process import run_in_child_process

        finetune_start = time.monotonic()
        for task in config.tasks:
            fine_tuned[task] = run_in_child_process(
                _fine_tuned_accuracy,
                task,
                files[task],
                _finetune_steps(config, _num_train_items(task, data[task][0])),
                config,
                output_dir,
                description=f"fine-tuning ({task})",
                environment=finetune_environment,
            )
        finetune_seconds = round(time.monotonic() - finetune_start, 1)
    probe_start = time.monotonic()
    report = {
        "model": {
            "model_dir": config.model.model_dir,
            "checkpoint": model.checkpoint,
            "num_hidden_layers": model.config.num_hidden_layers,
            "hidden_size": model.config.hidden_size,
        },
        "recipe": _recipe(config, {task: _num_train_items(task, data[task][0]) for task in config.tasks}),
        "data": {},
        "seconds": {"features": round(feature_seconds, 1)},
    }
    for task in config.tasks:
        train, test = data[task]
        report["data"][task] = _data_summary(task, train, test, files[task])
    report.update(_probe_all(config, data, features))
    report["seconds"]["probes"] = round(time.monotonic() - probe_start, 1)
    if config.finetune:
        for task in config.tasks:
            for key in REPORT_KEYS[task]:
                report[key]["rows"]["fine_tuned"] = fine_tuned[task]
        report["seconds"]["finetune"] = finetune_seconds
    report["seconds"]["total"] = round(time.monotonic() - start, 1)
    report_lib.write_report(output_dir, report)
    return report


def _labels(task, split_data):
    if task == data_lib.TOKEN:
        return [tag for tags in split_data.tags for tag in tags]
    return list(split_data.labels)


def _num_train_items(task, train) -> int:
    return len(train.sentences) if task == data_lib.TOKEN else len(train.texts)


def _finetune_steps(config: ProbeLayersConfig, num_train_items: int) -> int:
    """The reference row's steps: `finetune_epochs` over the training file, at least `finetune_min_steps`."""
    epoch_steps = math.ceil(config.finetune_epochs * num_train_items / config.finetune_batch_size)
    return max(1, epoch_steps, config.finetune_min_steps)


def _recipe(config: ProbeLayersConfig, num_train_items: dict) -> dict:
    from bert_tf.probing import probes

    def fine_tuned_steps():
        return "; ".join(
            f"{task} {steps} steps ({steps * config.finetune_batch_size / n:.1f} epochs)"
            for task, n in num_train_items.items()
            for steps in [_finetune_steps(config, n)]
        )

    return {
        "linear_probe": "standardised features, multinomial logistic regression (scikit-learn, L2, lbfgs); "
        f"C chosen from {list(probes.STRENGTHS)} by accuracy on a {config.dev_fraction:.0%} development split "
        "of the training file; accuracy on the test file",
        "scalar_mix": "standardised layers, softmax-weighted sum times a scale, then a dense softmax layer, "
        f"trained with Adam (learning rate {probes.MIX_LEARNING_RATE}, batch {probes.MIX_BATCH_SIZE} or fewer rows "
        f"for at least {probes.MIX_MIN_STEPS_PER_EPOCH} steps an epoch); the best "
        f"of {probes.MIX_EPOCHS} epochs on the development split",
        "word": f"{config.word_piece} WordPiece of each word",
        "sentence_mean": "mean over real tokens ([CLS] and [SEP] included)",
        "sentence_cls": "the [CLS] position",
        "fine_tuned": (
            f"bert_tf.jobs.finetune.run_finetuning, {config.finetune_epochs:g} epoch(s) and at least "
            f"{config.finetune_min_steps} steps ({fine_tuned_steps()}), peak learning rate "
            f"{config.finetune_learning_rate:g}, batch {config.finetune_batch_size} (as {config.finetune_microbatches} "
            "micro-batches), 10% warm-up then linear decay"
            if config.finetune
            else None
        ),
        "max_seq_length": config.max_seq_length,
        "seed": config.seed,
    }


def _data_summary(task, train, test, files) -> dict:
    summary = {"train_file": files[1], "test_file": files[2]}
    unseen = count_unseen_labels(_labels(task, test), set(_labels(task, train)))
    if unseen:
        summary["unseen_test_labels"] = unseen
    if task == data_lib.TOKEN:
        summary.update(
            train_sentences=len(train.sentences),
            train_words=train.num_words,
            test_sentences=len(test.sentences),
            test_words=test.num_words,
            labels=sorted(set(_labels(task, train))),
        )
    else:
        summary.update(train_texts=len(train.texts), test_texts=len(test.texts), labels=sorted(set(train.labels)))
    return summary


def _all_features(config, model, data, output_dir):
    """{(model name, task, split): the cached features' file}, and the seconds spent.

    The files hold float16 [items, L + 1, hidden] arrays: `token`, or `cls` and `mean`. Missing ones are computed
    in a child process (`bert_tf.child_process`), so the memory that TensorFlow keeps after the forward passes is
    not added to the probes'; the probes load one model's arrays at a time.
    """
    from bert_tf.child_process import run_in_child_process
    from bert_tf.probing.layer_features import FeatureCache

    start = time.monotonic()
    cache = FeatureCache(_cache_dir(config, output_dir))
    keys = _feature_keys(config, model, data)
    paths = {item: cache.path(key) for item, key in keys.items()}
    if not all(os.path.exists(path) for path in paths.values()):
        run_in_child_process(_compute_features, config, model, data, output_dir, description="the forward passes")
    return paths, time.monotonic() - start


def _cache_dir(config, output_dir) -> str:
    return config.cache_dir or os.path.join(output_dir, "feature_cache")


def _feature_keys(config, model, data) -> dict:
    """{(model name, task, split): the cache key of its features}: what the arrays were computed from."""
    from bert_tf.file_io import sha256_of

    model_keys = {
        "pretrained": {"checkpoint": _checkpoint_identity(model.checkpoint), "config": model.config.to_dict()}
    }
    if config.random_control:
        model_keys["random_init"] = {"random_init_seed": config.seed, "config": model.config.to_dict()}
    options = {
        "max_seq_length": config.max_seq_length,
        "lower_case": model.do_lower_case,
        "vocab": sha256_of(model.vocab_file),
    }
    keys = {}
    for name, model_key in model_keys.items():
        for task, (train, test) in data.items():
            for split, split_data in (("train", train), ("test", test)):
                file_key = {"model": model_key, "file": sha256_of(split_data.path), **options}
                if task == data_lib.TOKEN:
                    keys[(name, task, split)] = {"kind": "token", "word_piece": config.word_piece, **file_key}
                else:
                    keys[(name, task, split)] = {"kind": "sentence", **file_key}
    return keys


def _compute_features(config, model, data, output_dir) -> None:
    """Runs the forward passes whose features are not in the cache yet, one model at a time, and stores them."""
    from bert_tf.tensorflow_startup import load_tensorflow_lean

    load_tensorflow_lean()  # this child needs none of jax, scikit-learn, matplotlib
    import keras

    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.models import BertEncoder
    from bert_tf.probing.layer_features import FeatureCache, sentence_features, token_features
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    cache = FeatureCache(_cache_dir(config, output_dir))
    tokenizer = TaskTokenizer(model.vocab_file, lower_case=model.do_lower_case)
    common = dict(max_seq_length=config.max_seq_length, batch_size=config.batch_size, bucket_width=config.bucket_width)
    encoders = {}

    def encoder_of(name):
        if name not in encoders:
            encoders.clear()  # one model in memory at a time
            if name == "random_init":
                keras.utils.set_random_seed(config.seed)
                encoders[name] = BertEncoder(model.config)
            else:
                encoders[name] = BertEncoder(model.config)
                restore(encoders[name], model.checkpoint)
        return encoders[name]

    for (name, task, split), key in _feature_keys(config, model, data).items():
        split_data = data[task][0 if split == "train" else 1]
        label = f"{name} {task} {split}"
        if task == data_lib.TOKEN:
            cache.ensure(
                key,
                lambda: {
                    "token": token_features(
                        encoder_of(name),
                        tokenizer,
                        split_data.sentences,
                        word_piece=config.word_piece,
                        label=label,
                        **common,
                    )
                },
            )
        else:
            cache.ensure(
                key, lambda: sentence_features(encoder_of(name), tokenizer, split_data.texts, label=label, **common)
            )


def _checkpoint_identity(checkpoint: str) -> dict:
    """What the cache key knows of a checkpoint: its path, and the name, size and time of its index file(s).

    Read from the file system alone (no TensorFlow in the coordinating process): a directory is named by all
    the `.index` files in it, so a new checkpoint there changes the key.
    """
    path = os.path.abspath(checkpoint)
    if os.path.isdir(path):
        indexes = sorted(os.path.join(path, name) for name in os.listdir(path) if name.endswith(".index"))
    else:
        indexes = [path + ".index"]
    files = []
    for index in indexes:
        if not os.path.exists(index):
            raise JobArgumentError(f"--init_checkpoint: no checkpoint at {checkpoint} ({index} not found).")
        stat = os.stat(index)
        files.append([os.path.basename(index), stat.st_size, stat.st_mtime_ns])
    if not files:
        raise JobArgumentError(f"--model_dir: no TF2 checkpoint in {checkpoint}.")
    return {"path": path, "index_files": files}


def _probe_all(config, data, features) -> dict:
    """The report sections of every task: {"token": ..., "sentence_mean": ..., "sentence_cls": ...}.

    The linear probes run here (scikit-learn, no TensorFlow); the scalar mixes, which need Keras, all run
    afterwards in one child process, so this process never holds TensorFlow and the features at once.
    """
    from bert_tf.child_process import run_in_child_process

    sections, mix_jobs = {}, []
    for task in config.tasks:
        train, test = data[task]
        for key, (section, jobs) in _probe_task(task, train, test, features, config).items():
            sections[key] = section
            mix_jobs.extend(jobs)
    from bert_tf.probing.probes import release_memory

    release_memory()  # the linear probes' freed arrays go back to the system before the child needs memory
    mixes = run_in_child_process(_scalar_mixes, mix_jobs, config.seed, description="the scalar mixes")
    for (key, model_name), mix in mixes.items():
        rows = sections[key][model_name]
        rows["scalar_mix"] = mix
        logging.info("%s %s scalar_mix: %.4f", model_name, key, mix.test_accuracy)
    for key, section in sections.items():
        pretrained = section.pop("pretrained")
        random_init = section.pop("random_init", None)
        section.update(_section(pretrained))
        if random_init is not None:
            section["random_init"] = _section(random_init)
    return sections


def _probe_task(task, train, test, features, config) -> dict:
    """{report key: (section with each model's linear rows, [the scalar-mix jobs of its models])}."""
    from bert_tf.probing import probes
    from bert_tf.probing.layer_features import FeatureCache

    label_list = sorted(set(_labels(task, train)))
    train_y = data_lib.label_ids(_labels(task, train), label_list)
    test_y = data_lib.label_ids(_labels(task, test), label_list)
    if task == data_lib.TOKEN:
        fit_sentences, dev_sentences = data_lib.dev_split(len(train.sentences), config.dev_fraction, config.seed)
        sentence_of_word = np.repeat(np.arange(len(train.sentences)), [len(s) for s in train.sentences])
        is_dev = np.isin(sentence_of_word, dev_sentences)
        fit, dev = np.nonzero(~is_dev)[0], np.nonzero(is_dev)[0]
        train_words = [w for s in train.sentences for w in s]
        train_tags = _labels(task, train)
        test_words = [w for s in test.sentences for w in s]
        baseline = probes.word_baseline(
            [train_words[i] for i in fit], [train_tags[i] for i in fit], test_words, _labels(task, test)
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
            section[model_name] = _linear_rows(train_x, train_y, test_x, test_y, fit, dev, config.seed)
            del train_x, test_x
            jobs.append(_MixJob(key, model_name, *paths, representation, train_y, test_y, fit, dev, len(label_list)))
        result[key] = (section, jobs)
    return result


@dataclasses.dataclass(frozen=True)
class _MixJob:
    """One scalar-mix probe, as the child process gets it: where the features are, and the labels and split."""

    key: str
    model_name: str
    train_path: str
    test_path: str
    representation: str
    train_y: np.ndarray
    test_y: np.ndarray
    fit: np.ndarray
    dev: np.ndarray
    num_classes: int


def _scalar_mixes(jobs: list, seed: int) -> dict:
    """{(report key, model name): the scalar mix's ProbeResult} for every job (run in a child process)."""
    from bert_tf.tensorflow_startup import load_tensorflow_lean

    load_tensorflow_lean()  # this child needs none of jax, scikit-learn, matplotlib
    from bert_tf.probing import probes
    from bert_tf.probing.layer_features import FeatureCache

    results = {}
    for job in jobs:
        train_x = FeatureCache.load(job.train_path, job.representation)
        test_x = FeatureCache.load(job.test_path, job.representation)
        split = probes.Split(train_x, job.train_y, job.fit, job.dev, test_x, job.test_y)
        results[(job.key, job.model_name)] = probes.scalar_mix_probe(split, job.num_classes, seed=seed)
        del train_x, test_x, split
        probes.release_memory()
    return results


def _linear_rows(train_x, train_y, test_x, test_y, fit, dev, seed) -> dict:
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
    results["second_to_last"] = results[f"layer_{max(num_layers - 1, 0)}"]
    results["last"] = results[f"layer_{num_layers}"]
    last_four = slice(max(1, num_layers - 3), num_layers + 1)
    mean_four = lambda x: x[:, last_four].mean(axis=1, dtype=np.float32)  # noqa: E731 (no float32 copy of x)
    results["mean_last_four"] = probes.linear_probe(split(mean_four(train_x), mean_four(test_x)), seed=seed)
    flat = lambda x: x[:, last_four].reshape(len(x), -1)  # noqa: E731
    results["concat_last_four"] = probes.linear_probe(split(flat(train_x), flat(test_x)), seed=seed)
    return results


def _section(results: dict) -> dict:
    """The JSON of one model's rows: accuracies, the chosen strengths, the scalar mix, the best single layer."""
    layers = {name: r for name, r in results.items() if name.startswith("layer_")}
    best = max(layers, key=lambda name: (layers[name].test_accuracy, -int(name.split("_")[1])))
    mix = results["scalar_mix"]
    return {
        "rows": {name: r.test_accuracy for name, r in results.items()},
        "dev_accuracy": {name: r.dev_accuracy for name, r in results.items()},
        "strength": {name: r.strength for name, r in results.items() if r.strength is not None},
        "best_layer": best,
        "scalar_mix": {
            "weights": list(mix.mix_weights),
            "scale": mix.mix_scale,
            "expected_layer": mix.expected_layer,
        },
    }


def _fine_tuning_environment() -> dict:
    """The fine-tuning children start on jemalloc where there is one (`bert_tf.memory_allocator`): it keeps the
    default run within its memory budget."""
    from bert_tf import memory_allocator

    environment = memory_allocator.releasing_allocator_environment()
    if environment:
        logging.info(
            "The fine-tuning children run on jemalloc (%s), which gives freed memory back.", environment["LD_PRELOAD"]
        )
    else:
        logging.warning(
            "No jemalloc found (scripts/setup.sh installs it; %s names one): the fine-tuning reference rows keep "
            "TensorFlow's memory pool, so their peak is higher.",
            memory_allocator.ENVIRONMENT_VARIABLE,
        )
    return environment


def _fine_tuned_accuracy(task, files, num_train_steps, config, output_dir) -> float:
    """Test accuracy of the whole encoder fine-tuned on the task's training file (the reference row)."""
    from bert_tf.tensorflow_startup import load_tensorflow_lean

    load_tensorflow_lean()  # this child needs none of jax, scikit-learn, matplotlib
    from bert_tf.jobs.finetune import FinetuningDataConfig, FinetuningTaskConfig, run_finetuning
    from bert_tf.training import RuntimeConfig, TrainingConfig

    _, train_file, test_file = files
    schedule = TrainingConfig(
        learning_rate=config.finetune_learning_rate,
        num_train_steps=num_train_steps,
        warmup_proportion=0.1,
        num_microbatches=config.finetune_microbatches,
        save_checkpoints_steps=1_000_000,
        keep_checkpoint_max=1,
    )
    batch_sizes = dict(train_batch_size=config.finetune_batch_size, eval_batch_size=64)
    if task == data_lib.TOKEN:
        task_config = FinetuningTaskConfig("token_classification", max_seq_length=config.max_seq_length)
        data = FinetuningDataConfig(train_file=train_file, eval_file=test_file, **batch_sizes)
        metric = "token_accuracy"
    else:
        task_config = FinetuningTaskConfig("classification", max_seq_length=config.max_seq_length)
        data = FinetuningDataConfig(
            train_file=train_file,
            eval_file=test_file,
            text_a_column="text",
            label_column="label",
            file_format="tsv",
            **batch_sizes,
        )
        metric = "accuracy"
    logging.info("Fine-tuning the whole encoder on the %s task (the reference row)", task)
    results = run_finetuning(
        task_config,
        os.path.join(output_dir, f"fine_tuned_{task}"),
        config.model,
        data,
        schedule,
        RuntimeConfig(seed=config.seed),
        do_train=True,
        do_eval=True,
    )
    return float(results[metric])
