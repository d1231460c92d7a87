"""`run_finetuning`: the fine-tuning job (train, evaluate, predict) behind `experiments.finetune`.

The model comes from a model directory (`bert_config.json`, `vocab.txt`,
checkpoint; written by `bert_tf.convert` or `experiments.pretrain`) or from
an explicit checkpoint, config and vocabulary. Training runs the project's
distributed loop (`bert_tf.training.train`) with `output_dir` as its model
directory, so an interrupted job resumes where it stopped. `output_dir` then
also holds `bert_config.json`, `vocab.txt` and `task_config.json` (labels,
lengths): it is itself a model directory, and a later run with only
`do_eval`/`do_predict` restores the fine-tuned model from it.

Outputs: `eval_results.json` (also logged and returned), `eval_predictions.*`
for the evaluation data and `predictions.*` for the prediction data (TSV for
classification, CoNLL text for tagging, JSON for SQuAD).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Optional, Sequence

from absl import logging

from bert_tf import cli, file_io
from bert_tf.tasks import readers
from bert_tf.tasks.readers import DataError

TASKS = ("classification", "sentence_pair_classification", "regression", "token_classification", "squad")
TASK_CONFIG_NAME = "task_config.json"
EVAL_RESULTS_NAME = "eval_results.json"


class NonFiniteMetricError(RuntimeError):
    """An evaluation metric is NaN or infinite: the run failed (eval_results.json lists which)."""


@dataclasses.dataclass
class _ModelSource:
    config: object  # BertConfig
    vocab_file: str
    init_checkpoint: Optional[str]


def run_finetuning(task: str, output_dir: str, *,
                   train_file: Optional[str] = None, eval_file: Optional[str] = None,
                   predict_file: Optional[str] = None,
                   tfds_name: Optional[str] = None, tfds_data_dir: Optional[str] = None,
                   tfds_train_split: str = "train", tfds_eval_split: Optional[str] = None,
                   tfds_predict_split: Optional[str] = None,
                   text_a_column=None, text_b_column=None, label_column=None,
                   file_format: Optional[str] = None, has_header: bool = True,
                   label_list: Optional[Sequence[str]] = None,
                   conll_word_column: int = 0, conll_label_column: int = -1,
                   model_dir: Optional[str] = None, init_checkpoint: Optional[str] = None,
                   bert_config_file: Optional[str] = None, vocab_file: Optional[str] = None,
                   do_lower_case: bool = True, max_seq_length: int = 128,
                   train_batch_size: int = 32, eval_batch_size: int = 8, predict_batch_size: Optional[int] = None,
                   learning_rate: float = 5e-5, num_train_epochs: float = 3.0,
                   num_train_steps: Optional[int] = None, warmup_proportion: float = 0.1,
                   weight_decay_rate: float = 0.01, clip_norm: Optional[float] = 1.0,
                   do_train: bool = False, do_eval: bool = False, do_predict: bool = False,
                   distribution_strategy: str = "one_device", num_gpus: Optional[int] = None,
                   tpu: Optional[str] = None, jit_compile: bool = False, mixed_precision: str = "float32",
                   steps_per_loop: int = 100, save_checkpoints_steps: int = 1000, keep_checkpoint_max: int = 5,
                   seed: Optional[int] = 42, deterministic: bool = False, dropout_rate: Optional[float] = None,
                   doc_stride: int = 128, max_query_length: int = 64, max_answer_length: int = 30,
                   n_best_size: int = 20, version_2_with_negative: bool = False,
                   null_score_diff_threshold: float = 0.0) -> dict:
    """Fine-tunes, evaluates and/or predicts; returns the evaluation metrics (empty without `do_eval`).

    Args (the flags of `experiments.finetune`, which documents them):
      task: one of `TASKS`.
      output_dir: checkpoints, summaries, results and predictions.
      train_file, eval_file, predict_file: TSV/CSV/JSONL (classification,
        regression), CoNLL columns (token_classification) or SQuAD JSON.
      tfds_name, tfds_data_dir, tfds_*_split: a prepared TFDS text dataset
        instead of files (classification and regression).
      text_a_column, text_b_column, label_column: columns of the text files
        (names or 0-based indices; keys for JSONL), or TFDS feature names.
      label_list: class names or tags in id order; default: from a previous
        run's `task_config.json`, the TFDS label names, or the training data.
      model_dir: a model directory; or `init_checkpoint` + `bert_config_file`
        + `vocab_file`. Not needed to evaluate/predict with an `output_dir`
        that holds a fine-tuned model.
      seed: seeds initialisation, dropout and shuffling; `deterministic`
        also makes TensorFlow's ops deterministic (process-wide; a GPU op
        without a deterministic kernel then raises).

    Raises:
      DataError: bad input data, naming the file and line or record.
      ValueError: inconsistent arguments, naming the flag.
    """
    import keras

    from bert_tf.training import precision

    if task not in TASKS:
        raise ValueError(f"--task must be one of {', '.join(TASKS)}, got {task!r}.")
    if not (do_train or do_eval or do_predict):
        raise ValueError("At least one of --do_train, --do_eval and --do_predict must be set.")
    for flag, value in (("max_seq_length", max_seq_length), ("train_batch_size", train_batch_size),
                        ("eval_batch_size", eval_batch_size), ("predict_batch_size", predict_batch_size or 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"--{flag} must be a positive integer, got {value!r}.")
    if not 0.0 <= warmup_proportion <= 1.0:
        raise ValueError(f"--warmup_proportion must be in [0, 1], got {warmup_proportion}.")
    if mixed_precision not in precision.PRECISION_POLICIES:
        raise ValueError(f"--mixed_precision must be one of {', '.join(precision.PRECISION_POLICIES)}, "
                         f"got {mixed_precision!r}.")
    if tfds_name and task in ("token_classification", "squad"):
        raise ValueError(f"--tfds_name is supported for classification and regression, not --task={task}; "
                         "use --train_file/--eval_file/--predict_file.")
    _check_data_sources(task, tfds_name, do_train, do_eval, do_predict, train_file, eval_file, predict_file)

    data = _DataSource(task, tfds_name, tfds_data_dir, tfds_train_split, tfds_eval_split, tfds_predict_split,
                       text_a_column, text_b_column, label_column, file_format, has_header,
                       conll_word_column, conll_label_column, version_2_with_negative)

    # Nothing is written to output_dir before every check passed.
    output_dir = os.path.abspath(output_dir)
    saved_task_config = _read_task_config(output_dir)
    finetuned = _latest_checkpoint(output_dir)
    source = _model_source(model_dir, init_checkpoint, bert_config_file, vocab_file, output_dir,
                           need_init=do_train and finetuned is None, has_finetuned=finetuned is not None)
    if max_seq_length > source.config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={max_seq_length} exceeds the model's max_position_embeddings "
                         f"({source.config.max_position_embeddings}).")
    if task == "squad" and max_query_length + 3 >= max_seq_length:
        raise ValueError(f"--max_seq_length ({max_seq_length}) must exceed --max_query_length "
                         f"({max_query_length}) + 3.")

    from bert_tf.tasks.task_tokenizer import TaskTokenizer
    cli.load_vocab(source.vocab_file, "vocab_file")  # errors naming the flag, file and line
    tokenizer = TaskTokenizer(source.vocab_file, lower_case=do_lower_case)
    if tokenizer.vocab_size != source.config.vocab_size:
        # Pretraining and conversion refuse this too: ids past vocab_size have no embedding, and a
        # smaller vocabulary means the ids are not those the model was trained with.
        raise ValueError(f"--vocab_file: {source.vocab_file} has {tokenizer.vocab_size} tokens but the model's "
                         f"vocab_size is {source.config.vocab_size}.")

    train_examples = data.read("train", train_file) if do_train else None
    labels = _resolve_labels(task, label_list, saved_task_config, data, train_examples)
    task_object = _build_task(task, tokenizer, max_seq_length, labels, data.sentence_pair, dropout_rate,
                              doc_stride, max_query_length, max_answer_length, n_best_size,
                              version_2_with_negative, null_score_diff_threshold)
    if finetuned is not None:
        _check_resumable(output_dir, saved_task_config, source, task_object)
    # All data is read and featurized before training, so bad evaluation or prediction data
    # (an unknown label, a malformed record) fails now rather than after hours of training.
    train_features = task_object.featurize(train_examples, training=True) if do_train else None
    eval_examples = data.read("eval", eval_file) if do_eval else None
    eval_features = task_object.featurize(eval_examples, training=False) if do_eval else None
    predict_examples = data.read("predict", predict_file) if do_predict else None
    predict_features = (task_object.featurize([_without_label(e) for e in predict_examples], training=False)
                        if do_predict else None)

    previous_policy = keras.mixed_precision.global_policy()
    precision.set_precision_policy(mixed_precision)
    try:
        from bert_tf.training import distribution, enable_determinism
        if deterministic:
            if seed is None:
                raise ValueError("--deterministic needs a --seed.")
            enable_determinism(seed)
        elif seed is not None:
            keras.utils.set_random_seed(seed)
        strategy = distribution.get_strategy(distribution_strategy, num_gpus=num_gpus, tpu=tpu)
        is_chief = distribution.is_chief(strategy)

        if do_train:
            if is_chief:
                # Written first, so a run stopped during training can be evaluated or resumed as it is.
                _write_model_files(output_dir, source, task_object)
            model, step = _train(task_object, train_examples, train_features, source, strategy, output_dir,
                                 train_batch_size=train_batch_size, learning_rate=learning_rate,
                                 num_train_epochs=num_train_epochs, num_train_steps=num_train_steps,
                                 warmup_proportion=warmup_proportion, weight_decay_rate=weight_decay_rate,
                                 clip_norm=clip_norm, jit_compile=jit_compile, steps_per_loop=steps_per_loop,
                                 save_checkpoints_steps=save_checkpoints_steps,
                                 keep_checkpoint_max=keep_checkpoint_max, seed=seed)
        else:
            model, step = _restore_finetuned(task_object, source, strategy, output_dir)

        results = {}
        if not is_chief:
            return results
        # Multi-worker runs evaluate on the chief alone, outside the collective strategy.
        eval_strategy = strategy if distribution.num_workers(strategy) == 1 else tf_default_strategy()
        if do_eval:
            examples = eval_examples
            predictions = _predict(task_object, model, examples, eval_features, eval_batch_size, eval_strategy,
                                   jit_compile)
            results = task_object.evaluate(examples, predictions)
            results.update(num_examples=len(examples), global_step=step)
            task_object.write_predictions(examples, predictions, output_dir, prefix="eval_")
            non_finite = sorted(k for k, v in results.items() if isinstance(v, float) and not math.isfinite(v))
            # JSON has no NaN/Infinity: such metrics are written as null and listed, and the run fails.
            written = {k: (None if k in non_finite else v) for k, v in results.items()}
            if non_finite:
                written["non_finite_metrics"] = non_finite
            file_io.write_json(os.path.join(output_dir, EVAL_RESULTS_NAME), written)
            logging.info("***** Eval results (step %d) *****", step)
            for key in sorted(results):
                logging.info("  %s = %s", key, results[key])
            if non_finite:
                raise NonFiniteMetricError(
                    "evaluation gave non-finite metrics: "
                    + ", ".join(f"{k}={results[k]}" for k in non_finite)
                    + f" (step {step}); the model diverged or the evaluation data is degenerate.")
        if do_predict:
            examples = predict_examples
            predictions = _predict(task_object, model, examples, predict_features,
                                   predict_batch_size or eval_batch_size, eval_strategy, jit_compile)
            paths = task_object.write_predictions(examples, predictions, output_dir, prefix="")
            logging.info("Wrote predictions for %d examples to %s.", len(examples), ", ".join(paths))
        return results
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


def tf_default_strategy():
    import tensorflow as tf
    return tf.distribute.get_strategy()


# --- arguments -----------------------------------------------------------------


def _check_data_sources(task, tfds_name, do_train, do_eval, do_predict, train_file, eval_file, predict_file):
    if tfds_name:
        for flag, value in (("train_file", train_file), ("eval_file", eval_file), ("predict_file", predict_file)):
            if value:
                raise ValueError(f"Give either --tfds_name or --{flag}, not both.")
        return
    for wanted, flag, value in ((do_train, "train_file", train_file), (do_eval, "eval_file", eval_file),
                                (do_predict, "predict_file", predict_file)):
        if wanted and not value:
            raise ValueError(f"--do_{flag.split('_')[0]} needs --{flag} (or --tfds_name).")
        if wanted and not os.path.isfile(value):
            raise DataError(f"--{flag}: file not found: {value}")
        if wanted:
            # The readers' decode errors name no line; fine-tuning files are small enough to check first.
            cli.check_utf8(value, flag)


def _latest_checkpoint(directory: str) -> Optional[str]:
    import tensorflow as tf
    return tf.train.latest_checkpoint(directory)


def _check_resumable(output_dir, saved_task_config, source: _ModelSource, task_object):
    """Refuses a fine-tuned `output_dir` whose checkpoint is of another model; writes nothing.

    Runs before `_write_model_files`, so a refused run leaves the directory's
    files describing the checkpoint that is there.
    """
    from bert_tf.checkpoints.model_dir import CONFIG_NAME, VOCAB_NAME
    from bert_tf.config import BertConfig

    if saved_task_config:
        for key in ("task", "label_list"):
            saved, wanted = saved_task_config.get(key), task_object.config().get(key)
            if saved != wanted:
                raise ValueError(f"--output_dir={output_dir} holds a fine-tuned model with {key} {saved!r}, not "
                                 f"{wanted!r}; use another --output_dir.")
    config_path = os.path.join(output_dir, CONFIG_NAME)
    if os.path.exists(config_path) and BertConfig.from_json_file(config_path) != source.config:
        raise ValueError(f"--output_dir={output_dir} holds a fine-tuned model of another config ({config_path} "
                         "differs); use another --output_dir.")
    vocab_path = os.path.join(output_dir, VOCAB_NAME)
    if os.path.exists(vocab_path) and os.path.abspath(source.vocab_file) != vocab_path:
        with open(vocab_path, "rb") as saved, open(source.vocab_file, "rb") as wanted:
            if saved.read() != wanted.read():
                raise ValueError(f"--vocab_file={source.vocab_file} differs from {vocab_path} of the fine-tuned "
                                 "model in --output_dir; use another --output_dir.")


def _read_task_config(output_dir: str) -> Optional[dict]:
    path = os.path.join(output_dir, TASK_CONFIG_NAME)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: unreadable task config ({e}).") from None


def _model_source(model_dir, init_checkpoint, bert_config_file, vocab_file, output_dir, need_init,
                  has_finetuned) -> _ModelSource:
    from bert_tf.checkpoints.model_dir import CONFIG_NAME, VOCAB_NAME, find_checkpoint
    from bert_tf.config import BertConfig

    if model_dir:
        if not os.path.isdir(model_dir):
            raise ValueError(f"--model_dir: not a directory: {model_dir}")
        bert_config_file = bert_config_file or os.path.join(model_dir, CONFIG_NAME)
        vocab_file = vocab_file or os.path.join(model_dir, VOCAB_NAME)
        init_checkpoint = init_checkpoint or model_dir
    elif has_finetuned and not bert_config_file:
        # An output directory written by an earlier run is itself a model directory.
        bert_config_file = os.path.join(output_dir, CONFIG_NAME)
        vocab_file = vocab_file or os.path.join(output_dir, VOCAB_NAME)
    if not bert_config_file:
        raise ValueError("Give --model_dir, or --bert_config_file with --init_checkpoint and --vocab_file.")
    if not vocab_file:
        raise ValueError("--vocab_file is needed (or a --model_dir holding vocab.txt).")
    if not os.path.isfile(vocab_file):
        raise ValueError(f"Vocabulary file not found: {vocab_file} (--vocab_file or the model directory's "
                         f"{VOCAB_NAME}).")
    try:
        config = BertConfig.from_json_file(bert_config_file)
    except ValueError as e:
        raise ValueError(f"--bert_config_file={bert_config_file}: {e}") from None
    if need_init:
        if not init_checkpoint:
            raise ValueError("--do_train needs pretrained weights: --model_dir or --init_checkpoint.")
        try:
            init_checkpoint = find_checkpoint(init_checkpoint)
        except FileNotFoundError as e:
            raise ValueError(f"--init_checkpoint/--model_dir: {e}") from None
    return _ModelSource(config=config, vocab_file=vocab_file, init_checkpoint=init_checkpoint)


class _DataSource:
    """Reads the examples of one phase from a file or from TFDS, with the column settings of the job."""

    def __init__(self, task, tfds_name, tfds_data_dir, train_split, eval_split, predict_split, text_a_column,
                 text_b_column, label_column, file_format, has_header, conll_word_column, conll_label_column,
                 version_2_with_negative):
        self.task = task
        self.tfds_name = tfds_name
        self.tfds_data_dir = tfds_data_dir
        self.file_format = file_format
        self.has_header = has_header
        self.conll_word_column = conll_word_column
        self.conll_label_column = conll_label_column
        self.version_2_with_negative = version_2_with_negative
        self.label_names = None
        self.regression = task == "regression"
        if tfds_name:
            default_a, default_b, default_eval = readers.tfds_defaults(tfds_name) if text_a_column is None \
                else (text_a_column, text_b_column, "validation")
            self.splits = {"train": train_split, "eval": eval_split or default_eval,
                           "predict": predict_split or "test"}
            self.text_a = text_a_column or default_a
            self.text_b = text_b_column if text_b_column is not None else default_b
            self.label = label_column or "label"
            if task == "classification" and self.text_b:
                raise ValueError(f"{tfds_name} has sentence pairs ({self.text_a!r}, {self.text_b!r}); use "
                                 "--task=sentence_pair_classification.")
            if task == "sentence_pair_classification" and not self.text_b:
                raise ValueError(f"{tfds_name} has single sentences; use --task=classification.")
            self.label_names = readers.read_tfds_label_names(tfds_name, tfds_data_dir, self.label)
            if (self.label_names is None) != self.regression:
                kind = "a numeric (regression)" if self.label_names is None else "a class"
                raise ValueError(f"{tfds_name} has {kind} label {self.label!r}; it does not fit --task={task}.")
        else:
            self.text_a = text_a_column if text_a_column is not None else "text_a"
            pair_default = "text_b" if task == "sentence_pair_classification" else None
            self.text_b = text_b_column if text_b_column is not None else pair_default
            self.label = label_column if label_column is not None else "label"
            if task == "classification" and text_b_column is not None:
                raise ValueError("--text_b_column is for --task=sentence_pair_classification (or regression).")
        self.sentence_pair = task == "sentence_pair_classification" or (task == "regression" and bool(self.text_b))

    def read(self, phase: str, path: Optional[str]):
        """Examples for "train", "eval" or "predict" (labels optional for "predict")."""
        require_labels = phase != "predict"
        if self.tfds_name:
            examples, _ = readers.read_tfds_text_examples(
                self.tfds_name, self.splits[phase], self.tfds_data_dir, self.text_a,
                self.text_b if self.sentence_pair else None, self.label)
            if require_labels and any(e.label is None for e in examples):
                raise DataError(f"{self.tfds_name} split {self.splits[phase]!r} has unlabelled examples "
                                "(GLUE test splits do); evaluate on a labelled split (--tfds_eval_split).")
            return examples
        if self.task == "squad":
            return readers.read_squad(path, is_training=phase == "train",
                                      version_2_with_negative=self.version_2_with_negative)
        if self.task == "token_classification":
            return readers.read_conll(path, word_column=self.conll_word_column,
                                      label_column=self.conll_label_column, require_labels=require_labels)
        return readers.read_text_examples(
            path, self.text_a, self.text_b if self.sentence_pair else None, self.label,
            file_format=self.file_format, has_header=self.has_header, regression=self.regression,
            require_labels=require_labels)


def _resolve_labels(task, label_list, saved_task_config, data: _DataSource, train_examples):
    if task in ("regression", "squad"):
        return None
    if label_list:
        return list(label_list)
    if saved_task_config and saved_task_config.get("label_list"):
        return list(saved_task_config["label_list"])
    if data.tfds_name:
        return list(data.label_names)
    if train_examples is None:
        raise ValueError("No label list: give --label_list, or train in this --output_dir first.")
    if task == "token_classification":
        return readers.tag_list_from_examples(train_examples)
    labels = readers.label_list_from_examples(train_examples)
    if len(labels) < 2:
        raise DataError(f"The training data has only the label(s) {labels}; classification needs at least two.")
    return labels


def _build_task(task, tokenizer, max_seq_length, labels, sentence_pair, dropout_rate, doc_stride,
                max_query_length, max_answer_length, n_best_size, version_2_with_negative,
                null_score_diff_threshold):
    if task in ("classification", "sentence_pair_classification", "regression"):
        from bert_tf.tasks.classification import ClassificationTask
        return ClassificationTask(tokenizer, max_seq_length, labels, sentence_pair=sentence_pair,
                                  dropout_rate=dropout_rate)
    if task == "token_classification":
        from bert_tf.tasks.tagging import TaggingTask
        return TaggingTask(tokenizer, max_seq_length, labels, dropout_rate=dropout_rate)
    from bert_tf.tasks.squad import SquadTask
    return SquadTask(tokenizer, max_seq_length, doc_stride=doc_stride, max_query_length=max_query_length,
                     max_answer_length=max_answer_length, n_best_size=n_best_size,
                     version_2_with_negative=version_2_with_negative,
                     null_score_diff_threshold=null_score_diff_threshold)


# --- model, training, prediction --------------------------------------------------


def _checkpoint_items(model):
    # Task.checkpoint_items holds "encoder", so the output is also a model directory for load_encoder().
    return model.checkpoint_items


def _build_model(task_object, config):
    from bert_tf.models import BertEncoder
    return task_object.build_model(BertEncoder(config))


def _num_features(features) -> int:
    return len(features["text_a"]) if isinstance(features, dict) else len(features)


def _train(task_object, examples, features, source: _ModelSource, strategy, output_dir, *, train_batch_size,
           learning_rate, num_train_epochs, num_train_steps, warmup_proportion, weight_decay_rate, clip_norm,
           jit_compile, steps_per_loop, save_checkpoints_steps, keep_checkpoint_max, seed):
    from bert_tf.checkpoints.model_dir import restore
    from bert_tf.training import TrainingConfig, train

    num_features = _num_features(features)
    if num_train_steps is None:
        if not num_train_epochs > 0:
            raise ValueError(f"--num_train_epochs must be positive, got {num_train_epochs}.")
        num_train_steps = max(1, int(math.ceil(num_features * num_train_epochs / train_batch_size)))
    if num_train_steps < 1:
        raise ValueError(f"--num_train_steps must be positive, got {num_train_steps}.")
    num_replicas = strategy.num_replicas_in_sync
    if train_batch_size % num_replicas:
        raise ValueError(f"--train_batch_size ({train_batch_size}) must be divisible by the number of replicas "
                         f"({num_replicas}).")
    config = TrainingConfig(
        num_train_steps=num_train_steps, learning_rate=learning_rate,
        num_warmup_steps=int(num_train_steps * warmup_proportion), weight_decay_rate=weight_decay_rate,
        clip_norm=clip_norm, steps_per_loop=min(steps_per_loop, num_train_steps),
        save_checkpoints_steps=save_checkpoints_steps, keep_checkpoint_max=keep_checkpoint_max,
        jit_compile=jit_compile)
    logging.info("***** Training: %d examples, %d features, batch size %d, %d steps *****", len(examples),
                 num_features, train_batch_size, num_train_steps)

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(train_batch_size)
        return task_object.dataset(features, batch_size, training=True, seed=seed, input_context=input_context)

    def init_fn(model):
        restore(model.encoder, source.init_checkpoint)
        logging.info("Initialised the encoder from %s.", source.init_checkpoint)

    result = train(strategy, lambda: _build_model(task_object, source.config), task_object.compute_loss,
                   dataset_fn, output_dir, config, checkpoint_items_fn=_checkpoint_items, init_fn=init_fn)
    return result.model, result.step


def _restore_finetuned(task_object, source: _ModelSource, strategy, output_dir):
    import tensorflow as tf

    latest = _latest_checkpoint(output_dir)
    if latest is None:
        raise ValueError(f"--output_dir {output_dir} holds no fine-tuned checkpoint to evaluate or predict with; "
                         "add --do_train.")
    with strategy.scope():
        model = _build_model(task_object, source.config)
    status = tf.train.Checkpoint(**_checkpoint_items(model)).read(latest)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise ValueError(f"{latest} does not match a {task_object.name} model with these settings "
                         f"(labels, config): {e}") from None
    status.expect_partial()
    step = int(latest.rsplit("-", 1)[-1]) if latest.rsplit("-", 1)[-1].isdigit() else 0
    logging.info("Restored the fine-tuned model from %s.", latest)
    return model, step


def _predict(task_object, model, examples, features, batch_size, strategy, jit_compile):
    from bert_tf.tasks.inference import predict_outputs

    dataset = task_object.dataset(features, batch_size, training=False)
    outputs = predict_outputs(model, dataset, strategy=strategy, jit_compile=jit_compile,
                              num_features=_num_features(features))
    return task_object.postprocess(examples, features, outputs)


def _without_label(example):
    for field in ("label", "labels"):
        if hasattr(example, field):
            return dataclasses.replace(example, **{field: None})
    return example


def _write_model_files(output_dir, source: _ModelSource, task_object):
    from bert_tf.checkpoints.model_dir import CONFIG_NAME, VOCAB_NAME

    file_io.write_text(os.path.join(output_dir, CONFIG_NAME), source.config.to_json_string())
    vocab_path = os.path.join(output_dir, VOCAB_NAME)
    if os.path.abspath(source.vocab_file) != vocab_path:
        file_io.copy_file(source.vocab_file, vocab_path)
    file_io.write_json(os.path.join(output_dir, TASK_CONFIG_NAME), task_object.config())
