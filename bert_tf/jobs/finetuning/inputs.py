"""What a fine-tuning job reads and checks before TensorFlow starts: the model, the task plug-in and the data.

    from bert_tf.jobs.finetuning.inputs import build_task, task_reader, task_tokenizer
    reader = task_reader(task_config, data_config)
    task = build_task(task_config, task_tokenizer(resolved_model), labels, reader)
    features = task.featurize(reader.read("eval", data_config.eval_file), training=False)

The plug-in is the one registered for `task_config.task` (`bert_tf.tasks.registry`): it picks the reader and
the label rule, so nothing here names a task. `read_inputs` is the fine-tuning job's whole reading step; the
distillation jobs use the pieces. Writes nothing.
"""

from __future__ import annotations

import dataclasses

from absl import logging

from bert_tf import checkpoints
from bert_tf.checkpoints.model_source import (
    TASK_CONFIG_NAME,
    ModelSource,
    ResolvedModel,
    check_resumable,
    read_task_config,
)
from bert_tf.data.finetuning_data import ExamplesReader
from bert_tf.errors import JobArgumentError
from bert_tf.jobs.finetuning.config import FinetuningDataConfig
from bert_tf.tasks import registry
from bert_tf.tasks.long_text import LongTextConfig
from bert_tf.tasks.task_config import FinetuningTaskConfig


@dataclasses.dataclass
class FinetuningInputs:
    """What a job read and checked before TensorFlow is set up: the model, the task and examples and features
    per phase (None for a phase not run)."""

    output_dir: str
    source: ResolvedModel
    task_object: object  # the FinetuningTask plug-in
    train_examples: list | None = None
    train_features: object = None
    eval_examples: list | None = None
    eval_features: object = None
    predict_examples: list | None = None
    predict_features: object = None
    columns_used: dict = dataclasses.field(default_factory=dict)  # the reader's `columns_used()`

    def add_phase(self, phase: str, examples: list) -> None:
        """Featurizes and keeps the examples of "train", "eval" or "predict" (whose labels the model never sees)."""
        inputs = [without_label(e) for e in examples] if phase == "predict" else examples
        setattr(self, f"{phase}_examples", examples)
        features = self.task_object.featurize(inputs, training=phase == "train")
        setattr(self, f"{phase}_features", features)
        report = self.task_object.cut_report(features)
        lines = self.task_object.describe_cut(report, phase) if report else []
        for number, line in enumerate(lines):
            (logging.warning if number else logging.info)(line)  # the counts, then the hint


def task_class_for(task: FinetuningTaskConfig):
    """The plug-in class registered for `task.task`; refuses a config of another class than the task's."""
    cls = registry.task_class(task.task)
    if type(task) is not cls.config_class:
        raise JobArgumentError(f"--task={task.task} takes a {cls.config_class.__name__}, not a {type(task).__name__}.")
    return cls


def task_reader(task: FinetuningTaskConfig, data: FinetuningDataConfig) -> ExamplesReader:
    """The reader the task picks for the job's data settings (checks that they fit the task)."""
    return task_class_for(task).examples_reader(task, data)


def build_task(task: FinetuningTaskConfig, tokenizer, labels, reader: ExamplesReader):
    """The `FinetuningTask` plug-in for `task`, with the model's tokenizer and the resolved labels.

    A config whose `packing` is still the default (None) is resolved first (`resolve_packing`).
    """
    return task_class_for(task).from_config(task.resolve_packing(), tokenizer, labels, reader)


def resolve_long_text(
    task: FinetuningTaskConfig, tokenizer, reader: ExamplesReader, examples, saved_task_config=None
) -> FinetuningTaskConfig:
    """`task` with its default --long_text (None) decided: by the fine-tuned directory's `saved_task_config`
    (none recorded: truncated), else by `examples` (the training data, or the data read).

    Windows where the plug-in reads single texts in windows by default (`windows_by_default`: classification
    and regression) and a text is longer than the window: on long documents windows beat truncation
    (benchmarks/RESULTS.md, `long_documents`), and a text that fits is one window, as truncated. Else truncate.
    A given mode stays; the job logs the decision, and task_config.json records it.
    """
    config = task.long_text_config
    if config.long_text is not None:
        return task
    if saved_task_config:
        recorded = LongTextConfig.from_recorded(saved_task_config.get("long_text"), TASK_CONFIG_NAME)
        resolved = recorded if config == LongTextConfig() else dataclasses.replace(config, long_text=recorded.long_text)
        return dataclasses.replace(task, long_text_config=resolved)
    window = task.max_seq_length - 2
    single_texts = task_class_for(task).windows_by_default and not reader.sentence_pair
    long_text = single_texts and _first_longer(tokenizer, [e.text_a for e in examples], window)
    resolved = config.resolved(windows=bool(long_text))
    if resolved.windows:
        logging.info(
            "%s is longer than the window (%d pieces): texts are read in windows (--long_text=windows, the default "
            "for single texts longer than the window), one sequence per window, at most --max_windows=%d a text; "
            "--long_text=truncate keeps their first pieces.",
            long_text,
            window,
            config.max_windows,
        )
    return dataclasses.replace(task, long_text_config=resolved)


def _first_longer(tokenizer, texts: list, window: int, chunk: int = 256) -> str | None:
    """The first of `texts` with more than `window` pieces (quoted, shortened), or None."""
    # A text of at most `window` characters has at most `window` pieces: only longer ones are tokenized.
    candidates = [text for text in texts if len(text) > window]
    for start in range(0, len(candidates), chunk):
        batch = candidates[start : start + chunk]
        for text, pieces in zip(batch, tokenizer.tokenize(batch)):
            if len(pieces) > window:
                return repr(text[:40] + "...")
    return None


def task_tokenizer(source: ResolvedModel):
    """The `TaskTokenizer` of a resolved model (its vocabulary and casing)."""
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    # The vocabulary was read and checked by the model source; the tokenizer builds its lookup table from it.
    return TaskTokenizer(source.vocab_file, lower_case=source.do_lower_case, vocab=source.vocab)


def resolve_labels(
    task: FinetuningTaskConfig, data: FinetuningDataConfig, saved_task_config, reader: ExamplesReader, train_examples
):
    """The task's labels: `--label_list`, an earlier run's, the data source's own, or the training data's.

    None for a task without labels (regression, SQuAD).
    """
    cls = task_class_for(task)
    if not cls.has_labels(task.task):
        return None
    if data.label_list:
        return list(data.label_list)
    if saved_task_config and saved_task_config.get("label_list"):
        return list(saved_task_config["label_list"])
    if reader.label_names is not None:
        return list(reader.label_names)
    if train_examples is None:
        raise JobArgumentError("No label list: give --label_list, or train in this --output_dir first.")
    return cls.labels_from_examples(task.task, train_examples)


def resolve_model_source(model: ModelSource, output_dir: str, max_seq_length: int, need_init: bool) -> ResolvedModel:
    """The checked model; without --model_dir and --bert_config_file, the fine-tuned model in `output_dir`."""
    if not (model.model_dir or model.bert_config_file) and checkpoints.latest_checkpoint(output_dir) is not None:
        # An output directory written by an earlier run is itself a model directory.
        model = dataclasses.replace(model, model_dir=output_dir)
    random = model.init_from == "random"
    source = model.resolve(max_seq_length, need_checkpoint=need_init and not random)
    if random:
        # The encoder keeps the initialisation of its --seed; a run that resumes reads its own checkpoint.
        return dataclasses.replace(source, checkpoint=None)
    if need_init:
        from bert_tf.checkpoints.model_dir import find_checkpoint

        if not source.checkpoint:
            raise JobArgumentError("--do_train needs pretrained weights: --model_dir or --init_checkpoint.")
        try:
            source = dataclasses.replace(source, checkpoint=find_checkpoint(source.checkpoint))
        except FileNotFoundError as e:
            raise JobArgumentError(f"--init_checkpoint/--model_dir: {e}") from None
    return source


def without_label(example):
    """The example with its label(s) removed (prediction data may have them; predictions never see them)."""
    for field in ("label", "labels"):
        if hasattr(example, field):
            return dataclasses.replace(example, **{field: None})
    return example


def read_inputs(
    output_dir: str,
    task: FinetuningTaskConfig,
    model: ModelSource,
    data: FinetuningDataConfig,
    do_train: bool,
    do_eval: bool,
    do_predict: bool,
) -> FinetuningInputs:
    """Reads the model's config and vocabulary and all the data, and checks them; writes nothing."""
    reader = task_reader(task, data)
    saved_task_config = read_task_config(output_dir)
    finetuned = checkpoints.latest_checkpoint(output_dir)
    source = resolve_model_source(model, output_dir, task.max_seq_length, need_init=do_train and finetuned is None)
    tokenizer = task_tokenizer(source)

    train_examples = reader.read("train", data.train_file) if do_train else None
    eval_examples = reader.read("eval", data.eval_file) if do_eval else None
    predict_examples = reader.read("predict", data.predict_file) if do_predict else None
    labels = resolve_labels(task, data, saved_task_config, reader, train_examples)
    read = next((e for e in (train_examples, eval_examples, predict_examples) if e is not None), [])
    task = resolve_long_text(task, tokenizer, reader, read, saved_task_config)
    task_object = build_task(task, tokenizer, labels, reader)
    if finetuned is not None:
        _check_resumable(output_dir, saved_task_config, source, task_object)
    # All data is read and featurized before training, so bad evaluation or prediction data
    # (an unknown label, a malformed record) fails now rather than after hours of training.
    inputs = FinetuningInputs(output_dir, source, task_object, columns_used=reader.columns_used())
    if do_train:
        inputs.add_phase("train", train_examples)
    if do_eval:
        inputs.add_phase("eval", eval_examples)
    if do_predict:
        inputs.add_phase("predict", predict_examples)
    return inputs


def _check_resumable(output_dir, saved_task_config, source: ResolvedModel, task_object):
    """Refuses a fine-tuned `output_dir` of another task, labels, config or vocabulary; writes nothing.

    Runs before the model files are written, so a refused run leaves the directory's files describing the
    checkpoint that is there.
    """
    if saved_task_config:
        for key in ("task", "label_list"):
            saved, wanted = saved_task_config.get(key), task_object.config().get(key)
            if saved != wanted:
                raise JobArgumentError(
                    f"--output_dir={output_dir} holds a fine-tuned model with {key} {saved!r}, not "
                    f"{wanted!r}; use another --output_dir."
                )
    check_resumable(output_dir, source.config, source.vocab_file)
