"""A servable tagger: a sentence in, its words with their tags and scores out, preprocessing inside.

`TaggerModule` puts the in-graph tokenizer and a fine-tuned `BertTokenClassifier` into one SavedModel whose
`serving_default` signature takes strings:

    inputs:  text       tf.string [batch]               a sentence; words are split on whitespace
    outputs: words      tf.string [batch, max_words]    the sentence's words ("" after the last)
             tags       tf.string [batch, max_words]    each word's tag ("" after the last word)
             scores     float32 [batch, max_words]      the tag's softmax probability (0 after the last word)
             num_words  int32 [batch]

It tags as `experiments.finetune --do_predict` does (`bert_tf.tasks.tagging`): each word is tokenized alone, its
first piece carries its tag, a word keeps at most `seq_length - 2` pieces, a sentence longer than that is cut
into windows at word boundaries, and a word without pieces (only deleted characters) gets the "O" tag (the
first tag without one) with score 0.

    >>> loaded = tf.saved_model.load("export/tagger")  # doctest: +SKIP
    >>> loaded.signatures["serving_default"](text=tf.constant(["Anna lives in Paris"]))["tags"]  # doctest: +SKIP
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.export.encoder_module import _tf_variables


class TaggerModule(tf.Module):
    """The tagger SavedModel object (see the module docstring).

    Args:
      tagger: a fine-tuned Keras `BertTokenClassifier` (logits [batch, seq_length, num_tags]).
      tokenizer: a `bert_tf.tokenization.BertTokenizer` of the model's vocabulary and casing.
      tag_list: the tag names in id order.
      seq_length: the packed length (the fine-tuning `max_seq_length`).
    """

    def __init__(self, tagger, tokenizer, tag_list, seq_length: int):
        super().__init__(name="tagger")
        self.tokenizer = tokenizer  # tracked: its vocabulary asset is saved
        self.tagger_variables = _tf_variables(tagger.variables)
        object.__setattr__(self, "_tagger", tagger)
        self.tag_list = list(tag_list)
        self.default_tag = "O" if "O" in self.tag_list else self.tag_list[0]
        self.seq_length = int(seq_length)
        special = tokenizer.get_special_tokens_dict()
        self._cls, self._sep, self._pad = (
            special[k] for k in ("start_of_sequence_id", "end_of_segment_id", "padding_id")
        )

    def tag(self, texts):
        """tf.string [batch] -> the outputs of the module docstring."""
        words = tf.strings.split(texts)
        room = self.seq_length - 2
        pieces = self.tokenizer(words.flat_values)[:, :room]  # [words, (pieces)]
        counts = tf.cast(pieces.row_lengths(), tf.int32)
        sentence = tf.cast(words.value_rowids(), tf.int32)
        window, start = _windows(counts, sentence, room)
        num_windows = tf.maximum(tf.reduce_max(window) + 1, 1)  # one row when no text has a word
        # Every piece's (window, position) in the packed rows: [CLS] at 0, the pieces from 1.
        piece_window = tf.repeat(window, counts)
        piece_position = 1 + tf.repeat(start, counts) + tf.cast(tf.ragged.range(counts).flat_values, tf.int32)
        ids = (
            tf.scatter_nd(
                tf.stack([piece_window, piece_position], axis=1),
                tf.cast(pieces.flat_values, tf.int32) - self._pad,
                [num_windows, self.seq_length],
            )
            + self._pad
        )
        lengths = tf.math.unsorted_segment_sum(counts, window, num_windows)
        position = tf.range(self.seq_length)[tf.newaxis, :]
        ids = tf.where(position == 0, self._cls, ids)
        ids = tf.where(position == lengths[:, tf.newaxis] + 1, self._sep, ids)
        inputs = {
            "input_word_ids": ids,
            "input_mask": tf.cast(position <= lengths[:, tf.newaxis] + 1, tf.int32),
            "input_type_ids": tf.zeros_like(ids),
        }
        probabilities = tf.nn.softmax(tf.cast(self._tagger(inputs, training=False), tf.float32), axis=-1)
        first_piece = tf.gather_nd(probabilities, tf.stack([window, 1 + start], axis=1))  # [words, tags]
        tag_id = tf.argmax(first_piece, axis=-1, output_type=tf.int32)
        has_pieces = counts > 0
        tags = tf.where(has_pieces, tf.gather(tf.constant(self.tag_list), tag_id), self.default_tag)
        scores = tf.where(has_pieces, tf.reduce_max(first_piece, axis=-1), 0.0)
        return {
            "words": words.to_tensor(""),
            "tags": words.with_flat_values(tags).to_tensor(""),
            "scores": words.with_flat_values(scores).to_tensor(0.0),
            "num_words": tf.cast(words.row_lengths(), tf.int32),
        }

    def serving_signature(self):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def serve(text):
            return self.tag(text)

        return serve.get_concrete_function()

    def save(self, path: str) -> None:
        tf.saved_model.save(self, path, signatures={"serving_default": self.serving_signature()})


def _windows(counts, sentence, room):
    """(window, start) of each word: the packed row it goes to and its first piece's place in the row.

    A sentence's words fill a row while their pieces fit in `room`; the next word opens a new row, and so does a
    new sentence (as `TaggingTask.featurize`). A sequential scan over the batch's words.
    """

    def step(state, word):
        window, fill, last_sentence, _ = state
        count, in_sentence = word
        new_row = tf.logical_or(in_sentence != last_sentence, tf.logical_and(fill > 0, fill + count > room))
        start = tf.where(new_row, 0, fill)
        return tf.where(new_row, window + 1, window), start + count, in_sentence, start

    initial = (tf.constant(-1), tf.constant(0), tf.constant(-1), tf.constant(0))
    window, _, _, start = tf.scan(step, (counts, sentence), initializer=initial)
    return window, start
