"""Writes TF Hub-style SavedModels: the encoder (with optional `mlm`) and the preprocessing model.

Layout of `export_model_dir(model_dir, export_dir)`:

    export_dir/
      encoder/      SavedModel: `__call__`, `call_training`, `serving_default` (+ `mlm`)
        assets.extra/bert_config.json, assets.extra/vocab.txt   (for reference)
      preprocess/   SavedModel: `__call__`, `tokenize`, `bert_pack_inputs`
      classifier/   (a fine-tuned classification or regression directory only) SavedModel: `serving_default`
                    text -> scores, classes, label, label_id (`bert_tf.export.classifier_module`), a text of any
                    length cut as the fine-tuning's --long_text (truncate, head_tail or windows) cut it
        assets.extra/task_config.json, assets.extra/required_ops.txt (the TF Text ops a server must register)
      tagger/       (a fine-tuned tagging directory only) SavedModel: `serving_default` text -> words, tags,
                    scores, num_words (`bert_tf.export.tagger_module`); assets.extra/ as for classifier/
      litert/       (with `litert=LiteRTConfig(...)`) classifier.tflite: the same classifier for LiteRT, text in
                    (`bert_tf.export.litert`); required_ops.txt (what a mobile build links), task_config.json

Every directory is assembled under a temporary name beside its destination
and renamed when complete, so a failed or interrupted export leaves no
partial SavedModel behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import CONFIG_NAME, VOCAB_NAME, find_checkpoint, has_pretraining_heads, restore
from bert_tf.checkpoints.model_source import check_seq_length
from bert_tf.export.classifier_module import VERIFY_TEXTS
from bert_tf.export.encoder_module import EncoderModule, flatten_outputs
from bert_tf.models import BertEncoder, BertPretrainer

ENCODER_SUBDIR = "encoder"
PREPROCESS_SUBDIR = "preprocess"
CLASSIFIER_SUBDIR = "classifier"
TAGGER_SUBDIR = "tagger"
TAGGING_TASK = "token_classification"
REQUIRED_OPS_NAME = "required_ops.txt"
EXTRA_ASSETS_DIR = "assets.extra"  # TF Serving's place for files that are not graph assets

# Float32 on CPU reproduces the Keras model up to ~1e-7; anything above this is a broken export.
VERIFY_TOLERANCE = 1e-5


@contextlib.contextmanager
def atomic_directory(path: str, overwrite: bool = False):
    """Yields a fresh temporary directory that becomes `path` when the block succeeds.

    An existing non-empty `path` raises FileExistsError unless `overwrite`;
    then it is replaced only after the new directory is complete. On an
    exception the temporary directory is removed and `path` is untouched.
    """
    path = os.path.abspath(path)
    _check_destination(path, overwrite)
    with file_io.atomic_path(path, directory=True) as tmp_dir:
        yield tmp_dir
        _check_destination(path, overwrite)  # it may have appeared meanwhile


def _check_destination(path: str, overwrite: bool) -> None:
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise FileExistsError(f"Export path {path} exists and is not a directory.")
        if os.listdir(path) and not overwrite:
            raise FileExistsError(
                f"Export directory {path} already exists and is not empty; "
                "choose another one or pass overwrite=True (--overwrite)."
            )


@contextlib.contextmanager
def _without_capture_rename_notes():
    """Drops TensorFlow's note that a function's "input name(s) 3162, 3164, ..." will be renamed.

    Those "inputs" are the variables and tables the function captures (named by their ids), not its own
    inputs, which keep their names (`input_word_ids`, `text`, ...); the note says nothing a user can act on.
    TensorFlow's SavedModel code logs it through absl (logger "absl").
    """
    import logging as python_logging

    def keep(record):
        return "with unsupported characters which will be renamed" not in record.getMessage()

    loggers = [python_logging.getLogger("absl"), tf.get_logger()]
    for logger in loggers:
        logger.addFilter(keep)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(keep)


# --- encoder -------------------------------------------------------------------


def _save_encoder(
    model: BertEncoder | BertPretrainer, path: str, vocab_file: str | None, include_mlm: bool, verify: bool
) -> EncoderModule:
    module = EncoderModule(model, include_mlm=include_mlm)
    module.trace()
    with _without_capture_rename_notes():
        tf.saved_model.save(module, path, signatures=module.signatures())
    extra_dir = os.path.join(path, EXTRA_ASSETS_DIR)
    os.makedirs(extra_dir, exist_ok=True)
    encoder = model.encoder if isinstance(model, BertPretrainer) else model
    encoder.config.to_json_file(os.path.join(extra_dir, CONFIG_NAME))
    if vocab_file:
        shutil.copyfile(vocab_file, os.path.join(extra_dir, VOCAB_NAME))
    if verify:
        verify_encoder_export(model, path)
    return module


def export_encoder(
    model: BertEncoder | BertPretrainer,
    export_dir: str,
    *,
    vocab_file: str | None = None,
    include_mlm: bool = True,
    overwrite: bool = False,
    verify: bool = True,
) -> str:
    """Saves a Keras encoder as a TF Hub-style encoder SavedModel.

    Args:
      model: a `BertEncoder`, or a `BertPretrainer` (its masked-LM head becomes
        the `mlm` sub-object unless `include_mlm=False`).
      export_dir: the SavedModel directory to create.
      vocab_file: copied to `assets.extra/vocab.txt` for reference.
      overwrite: replace an existing non-empty `export_dir`.
      verify: reload the SavedModel and check it reproduces `model`'s outputs.

    Returns:
      The absolute path of the SavedModel.
    """
    if vocab_file:
        _check_file(vocab_file, "vocab_file")
    with atomic_directory(export_dir, overwrite) as tmp_dir:
        _save_encoder(model, tmp_dir, vocab_file, include_mlm, verify)
    return os.path.abspath(export_dir)


def verify_encoder_export(model: BertEncoder | BertPretrainer, path: str, seq_length: int = 16) -> float:
    """Reloads `path` and compares its outputs with `model` on a random padded batch.

    Returns the largest absolute difference over all outputs (and `mlm_logits`
    when the export has an `mlm` sub-object); raises ValueError above
    `VERIFY_TOLERANCE` (for a bfloat16 or int8 encoder, 1/64 of its largest output).
    """
    encoder = model.encoder if isinstance(model, BertPretrainer) else model
    config = encoder.config
    seq_length = min(seq_length, config.max_position_embeddings)
    rng = np.random.default_rng(0)
    inputs = {
        "input_word_ids": rng.integers(0, config.vocab_size, (2, seq_length)).astype(np.int32),
        "input_mask": np.ones((2, seq_length), np.int32),
        "input_type_ids": np.zeros((2, seq_length), np.int32),
    }
    inputs["input_mask"][1, seq_length // 2 :] = 0
    inputs["input_type_ids"][0, seq_length // 2 :] = 1
    loaded = tf.saved_model.load(path)
    got = flatten_outputs(loaded(inputs))
    # The export has TF Hub's keys; the Keras encoder also returns `embedding_output`, which it leaves out.
    expected = {name: value for name, value in flatten_outputs(encoder(inputs, training=False)).items() if name in got}
    diffs = {
        name: float(np.max(np.abs(np.asarray(got[name]) - np.asarray(value, np.float32))))
        for name, value in expected.items()
    }
    if hasattr(loaded, "mlm") and isinstance(model, BertPretrainer):
        mlm_inputs = dict(inputs, masked_lm_positions=np.array([[1, 2], [3, 0]], np.int32))
        diffs["mlm_logits"] = float(
            np.max(np.abs(loaded.mlm(mlm_inputs)["mlm_logits"].numpy() - np.asarray(model(mlm_inputs)["mlm_logits"])))
        )
    worst = max(diffs, key=diffs.get)
    tolerance = VERIFY_TOLERANCE
    quantized = any(str(v.dtype) == "int8" for v in encoder.weights)
    if encoder.embeddings.compute_dtype == "bfloat16" or quantized:
        # The graph fuses ops the eager model runs one by one, so a value may round one step apart: a bfloat16
        # output one place (1/128 of its size), an int8-quantized activation one level (1/127 of its largest).
        largest = max(float(np.max(np.abs(np.asarray(value, np.float32)))) for value in expected.values())
        tolerance = 2**-6 * max(1.0, largest)
    if diffs[worst] > tolerance:
        raise ValueError(
            f"The SavedModel written to {path} does not reproduce the Keras model: "
            f"max |difference| of {worst} is {diffs[worst]:.3g} > {tolerance:.3g}."
        )
    return diffs[worst]


# --- preprocessing model ------------------------------------------------------------


def _save_preprocessor(vocab_file: str, lower_case: bool, seq_length: int, path: str) -> None:
    from bert_tf.tokenization import BertPreprocessor, save_preprocessor  # tensorflow_text is heavy

    preprocessor = BertPreprocessor(vocab_file, lower_case=lower_case, default_seq_length=seq_length)
    with _without_capture_rename_notes():
        save_preprocessor(preprocessor, path)


def export_preprocessor(
    vocab_file: str, lower_case: bool, max_seq_length: int, export_dir: str, *, overwrite: bool = False
) -> str:
    """Saves the TF Hub-style BERT preprocessing SavedModel for `vocab_file`.

    Args:
      vocab_file: WordPiece vocabulary, one token per line (stored as an asset).
      lower_case: whether text is lower-cased and accents stripped (uncased models).
      max_seq_length: the sequence length of the default `__call__` packing.
      export_dir: the SavedModel directory to create.

    Returns:
      The absolute path of the SavedModel.
    """
    _check_file(vocab_file, "vocab_file")
    check_seq_length(max_seq_length)
    with atomic_directory(export_dir, overwrite) as tmp_dir:
        _save_preprocessor(vocab_file, lower_case, max_seq_length, os.path.join(tmp_dir, "saved_model"))
        _move_contents(os.path.join(tmp_dir, "saved_model"), tmp_dir)
    return os.path.abspath(export_dir)


def _move_contents(source: str, destination: str) -> None:
    for name in os.listdir(source):
        os.replace(os.path.join(source, name), os.path.join(destination, name))
    os.rmdir(source)


# --- from a model directory or checkpoint -----------------------------------------------


def export_model_dir(
    model_dir: str | None,
    export_dir: str,
    *,
    init_checkpoint: str | None = None,
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
    lower_case: bool = True,
    max_seq_length: int = 128,
    include_mlm: bool = True,
    overwrite: bool = False,
    verify: bool = True,
    quantize: str | None = None,
    litert=None,
    init_from: str = "checkpoint",
    seed: int = 0,
) -> dict:
    """Exports a model directory (or explicit checkpoint files) as `encoder/` and `preprocess/`.

    Args:
      model_dir: a directory with `bert_config.json`, `vocab.txt` and TF2
        checkpoints (the latest is used); None when all of `init_checkpoint`,
        `bert_config_file` and `vocab_file` are given.
      export_dir: the directory to create, holding `encoder/` and `preprocess/`.
      init_checkpoint, bert_config_file, vocab_file: override the files of `model_dir` (the checkpoint to
        export: a prefix, or a directory's latest).
      lower_case: whether the preprocessor lower-cases (uncased vocabularies).
      max_seq_length: the preprocessor's default sequence length.
      include_mlm: give the encoder an `mlm` sub-object when the checkpoint has
        masked-LM weights.
      overwrite: replace an existing non-empty `export_dir`.
      verify: check that the encoder SavedModel reproduces the Keras model.
      quantize: None (float32), "bfloat16" or "int8": the encoder in that inference form
        (`bert_tf.distillation.inference`; its outputs stay float32), without the masked-LM head.
      litert: a `bert_tf.export.litert.LiteRTConfig`: also write the fine-tuned classifier as
        `litert/classifier.tflite` in that form (a classification or regression directory only; not with
        `quantize`, the LiteRT forms are its own).
      init_from: "checkpoint", or "random": the config's encoder initialised from `seed`, no checkpoint read
        (`ModelSource.init_from`): the random-initialisation baseline as a SavedModel, for hub.KerasLayer.

    A fine-tuned classification (or regression) directory, one with the `task_config.json` of
    `experiments.finetune`, also gets `classifier/`: a SavedModel that takes raw text and returns label
    scores and names (`bert_tf.export.classifier_module`), reading a long text as the recorded `--long_text`
    did. `litert` refuses a directory fine-tuned with --long_text other than truncate.

    Returns:
      {"encoder": path, "preprocess": path, ("classifier": path, "litert": path,) "verified": one line of what `verify`
      checked (None without it)}.
    """
    from bert_tf.checkpoints import model_dir as model_dir_lib
    from bert_tf.checkpoints import weights_file
    from bert_tf.checkpoints.model_source import ModelSource

    # The one resolver and rule of the jobs: the preprocessor needs every special token.
    random = init_from == "random"
    source = ModelSource(
        model_dir, init_checkpoint, bert_config_file, vocab_file, lower_case, init_from=init_from
    ).resolve(need_checkpoint=not random)
    checkpoint = init_checkpoint
    config, vocab_file = source.config, source.vocab_file

    # A directory written without TensorFlow (say, fine-tuned on JAX) holds weights.safetensors alone.
    use_weights_file = not random and checkpoint is None and model_dir_lib.uses_weights_file(model_dir, None)
    if not use_weights_file and not random:
        checkpoint = find_checkpoint(checkpoint or model_dir)
    check_seq_length(max_seq_length, config)
    _check_destination(os.path.abspath(export_dir), overwrite)  # fail before the slow part

    if random:
        import keras

        keras.utils.set_random_seed(seed)
        with_mlm = False
    elif use_weights_file:
        checkpoint = weights_file.weights_path(model_dir)
        with_mlm = include_mlm and weights_file.has_pretraining_heads(model_dir)
    else:
        with_mlm = include_mlm and has_pretraining_heads(checkpoint)
    with_mlm = with_mlm and not quantize
    model = BertPretrainer(BertEncoder(config)) if with_mlm else BertEncoder(config)
    if use_weights_file:
        weights_file.load_weights_file(model, model_dir)
    elif not random:
        restore(model, checkpoint)
    task_config = None if random else _read_task_config(model_dir)
    classifier = None
    classifier_tasks = _classifier_tasks()
    is_classifier = bool(task_config) and task_config.get("task") in classifier_tasks
    is_tagger = bool(task_config) and task_config.get("task") == TAGGING_TASK
    long_text = _recorded_long_text(task_config, model_dir) if is_classifier or is_tagger else None
    if litert is not None:
        _check_litert(task_config, classifier_tasks, model_dir, quantize, long_text)
    tagger = None
    if is_classifier:
        classifier = _restore_classifier(config, task_config, long_text, checkpoint, model_dir, use_weights_file)
    elif is_tagger and not quantize:
        tagger = _restore_tagger(config, task_config, checkpoint, model_dir, use_weights_file)
    elif task_config:
        logging.warning(
            "%s is a fine-tuned %s model: only its encoder is exported (a servable model is written for %s).",
            model_dir,
            task_config.get("task"),
            ", ".join(classifier_tasks + [TAGGING_TASK]),
        )
    if quantize:
        from bert_tf.distillation.inference import inference_form

        model = inference_form(model, quantize)
        if classifier is not None:
            classifier = inference_form(classifier, quantize)
    weights = f"random weights (seed {seed})" if random else checkpoint
    logging.info("Exporting %s (%s) to %s", weights, "encoder + mlm" if with_mlm else "encoder", export_dir)

    checked = []
    with atomic_directory(export_dir, overwrite) as tmp_dir:
        _save_encoder(model, os.path.join(tmp_dir, ENCODER_SUBDIR), vocab_file, include_mlm, verify=False)
        if verify:
            diff = verify_encoder_export(model, os.path.join(tmp_dir, ENCODER_SUBDIR))
            checked.append(f"encoder reproduces the Keras model (max |diff| {diff:.1e})")
        _save_preprocessor(vocab_file, lower_case, max_seq_length, os.path.join(tmp_dir, PREPROCESS_SUBDIR))
        if classifier is not None:
            checked.append(
                _save_classifier(
                    classifier,
                    task_config,
                    long_text,
                    vocab_file,
                    lower_case,
                    os.path.join(tmp_dir, CLASSIFIER_SUBDIR),
                    verify,
                )
            )
        if tagger is not None:
            checked.append(
                _save_tagger(
                    tagger, task_config, long_text, vocab_file, lower_case, os.path.join(tmp_dir, TAGGER_SUBDIR), verify
                )
            )
        if litert is not None:
            from bert_tf.export import litert as litert_lib

            saved_model = os.path.join(tmp_dir, CLASSIFIER_SUBDIR) if verify else None
            path = os.path.join(tmp_dir, litert_lib.LITERT_SUBDIR)
            checked.append(
                litert_lib.export_litert(classifier, task_config, vocab_file, lower_case, path, litert, saved_model)
            )
    export_dir = os.path.abspath(export_dir)
    paths = {
        "encoder": os.path.join(export_dir, ENCODER_SUBDIR),
        "preprocess": os.path.join(export_dir, PREPROCESS_SUBDIR),
    }
    if classifier is not None:
        paths["classifier"] = os.path.join(export_dir, CLASSIFIER_SUBDIR)
    if tagger is not None:
        paths["tagger"] = os.path.join(export_dir, TAGGER_SUBDIR)
    if litert is not None:
        paths["litert"] = os.path.join(export_dir, "litert", "classifier.tflite")
    paths["verified"] = "; ".join(checked) if verify else None
    return paths


# --- servable classifier of a fine-tuned model directory ---------------------------------


def _recorded_long_text(task_config: dict, model_dir: str):
    """The `LongTextConfig` a classifier or tagger was fine-tuned with (task_config.json's `long_text`; none:
    truncate), checked against its `max_seq_length`; a bad one is a JobArgumentError naming the file."""
    from bert_tf.checkpoints.model_source import TASK_CONFIG_NAME
    from bert_tf.errors import JobArgumentError
    from bert_tf.tasks.long_text import LongTextConfig

    source = os.path.join(model_dir, TASK_CONFIG_NAME)
    long_text = LongTextConfig.from_recorded(task_config.get("long_text"), source)
    try:
        long_text.check_window(int(task_config["max_seq_length"]))
    except JobArgumentError as e:
        raise JobArgumentError(f"{source}: {e}") from None
    if long_text.long_text != "truncate" and task_config.get("sentence_pair"):
        raise JobArgumentError(f"{source}: --long_text={long_text.long_text} is for single texts, not sentence pairs.")
    if long_text.long_text == "head_tail" and task_config.get("task") == TAGGING_TASK:
        raise JobArgumentError(
            f"{source}: --long_text=head_tail drops the middle of a sentence; a tagger tags every word."
        )
    return long_text


def _read_task_config(model_dir: str | None) -> dict | None:
    from bert_tf.checkpoints.model_source import read_task_config

    return read_task_config(model_dir) if model_dir else None


def _check_litert(task_config: dict | None, classifier_tasks: list, model_dir: str | None, quantize, long_text) -> None:
    """Refuses a LiteRT export that cannot be written, before the slow part."""
    if not task_config or task_config.get("task") not in classifier_tasks:
        raise ValueError(
            f"--litert: {model_dir} is not a fine-tuned {' or '.join(classifier_tasks)} directory "
            "(no task_config.json of one); LiteRT export writes a classifier."
        )
    if quantize:
        raise ValueError("--litert converts the float32 model in its own forms; leave out --quantize.")
    if long_text.long_text != "truncate":
        raise ValueError(
            f"--litert: {model_dir} was fine-tuned with --long_text={long_text.long_text}; the LiteRT classifier "
            "reads a text's first pieces only (truncate). Export without --litert: the SavedModel classifier "
            f"serves --long_text={long_text.long_text}."
        )


def _classifier_tasks() -> list:
    """The registered fine-tuning tasks (`FinetuningTask.exports_as_classifier`) whose model `export_model_dir`
    also writes as a servable classifier."""
    from bert_tf.tasks import registry

    return [name for name in registry.task_names() if registry.task_class(name).exports_as_classifier]


def _restore_classifier(config, task_config: dict, long_text, checkpoint: str, model_dir: str, use_weights_file: bool):
    """The fine-tuned model of `model_dir` with its weights: a `BertClassifier`, or with `long_text` windows the
    `DocumentClassifier` with its pooling."""
    from bert_tf.checkpoints import weights_file
    from bert_tf.models import BertClassifier, DocumentClassifier

    labels = task_config.get("label_list")  # None: one score (regression)
    num_classes = 1 if labels is None else len(labels)
    if long_text.windows:
        classifier = DocumentClassifier(BertEncoder(config), num_classes, pooling=long_text.window_pooling)
    else:
        classifier = BertClassifier(BertEncoder(config), num_classes=num_classes)
    if use_weights_file:
        weights_file.load_weights_file(classifier, model_dir)
    else:
        restore(classifier, checkpoint)
    return classifier


def _restore_tagger(config, task_config: dict, checkpoint: str, model_dir: str, use_weights_file: bool):
    """The fine-tuned `BertTokenClassifier` of a tagging `model_dir` with its weights."""
    from bert_tf.checkpoints import weights_file
    from bert_tf.models import BertTokenClassifier

    tagger = BertTokenClassifier(BertEncoder(config), num_labels=len(task_config["label_list"]))
    if use_weights_file:
        weights_file.load_weights_file(tagger, model_dir)
    else:
        restore(tagger, checkpoint)
    return tagger


def _save_tagger(tagger, task_config, long_text, vocab_file, lower_case, path, verify) -> str:
    """Writes the servable tagger SavedModel to `path`; returns one line of what was checked."""
    from bert_tf.export.classifier_module import custom_ops
    from bert_tf.export.tagger_module import TaggerModule
    from bert_tf.tokenization import BertTokenizer

    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
    seq_length = int(task_config["max_seq_length"])
    module = TaggerModule(tagger, tokenizer, task_config["label_list"], seq_length, long_text)
    with _without_capture_rename_notes():
        module.save(path)
    ops = custom_ops(path)
    extra_dir = os.path.join(path, EXTRA_ASSETS_DIR)
    os.makedirs(extra_dir, exist_ok=True)
    file_io.write_json(os.path.join(extra_dir, "task_config.json"), task_config)
    file_io.write_text(os.path.join(extra_dir, REQUIRED_OPS_NAME), "".join(f"{op}\n" for op in ops))
    windows = f", --long_text=windows (--window_stride={long_text.stride(seq_length - 2)})"
    what = "tagger serving_default(text)" + (windows if long_text.windows else "")
    if not verify:
        return what
    texts = list(VERIFY_TEXTS)
    if long_text.windows:  # a sentence of several windows at any seq_length
        texts.append(" ".join([VERIFY_TEXTS[-1]] * (seq_length // 4 + 1)))
    texts = tf.constant(texts)
    got = tf.saved_model.load(path).signatures["serving_default"](text=texts)
    expected = module.tag(texts)
    same = all(np.array_equal(got[k].numpy(), expected[k].numpy()) for k in ("words", "tags", "num_words"))
    diff = float(np.max(np.abs(got["scores"].numpy() - expected["scores"].numpy())))
    if not same or diff > VERIFY_TOLERANCE:
        raise ValueError(f"The tagger SavedModel written to {path} does not reproduce the Keras model.")
    return f"{what} on {len(texts)} texts reproduces the Keras model (max |diff| of the scores {diff:.1e})"


def _save_classifier(classifier, task_config, long_text, vocab_file, lower_case, path, verify) -> str:
    """Writes the servable classifier SavedModel to `path`; returns one line of what was checked."""
    from tensorflow.python.framework import op_def_registry

    from bert_tf.export.classifier_module import ClassifierModule, custom_ops
    from bert_tf.tokenization import BertPreprocessor

    seq_length = int(task_config["max_seq_length"])
    sentence_pair = bool(task_config.get("sentence_pair"))
    labels = task_config.get("label_list")  # None: one score (regression)
    preprocessor = BertPreprocessor(vocab_file, lower_case=lower_case, default_seq_length=seq_length)
    module = ClassifierModule(classifier, preprocessor, labels, seq_length, sentence_pair, long_text)
    with _without_capture_rename_notes():
        module.save(path)
    ops = custom_ops(path)
    unregistered = [op for op in ops if op_def_registry.get(op) is None]
    if unregistered:
        raise ValueError(f"The classifier SavedModel uses ops that no loaded library registers: {unregistered}.")
    extra_dir = os.path.join(path, EXTRA_ASSETS_DIR)
    os.makedirs(extra_dir, exist_ok=True)
    file_io.write_json(os.path.join(extra_dir, "task_config.json"), task_config)
    file_io.write_text(os.path.join(extra_dir, REQUIRED_OPS_NAME), "".join(f"{op}\n" for op in ops))
    logging.info("The classifier needs these TF Text ops in a server: %s (import tensorflow_text).", ", ".join(ops))
    what = f"classifier serving_default({'text, text_b' if sentence_pair else 'text'})" + _describe_long_text(long_text)
    if not verify:
        return what
    texts = list(VERIFY_TEXTS)
    if long_text.long_text != "truncate":  # a text of several windows at any seq_length
        texts.append(" ".join([VERIFY_TEXTS[-1]] * (seq_length // 4 + 1)))
    diff = _verify_classifier(module, path, sentence_pair, texts)
    return f"{what} on {len(texts)} texts reproduces the Keras model (max |diff| {diff:.1e}); " + (
        f"needs TF Text ops {', '.join(ops)}, all registered" if ops else "needs no op outside core TensorFlow"
    )


def _describe_long_text(long_text) -> str:
    """How the servable cuts a long text, for the export's report."""
    if long_text.long_text == "truncate":
        return ""
    if long_text.long_text == "head_tail":
        return ", --long_text=head_tail"
    stride = f"--window_stride={long_text.window_stride}, " if long_text.window_stride else ""
    return (
        f", --long_text=windows ({stride}--window_pooling={long_text.window_pooling}, "
        f"--max_windows={long_text.max_windows})"
    )


def _verify_classifier(module, path, sentence_pair, texts) -> float:
    """Reloads `path`, calls `serving_default` with raw strings and compares with the Keras model's scores."""
    texts = tf.constant(texts)
    inputs = {"text": texts, "text_b": tf.reverse(texts, [0])} if sentence_pair else {"text": texts}
    got = tf.saved_model.load(path).signatures["serving_default"](**inputs)
    expected = module._scores(list(inputs.values()))
    diff = float(np.max(np.abs(got["scores"].numpy() - expected["scores"].numpy())))
    if diff > VERIFY_TOLERANCE or ("label" in got and list(got["label"].numpy()) != list(expected["label"].numpy())):
        raise ValueError(
            f"The classifier SavedModel written to {path} does not reproduce the Keras model "
            f"(max |difference| of the scores {diff:.3g})."
        )
    return diff


def _check_file(path: str, argument: str) -> str:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{argument}: file not found: {path}")
    return path
