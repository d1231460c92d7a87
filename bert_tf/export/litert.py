"""A LiteRT (TFLite) classifier that takes raw text: the WordPiece tokenizer inside, TF Text custom ops only.

`classifier.tflite` holds the whole servable classifier of a fine-tuned directory in one file: a string (and a
`text_b` for sentence pairs) in, the softmax scores and the label id out. Its `serving_default` signature:

    inputs:  text      tf.string [batch]             (and `text_b` for sentence-pair models)
    outputs: scores    float32 [batch, num_labels]   softmax (regression: [batch, 1], the prediction)
             label_id  int32 [batch]                 the most probable label's index (not for regression)
             input_word_ids int32 [batch, seq_length] the packed WordPiece ids, for checking the tokenizer

The text is tokenized by `bert_tf.export.litert_tokenizer.LiteRTTokenizer` (TF Text's `FastBertNormalize` with
the in-graph tokenizer's normalization table, then `FastWordpieceTokenizeWithOffsets`, with TF Text's byte
splitter and, uncased, its WordPiece detokenizer for the capital sigmas: TF Text ops that LiteRT runs as custom
ops) and packed with built-in ops, so the file needs LiteRT's built-in ops and the TF Text ops
listed in `required_ops.txt` beside it, never the Flex (TF Select) delegate. Run it with `interpreter(path)`,
which registers TF Text's ops in the `ai-edge-litert` interpreter.

Forms (`FORMS`): "float32"; "dynamic_int8" (int8 weights, float activations, and the word-embedding table, most
of a small model's bytes, at 4 bits a value with a scale per row: `Int4WordEmbedding`); "full_int8" (int8
weights and activations, calibrated on training texts; the tokenizer, the softmax and the inputs and outputs stay
as they are). The tokenizer's tables are the same in every form (about 2 MB for a 30,522-token vocabulary).

It gives the in-graph tokenizer's ids (`bert_tf.tokenization.BertTokenizer`) but in the cases
`litert_tokenizer.CONTEXT_DIFFERENCES` lists (NFC composing a letter and a mark, invalid UTF-8).

    >>> from bert_tf.export import litert  # doctest: +SKIP
    >>> runner = litert.interpreter("export/litert/classifier.tflite").get_signature_runner()  # doctest: +SKIP
    >>> runner(text=np.array(["great taste"], object))["scores"]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings

import numpy as np
import tensorflow as tf

from bert_tf.export.encoder_module import _tf_variables

LITERT_SUBDIR = "litert"
MODEL_NAME = "classifier.tflite"
REQUIRED_OPS_NAME = "required_ops.txt"
FORMS = ("float32", "dynamic_int8", "full_int8")
# Float32 LiteRT against the SavedModel: the kernels differ (fused, reordered), not the arithmetic's precision.
FLOAT32_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class LiteRTConfig:
    """How the LiteRT classifier is written.

    Attributes:
      form: one of `FORMS`.
      calibration_texts: "full_int8" only: texts (or (text, text_b) pairs) the activations' ranges are measured
        on; a few hundred training texts are plenty.
    """

    form: str = "float32"
    calibration_texts: tuple = ()

    def __post_init__(self):
        if self.form not in FORMS:
            raise ValueError(f"LiteRT form must be one of {', '.join(FORMS)}, got {self.form!r}.")
        if self.form == "full_int8" and not self.calibration_texts:
            raise ValueError("The full_int8 LiteRT form needs calibration texts (--calibration_examples > 0).")


class LiteRTClassifierModule(tf.Module):
    """Text in, scores out, in the ops LiteRT runs (see the module docstring).

    Args:
      classifier: a fine-tuned Keras `BertClassifier`.
      vocab: the vocabulary's tokens in id order.
      lower_case: the model's casing.
      label_list: label names in id order; None for regression.
      seq_length: the packed length (the fine-tuning `max_seq_length`).
      sentence_pair: whether the model takes `text_b`.

    Example:

    >>> from bert_tf import BertConfig
    >>> from bert_tf.models import BertClassifier, BertEncoder
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "great", "taste", "##s"]
    >>> config = BertConfig(vocab_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    ...                     intermediate_size=32)
    >>> classifier = BertClassifier(BertEncoder(config), num_classes=2)
    >>> module = LiteRTClassifierModule(classifier, vocab, True, ["bad", "good"], seq_length=8)
    >>> runner = interpreter(convert(module, LiteRTConfig("float32"))).get_signature_runner()
    >>> outputs = runner(text=np.array(["Great tastes!"], object))
    >>> outputs["input_word_ids"].tolist(), outputs["scores"].shape
    ([[2, 5, 6, 7, 1, 3, 0, 0]], (1, 2))
    """

    def __init__(self, classifier, vocab, lower_case, label_list, seq_length, sentence_pair=False):
        super().__init__(name="litert_classifier")
        from bert_tf.export.litert_tokenizer import LiteRTTokenizer
        from bert_tf.tokenization import vocab as vocab_lib

        self.classifier_variables = _tf_variables(classifier.variables)
        object.__setattr__(self, "_classifier", classifier)
        self._tokenizer = LiteRTTokenizer(vocab, lower_case)
        ids = {token: i for i, token in enumerate(vocab)}
        self._cls, self._sep, self._pad = (
            ids[t] for t in (vocab_lib.CLS_TOKEN, vocab_lib.SEP_TOKEN, vocab_lib.PAD_TOKEN)
        )
        self.regression = label_list is None
        self.seq_length = int(seq_length)
        self.sentence_pair = bool(sentence_pair)

    def _segment(self, texts):
        """(flat ids with a trailing [PAD], row starts, row lengths), all int32: the tokens without raggedness."""
        ids, splits = self._tokenizer(texts)
        values = tf.concat([ids, [self._pad]], axis=0)
        return values, splits[:-1], splits[1:] - splits[:-1]

    def pack(self, texts):
        """[CLS] a [SEP] (b [SEP]) padded to `seq_length`, the longer text trimmed first (TF Text's round robin)."""
        segments = [self._segment(t) for t in texts]
        budget = self.seq_length - len(segments) - 1
        if len(segments) == 1:
            kept = [tf.minimum(segments[0][2], budget)]
        else:
            len_a, len_b = segments[0][2], segments[1][2]
            kept_a = tf.minimum(len_a, tf.maximum((budget + 1) // 2, budget - len_b))
            kept = [kept_a, tf.minimum(len_b, budget - kept_a)]
        position = tf.range(self.seq_length, dtype=tf.int32)[tf.newaxis, :]
        word_ids = tf.fill(tf.shape(position + kept[0][:, tf.newaxis]), self._pad)
        type_ids = tf.zeros_like(word_ids)
        start = tf.ones_like(kept[0])  # where the current segment's first token goes
        for index, ((values, row_start, _), count) in enumerate(zip(segments, kept)):
            offset = position - start[:, tf.newaxis]
            inside = (offset >= 0) & (offset < count[:, tf.newaxis])
            source = tf.clip_by_value(row_start[:, tf.newaxis] + offset, 0, tf.shape(values)[0] - 1)
            word_ids = tf.where(inside, tf.gather(values, source), word_ids)
            end = start + count
            word_ids = tf.where(position == end[:, tf.newaxis], self._sep, word_ids)
            if index:
                type_ids = tf.where((offset >= 0) & (position <= end[:, tf.newaxis]), 1, type_ids)
            start = end + 1
        word_ids = tf.where(position == 0, self._cls, word_ids)
        mask = tf.cast(position < start[:, tf.newaxis], tf.int32)
        return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}

    def outputs(self, texts):
        inputs = self.pack(texts)
        logits = tf.cast(self._classifier(inputs, training=False), tf.float32)
        if self.regression:
            return {"scores": logits, "input_word_ids": inputs["input_word_ids"]}
        scores = tf.nn.softmax(logits, axis=-1)
        label_id = tf.argmax(scores, axis=-1, output_type=tf.int32)
        return {"scores": scores, "label_id": label_id, "input_word_ids": inputs["input_word_ids"]}

    def serving_function(self):
        """The concrete `serving_default` (batch of strings in; see the module docstring)."""
        strings = tf.TensorSpec([None], tf.string)
        if self.sentence_pair:

            @tf.function(input_signature=[strings, strings], autograph=False)
            def serve(text, text_b):
                return self.outputs([text, text_b])

        else:

            @tf.function(input_signature=[strings], autograph=False)
            def serve(text):
                return self.outputs([text])

        return serve.get_concrete_function()


class Int4WordEmbedding:
    """A word-embedding table at 4 bits a value, looked up in LiteRT built-in ops (dynamic_int8's table).

    Each row is scaled to its largest |value| / 7 and rounded to -8..7; two values share a byte (uint8
    [vocab, ceil(hidden / 2)]: the even column + 8 in the low half, the odd one + 8 in the high half), and the
    row's scale is kept in fixed point (int32, 2**-`SCALE_BITS` units: the converter's int8 weights would cost
    small rows their precision). Only the looked-up rows are unpacked, so LiteRT holds the table packed.

    Args:
      table: float32 [vocab, hidden].

    Call: int ids [...] -> float32 [..., hidden].
    """

    SCALE_BITS = 30

    def __init__(self, table):
        table = np.asarray(table, np.float32)
        self.hidden = table.shape[1]
        peak = np.max(np.abs(table), axis=1)
        scale = np.where(peak > 0, peak / 7, 1.0)
        values = np.clip(np.round(table / scale[:, None]), -8, 7).astype(np.int32) + 8
        values = np.pad(values, [(0, 0), (0, self.hidden % 2)], constant_values=8)
        self.packed = (values[:, 0::2] | values[:, 1::2] << 4).astype(np.uint8)
        self.fixed_scale = np.round(scale * 2.0**self.SCALE_BITS).astype(np.int32)

    def dequantized(self) -> np.ndarray:
        """float32 [vocab, hidden]: the values the lookup gives (for checks)."""
        return self(np.arange(self.packed.shape[0])).numpy()

    def __call__(self, ids):
        ids = tf.cast(ids, tf.int32)
        rows = tf.cast(tf.gather(tf.constant(self.packed), ids), tf.int32)
        values = tf.stack([rows % 16, rows // 16], axis=-1)
        values = tf.reshape(values, tf.concat([tf.shape(ids), [-1]], axis=0))[..., : self.hidden]
        scale = tf.cast(tf.gather(tf.constant(self.fixed_scale), ids), tf.float32) * 2.0**-self.SCALE_BITS
        return (tf.cast(values, tf.float32) - 8.0) * scale[..., tf.newaxis]


@contextlib.contextmanager
def _word_embeddings_looked_up_by(classifier, lookup):
    """Within: `classifier`'s word-embedding layer returns `lookup(ids)` (while the serving function is traced)."""
    layer = classifier.encoder.token_embedding
    layer.call = lookup
    try:
        yield
    finally:
        del layer.call


def convert(module: LiteRTClassifierModule, config: LiteRTConfig) -> bytes:
    """The flatbuffer of `module` in `config.form`: built-in ops and TF Text's custom ops, variables frozen."""
    import tempfile

    with tempfile.TemporaryDirectory() as saved_model_dir:
        # Through a SavedModel: the converter then freezes the variables into constants (converting the Keras
        # model directly can keep them as resource variables that the interpreter never initialises).
        lookup = contextlib.nullcontext()
        if config.form == "dynamic_int8":
            table = Int4WordEmbedding(module._classifier.encoder.token_embedding.embeddings.numpy())
            lookup = _word_embeddings_looked_up_by(module._classifier, table)
        with lookup:
            serving = module.serving_function()
        tf.saved_model.save(module, saved_model_dir, signatures={"serving_default": serving})
        converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True  # TF Text's, registered at run time by `interpreter`
        if config.form != "float32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if config.form == "full_int8":
            converter.representative_dataset = _representative_dataset(config.calibration_texts, module.sentence_pair)
            # The calibrator runs the model, so it needs TF Text's ops too (a private hook of the converter).
            converter.target_spec._experimental_custom_op_registerers = _registerers()
        with warnings.catch_warnings():
            # The calibrator runs the model in TensorFlow's own (deprecated) interpreter; nothing a user can change.
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
            return converter.convert()


def calibration_texts(task_config: dict, train_file: str, count: int, seed: int = 0) -> tuple:
    """`count` texts (or (text, text_b) pairs) drawn at random from the fine-tuning `train_file`.

    The file is read as fine-tuning read it: the columns and format recorded in the directory's task_config.json.
    Errors name the file and line (`bert_tf.errors.DataError`).
    """
    import types

    from bert_tf.data.finetuning_data import TextExamplesReader

    recorded = task_config.get("data") or {}
    # The reader takes any object with the data config's fields (jobs/ is above export/).
    data = types.SimpleNamespace(
        tfds_name=None, tfds_data_dir=None, label_column=None, text_a_column=None, text_b_column=None
    )
    data.file_format, data.has_header = None, True
    vars(data).update({k: v for k, v in recorded.items() if k in _TEXT_DATA_SETTINGS})
    pairs = bool(task_config.get("sentence_pair"))
    reader = TextExamplesReader(task_config["task"], data, pairs=pairs, regression=task_config["task"] == "regression")
    examples = reader.read("predict", train_file)
    chosen = np.random.default_rng(seed).permutation(len(examples))[:count]
    return tuple((examples[i].text_a, examples[i].text_b) if pairs else examples[i].text_a for i in sorted(chosen))


_TEXT_DATA_SETTINGS = ("text_a_column", "text_b_column", "file_format", "has_header")


def _representative_dataset(texts, sentence_pair):
    def generate():
        for example in texts:
            pair = example if sentence_pair else (example,)
            yield {name: np.array([text], object) for name, text in zip(("text", "text_b"), pair)}

    return generate


def _registerers() -> list:
    import tensorflow_text

    return list(tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)


def interpreter(model, num_threads: int | None = None):
    """An `ai_edge_litert` interpreter of `model` (a .tflite path or its bytes) with TF Text's ops registered."""
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    source = {"model_content": model} if isinstance(model, bytes) else {"model_path": os.fspath(model)}
    return InterpreterWithCustomOps(custom_op_registerers=_registerers(), num_threads=num_threads, **source)


def run(runner, texts, text_b=None) -> dict:
    """Calls a signature runner on Python strings, one text at a time (a phone's call); numpy outputs stacked."""
    rows = []
    for index, text in enumerate(texts):
        inputs = {"text": np.array([text], object)}
        if text_b is not None:
            inputs["text_b"] = np.array([text_b[index]], object)
        rows.append(runner(**inputs))
    return {name: np.concatenate([row[name] for row in rows]) for name in rows[0]}


def required_ops(model: bytes) -> list[str]:
    """The operators `model` uses, sorted: built-ins by name, custom ops by theirs (TF Text's)."""
    from tensorflow.lite.python import schema_py_generated as schema

    names = {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    parsed = schema.Model.GetRootAsModel(model, 0)
    ops = set()
    for index in range(parsed.OperatorCodesLength()):
        code = parsed.OperatorCodes(index)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            ops.add(code.CustomCode().decode())
        else:
            ops.add(names[builtin])
    return sorted(ops)


# --- from a fine-tuned model directory (`bert_tf.export.exporter.export_model_dir`) ------------------------------


def export_litert(
    classifier,
    task_config: dict,
    vocab_file: str,
    lower_case: bool,
    path: str,
    config: LiteRTConfig,
    saved_model: str | None = None,
) -> str:
    """Writes `path/classifier.tflite`, `required_ops.txt` and `task_config.json`; returns what was checked.

    Args:
      classifier: the fine-tuned Keras `BertClassifier` (float32).
      task_config: the directory's task_config.json (labels, `max_seq_length`, `sentence_pair`).
      vocab_file, lower_case: the model's vocabulary and casing.
      path: the directory to create.
      config: the LiteRT form.
      saved_model: the servable classifier SavedModel to compare with (`verify_litert`); None: no check.

    Raises:
      ValueError: the model needs a Flex op, or it does not reproduce `saved_model`.
    """
    from bert_tf import file_io
    from bert_tf.tokenization.vocab import load_vocab

    module = LiteRTClassifierModule(
        classifier,
        load_vocab(vocab_file),
        lower_case,
        task_config.get("label_list"),
        int(task_config["max_seq_length"]),
        bool(task_config.get("sentence_pair")),
    )
    model = convert(module, config)
    ops = required_ops(model)
    flex = [op for op in ops if op.startswith("Flex")]
    if flex:
        raise ValueError(f"The LiteRT classifier needs Flex (TF Select) ops {flex}; a phone build would not run it.")
    os.makedirs(path, exist_ok=True)
    model_path = os.path.join(path, MODEL_NAME)
    with open(model_path, "wb") as f:
        f.write(model)
    file_io.write_text(os.path.join(path, REQUIRED_OPS_NAME), _ops_listing(ops))
    file_io.write_json(os.path.join(path, "task_config.json"), task_config)
    what = f"LiteRT {config.form} {MODEL_NAME} ({len(model) / 2**20:.1f} MiB, no Flex ops)"
    if saved_model is None:
        return what
    return f"{what}: {verify_litert(model_path, saved_model, vocab_file, lower_case, config.form)}"


def _ops_listing(ops: list[str]) -> str:
    custom = [op for op in ops if not op.isupper()]
    builtin = [op for op in ops if op.isupper()]
    return (
        "# TF Text custom ops (tensorflow_text's TFLite registrar; on a phone, TF Text's LiteRT op library):\n"
        + "".join(f"{op}\n" for op in custom)
        + "# LiteRT built-in ops (a selective build needs these):\n"
        + "".join(f"{op}\n" for op in builtin)
    )


def verify_litert(model_path: str, saved_model: str, vocab_file: str, lower_case: bool, form: str) -> str:
    """Runs `model_path` in the LiteRT interpreter on the export check's texts; compares with `saved_model`.

    The packed ids must equal the in-graph preprocessor's; float32 scores must be within `FLOAT32_TOLERANCE` of
    the SavedModel's with the same labels (the int8 forms' differences are reported). Returns one line.
    """
    from bert_tf.export.classifier_module import VERIFY_TEXTS
    from bert_tf.tokenization import BertPreprocessor

    signature = tf.saved_model.load(saved_model).signatures["serving_default"]
    pair = "text_b" in signature.structured_input_signature[1]
    texts = list(VERIFY_TEXTS)
    text_b = texts[::-1] if pair else None
    inputs = {"text": tf.constant(texts)} | ({"text_b": tf.constant(text_b)} if pair else {})
    expected = {name: value.numpy() for name, value in signature(**inputs).items()}
    got = run(interpreter(model_path).get_signature_runner("serving_default"), texts, text_b)
    seq_length = got["input_word_ids"].shape[1]
    preprocessor = BertPreprocessor(vocab_file, lower_case=lower_case, default_seq_length=seq_length)
    packed = preprocessor.bert_pack_inputs([preprocessor.tokenize(t) for t in inputs.values()])
    if not np.array_equal(got["input_word_ids"], packed["input_word_ids"].numpy()):
        raise ValueError(
            f"The LiteRT classifier {model_path} tokenizes the check's texts otherwise than the preprocessor."
        )
    diff = float(np.max(np.abs(got["scores"] - expected["scores"])))
    same = "label_id" not in got or np.array_equal(got["label_id"], expected["label_id"])
    if form == "float32" and (diff > FLOAT32_TOLERANCE or not same):
        raise ValueError(
            f"The LiteRT classifier {model_path} does not reproduce the SavedModel classifier "
            f"(max |difference| of the scores {diff:.3g} > {FLOAT32_TOLERANCE:g}, same labels: {same})."
        )
    agreement = "same labels" if same else "some labels differ"
    return f"{len(texts)} texts: the preprocessor's ids, scores within {diff:.1e} of the SavedModel's, {agreement}"
