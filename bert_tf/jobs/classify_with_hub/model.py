"""The TF Hub BERT classifier (text -> preprocess -> encoder -> dropout -> sigmoid) and its packed form.

tf_keras layers and models; TensorFlow is imported inside the functions (see the package docstring).
"""

from __future__ import annotations

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
EXAMPLE_IDS_KEY = "input_example_ids"  # bert_tf.models.EXAMPLE_IDS_KEY (importing it would load Keras 3)
DROPOUT_RATE = 0.1


def build_classifier(preprocess_dir, encoder_dir, bucket_width=0, seq_length=0):
    """The TF Hub BERT classifier: text [batch] -> sigmoid scores [batch, 1].

    `bucket_width` > 0: the preprocessing packs each batch to the smallest multiple of it that holds the
    batch's longest text, at most `seq_length` (0: the preprocessing model's default length); 0: every batch
    at the exported length, as the notebook.
    """
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the preprocessing model's ops, as for TF Hub's BERT)

    if bucket_width:
        bert_preprocess = BucketedPreprocessing(preprocess_dir, bucket_width, seq_length, name="preprocessing")
    else:
        bert_preprocess = hub.KerasLayer(preprocess_dir, name="preprocessing")
    bert_encoder = hub.KerasLayer(encoder_dir, trainable=True, name="encoder")
    text_input = tf.keras.layers.Input(shape=(), dtype=tf.string, name="text")
    outputs = bert_encoder(bert_preprocess(text_input))
    x = tf.keras.layers.Dropout(DROPOUT_RATE, name="dropout")(outputs["pooled_output"])
    x = tf.keras.layers.Dense(1, activation="sigmoid", name="classifier")(x)
    return tf.keras.Model(inputs=[text_input], outputs=[x])


def packed_classifier(classifier):
    """`classifier`'s encoder, dropout and head on packed rows: encoder inputs and `input_example_ids`
    [rows, seq_length] -> scores [rows, slots, 1], slot j scoring example j + 1 of its row as if alone (the
    exported encoder's packed input). The layers, so the weights, are `classifier`'s."""
    import tensorflow as tf

    inputs = {
        name: tf.keras.layers.Input(shape=(None,), dtype=tf.int32, name=name)
        for name in ENCODER_KEYS + (EXAMPLE_IDS_KEY,)
    }
    pooled = classifier.get_layer("encoder")(inputs)["pooled_output"]  # [rows, slots, hidden]
    scores = classifier.get_layer("classifier")(classifier.get_layer("dropout")(pooled))
    return tf.keras.Model(inputs=inputs, outputs=scores, name="packed_classifier")


def masked_binary_crossentropy(labels, scores):
    """The mean binary cross-entropy over the filled slots (`labels` >= 0; -1 in an empty slot): the mean over
    the batch's examples, as unpacked.

    `labels` and `scores` are [rows, slots, 1]; the scores are the sigmoid layer's output, whose logits tf_keras
    reads (as for `loss="binary_crossentropy"` unpacked), so keep the ranks equal (no squeeze).
    """
    import tensorflow as tf

    present = tf.cast(labels >= 0, tf.float32)[..., 0]
    losses = tf.keras.losses.binary_crossentropy(tf.maximum(labels, 0.0), scores)  # [rows, slots]
    return tf.reduce_sum(losses * present) / tf.maximum(tf.reduce_sum(present), 1.0)


def masked_binary_accuracy():
    """A tf_keras metric named `accuracy`: the share of filled slots (label >= 0) whose score is on their side
    of 0.5, as `metrics=["accuracy"]` unpacked."""
    import tensorflow as tf

    class MaskedBinaryAccuracy(tf.keras.metrics.Mean):
        def update_state(self, labels, scores, sample_weight=None):
            del sample_weight  # the filled slots are the weights
            correct = tf.cast(tf.equal(labels, tf.cast(scores > 0.5, labels.dtype)), tf.float32)
            return super().update_state(correct, sample_weight=tf.cast(labels >= 0, tf.float32))

    return MaskedBinaryAccuracy(name="accuracy")


def default_seq_length(preprocessor) -> int:
    """The length a TF Hub BERT preprocessor packs to by default (read from its output)."""
    import tensorflow as tf

    return int(preprocessor(tf.constant([""]))["input_word_ids"].shape[1])


def _bucketed_preprocessing_class():
    import tensorflow as tf
    import tensorflow_hub as hub

    class BucketedPreprocessing(tf.keras.layers.Layer):
        """text [batch] -> encoder inputs packed to the batch's bucket length, by a TF Hub preprocessor's API.

        The length is the smallest multiple of `bucket_width` that holds the batch's longest text with [CLS]
        and [SEP], capped at `seq_length` (0: the preprocessor's default length). Bucketing before the
        notebook's packer would save nothing (it pads back to its length), hence `tokenize` then
        `bert_pack_inputs(..., seq_length=)`, which any TF Hub BERT preprocessor has.
        """

        def __init__(self, preprocess_dir, bucket_width, seq_length=0, **kwargs):
            super().__init__(trainable=False, **kwargs)
            self.preprocess_dir = preprocess_dir
            self.bucket_width = int(bucket_width)
            self.preprocessor = hub.load(preprocess_dir)
            self.seq_length = int(seq_length or default_seq_length(self.preprocessor))

        def packed_lengths(self, text):
            """[batch] int32: each text's packed length (pieces + [CLS] + [SEP], at most `seq_length`)."""
            return tf.minimum(tf.cast(self._pieces(text).row_lengths(), tf.int32) + 2, self.seq_length)

        def _pieces(self, text):
            pieces = self.preprocessor.tokenize(text)
            # TF Hub's preprocessors give [batch, words, pieces]; bert_tf's [batch, pieces].
            return pieces.merge_dims(1, -1) if pieces.ragged_rank > 1 else pieces

        def call(self, text):
            pieces = self._pieces(text)
            longest = tf.maximum(tf.reduce_max(tf.cast(pieces.row_lengths(), tf.int32)) + 2, 2)
            bucket = tf.minimum(-(-longest // self.bucket_width) * self.bucket_width, self.seq_length)
            return self.preprocessor.bert_pack_inputs([pieces], seq_length=bucket)

        def get_config(self):
            return dict(
                super().get_config(),
                preprocess_dir=self.preprocess_dir,
                bucket_width=self.bucket_width,
                seq_length=self.seq_length,
            )

    return BucketedPreprocessing


def BucketedPreprocessing(preprocess_dir, bucket_width, seq_length=0, **kwargs):
    """A tf_keras layer: see `_bucketed_preprocessing_class` (defined there so that importing loads no TF)."""
    return _bucketed_preprocessing_class()(preprocess_dir, bucket_width, seq_length, **kwargs)
