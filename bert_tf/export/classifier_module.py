"""A servable classifier: raw text in, label scores and label names out, preprocessing inside.

`ClassifierModule` puts a `BertPreprocessor` and a fine-tuned `BertClassifier` into one SavedModel whose
`serving_default` signature TF Serving (or `tf.saved_model.load`) calls with strings:

    inputs:  text    tf.string [batch]             (the first text)
             text_b  tf.string [batch]             (sentence-pair models only: the second text)
    outputs: scores  float32 [batch, num_labels]   softmax probabilities, in the order of `classes`
             classes tf.string [batch, num_labels] the label names (TF Serving's Classify convention)
             label   tf.string [batch]             the most probable label's name
             label_id int32 [batch]                its index
    regression models: `scores` float32 [batch, 1] (the prediction), no label outputs.

The text is tokenized in the graph (TF Text ops: a server must have them registered, see
`custom_ops`) and cut as fine-tuning's `--long_text` cut it (`bert_tf.tasks.long_text`), whatever its length:
truncate packs it to the fine-tuning `seq_length` with the preprocessor's truncation (sentence pairs: the longer
text first); head_tail keeps its first and last pieces; windows encodes each of its windows (the same starts,
stride and `max_windows`) as a row of one batch, ragged per document, and pools their logits as the
fine-tuned `DocumentClassifier` does. The outputs are per document in every mode. `long_text_config()` (a
function of the SavedModel) returns the settings.

    >>> loaded = tf.saved_model.load("export/classifier")  # doctest: +SKIP
    >>> loaded.signatures["serving_default"](text=tf.constant(["great taste"]))["label"]  # doctest: +SKIP
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.export.encoder_module import _tf_variables
from bert_tf.models.document_classifier import document_logits
from bert_tf.tasks import long_text_ops
from bert_tf.tasks.long_text import LongTextConfig, truncate_unless_given

# Texts the export checks run through a written classifier (SavedModel, LiteRT): empty, short, and longer
# than a small seq_length.
VERIFY_TEXTS = (
    "",
    "A short text.",
    "A longer text, with punctuation; numbers like 3.5 and 42, and words that may not be in the vocabulary "
    "at all, repeated: a longer text, with punctuation, numbers and words.",
)

TEXT = "text"
TEXT_B = "text_b"
_STRINGS = tf.TensorSpec([None], tf.string)


class ClassifierModule(tf.Module):
    """The classifier SavedModel object (see the module docstring).

    Args:
      classifier: the fine-tuned Keras model: a `BertClassifier` (logits [batch, num_labels], or [batch, 1] for
        regression), or with `long_text` windows its `DocumentClassifier`.
      preprocessor: a `bert_tf.tokenization.BertPreprocessor` of the model's vocabulary and casing.
      label_list: the label names in id order; None for a regression model.
      seq_length: the packed length (the fine-tuning `max_seq_length`).
      sentence_pair: whether the model takes two texts (`text`, `text_b`); truncate only.
      long_text: the fine-tuning's `LongTextConfig` (task_config.json's `long_text`); None: truncate.
    """

    def __init__(
        self,
        classifier,
        preprocessor,
        label_list,
        seq_length: int,
        sentence_pair: bool = False,
        long_text: LongTextConfig | None = None,
    ):
        super().__init__(name="classifier")
        self.preprocessor = preprocessor  # tracked: its vocabulary asset and lookup tables are saved
        self.classifier_variables = _tf_variables(classifier.variables)
        object.__setattr__(self, "_classifier", classifier)  # only its tf.Variables are saved
        self.label_list = list(label_list) if label_list else None
        self.seq_length = int(seq_length)
        self.sentence_pair = bool(sentence_pair)
        self.long_text = truncate_unless_given(long_text)
        if sentence_pair and self.long_text.long_text != "truncate":
            raise ValueError(f"--long_text={self.long_text.long_text} is for single texts, not sentence pairs.")
        self.long_text.check_window(self.seq_length)

    @property
    def window(self) -> int:
        """Pieces of text one sequence holds (single texts): `seq_length` less [CLS] and [SEP]."""
        return self.seq_length - 2

    def _pack(self, segments):
        return self.preprocessor.bert_pack_inputs(segments, seq_length=tf.constant(self.seq_length, tf.int32))

    def _logits(self, texts):
        """float32 [documents, num_labels]: the fine-tuned model's logits of each text (pair), cut by `long_text`."""
        segments = [self.preprocessor.tokenize(text) for text in texts]
        mode = self.long_text.long_text
        if mode == "windows":
            return self._window_logits(segments[0])
        if mode == "head_tail":
            segments = [long_text_ops.head_and_tail(segments[0], self.window)]
        return tf.cast(self._classifier(self._pack(segments), training=False), tf.float32)

    def _window_logits(self, pieces):
        """Each document's windows encoded as rows of one batch (only real windows), their [CLS] vectors padded to
        [documents, windows] and pooled into logits as `DocumentClassifier` does (`document_logits`), the
        padding slots masked."""
        config = self.long_text
        windows = long_text_ops.document_windows(
            pieces, self.window, config.stride(self.window), config.max_windows
        )  # [documents, (windows), (pieces)]
        model = self._classifier
        pooled = model.encoder(self._pack([windows.values]), training=False)["pooled_output"]  # [all windows, hidden]
        per_document = tf.RaggedTensor.from_row_splits(pooled, windows.row_splits, validate=False).to_tensor()
        real = windows.with_values(tf.ones_like(windows.values.row_lengths(), tf.int32))
        real = real.to_tensor()[:, :, tf.newaxis]  # [documents, windows, 1]: 1 at a real window's [CLS]
        vectors = tf.reshape(per_document, [-1, pooled.shape[-1]])
        pooling = model.get_layer("window_pooling")
        return tf.cast(document_logits(pooling, model.classifier, vectors, real, training=False), tf.float32)

    def _scores(self, texts):
        logits = self._logits(texts)
        if self.label_list is None:
            return {"scores": logits}
        scores = tf.nn.softmax(logits, axis=-1)
        names = tf.constant(self.label_list)
        label_id = tf.argmax(scores, axis=-1, output_type=tf.int32)
        batch = tf.shape(scores)[0]
        return {
            "scores": scores,
            "classes": tf.tile(names[tf.newaxis, :], [batch, 1]),
            "label": tf.gather(names, label_id),
            "label_id": label_id,
        }

    @tf.function(input_signature=[], autograph=False)
    def long_text_config(self):
        """The fine-tuning's `--long_text` settings the signature cuts texts by: long_text, window_pooling
        (strings), seq_length, window (pieces), window_stride (pieces between starts), max_windows (int32)."""
        config = self.long_text
        return {
            "long_text": tf.constant(config.long_text),
            "window_pooling": tf.constant(config.window_pooling),
            "seq_length": tf.constant(self.seq_length, tf.int32),
            "window": tf.constant(self.window, tf.int32),
            "window_stride": tf.constant(config.stride(self.window), tf.int32),
            "max_windows": tf.constant(config.max_windows, tf.int32),
        }

    def serving_signature(self):
        """The concrete `serving_default`: named string inputs, the outputs of the module docstring."""
        # No autograph: the packing branches on static shapes only (as in `bert_tf.tokenization.preprocessor`).
        if self.sentence_pair:

            @tf.function(input_signature=[_STRINGS, _STRINGS], autograph=False)
            def serve(text, text_b):
                return self._scores([text, text_b])

        else:

            @tf.function(input_signature=[_STRINGS], autograph=False)
            def serve(text):
                return self._scores([text])

        return serve.get_concrete_function()

    def save(self, path: str) -> None:
        """Writes the SavedModel to `path` with its `serving_default` signature.

        Only the signature's packing is traced (not the preprocessing model's every 1-3 segment form, which
        the preprocess/ export keeps): tracing is most of an export's time.
        """
        tf.saved_model.save(self, path, signatures={"serving_default": self.serving_signature()})


def custom_ops(saved_model_dir: str) -> list[str]:
    """The op types a SavedModel uses that core TensorFlow does not register (TF Text's), sorted.

    A server loading the SavedModel needs each of them registered: `import tensorflow_text` in Python, or a
    model server built with TF Text's ops.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(f"{saved_model_dir}/saved_model.pb", "rb") as f:
        saved_model.ParseFromString(f.read())
    ops = set()
    for meta_graph in saved_model.meta_graphs:
        ops.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            ops.update(node.op for node in function.node_def)
    return sorted(op for op in ops if not hasattr(tf.raw_ops, op))
