"""A servable tagger: a sentence in, its words with their tags and scores out, preprocessing inside.

`TaggerModule` puts the in-graph tokenizer and a fine-tuned `BertTokenClassifier` into one SavedModel whose
`serving_default` signature takes strings:

    inputs:  text       tf.string [batch]               a sentence; words are split on whitespace
    outputs: words      tf.string [batch, max_words]    the sentence's words ("" after the last)
             tags       tf.string [batch, max_words]    each word's tag ("" after the last word)
             scores     float32 [batch, max_words]      the tag's softmax probability (0 after the last word)
             num_words  int32 [batch]

It tags as `experiments.finetune --do_predict` does (`bert_tf.tasks.tagging`): each word is tokenized alone, its
first piece carries its tag, a word keeps at most `seq_length - 2` pieces, and a word without pieces (only
deleted characters) gets the "O" tag (the first tag without one) with score 0. A sentence longer than
`seq_length - 2` pieces is cut as fine-tuning's `--long_text` cut it: into rows at word boundaries (truncate), or
into overlapping windows every `--window_stride` pieces, each word tagged from the window where its first piece
has the most context (windows; `bert_tf.tasks.long_text.max_context_windows`, SQuAD's rule).

    >>> loaded = tf.saved_model.load("export/tagger")  # doctest: +SKIP
    >>> loaded.signatures["serving_default"](text=tf.constant(["Anna lives in Paris"]))["tags"]  # doctest: +SKIP
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.errors import JobArgumentError
from bert_tf.export.encoder_module import _tf_variables
from bert_tf.tasks import long_text_ops
from bert_tf.tasks.long_text import LongTextConfig, truncate_unless_given


class TaggerModule(tf.Module):
    """The tagger SavedModel object (see the module docstring).

    Args:
      tagger: a fine-tuned Keras `BertTokenClassifier` (logits [batch, seq_length, num_tags]).
      tokenizer: a `bert_tf.tokenization.BertTokenizer` of the model's vocabulary and casing.
      tag_list: the tag names in id order.
      seq_length: the packed length (the fine-tuning `max_seq_length`).
      long_text: the fine-tuning's `LongTextConfig` (task_config.json's `long_text`); None: truncate.
    """

    def __init__(self, tagger, tokenizer, tag_list, seq_length: int, long_text: LongTextConfig | None = None):
        super().__init__(name="tagger")
        self.tokenizer = tokenizer  # tracked: its vocabulary asset is saved
        self.tagger_variables = _tf_variables(tagger.variables)
        object.__setattr__(self, "_tagger", tagger)
        self.tag_list = list(tag_list)
        self.default_tag = "O" if "O" in self.tag_list else self.tag_list[0]
        self.seq_length = int(seq_length)
        self.long_text = truncate_unless_given(long_text)
        if self.long_text.long_text == "head_tail":
            raise JobArgumentError("--long_text=head_tail drops the middle of a sentence: a tagger tags every word.")
        self.long_text.check_window(self.seq_length)
        special = tokenizer.get_special_tokens_dict()
        self._cls, self._sep, self._pad = (
            special[k] for k in ("start_of_sequence_id", "end_of_segment_id", "padding_id")
        )

    def tag(self, texts):
        """tf.string [batch] -> the outputs of the module docstring."""
        words = tf.strings.split(texts)
        pieces = self.tokenizer(words.flat_values)[:, : self.seq_length - 2]  # [words, (pieces)]
        counts = tf.cast(pieces.row_lengths(), tf.int32)
        sentence = tf.cast(words.value_rowids(), tf.int32)
        if self.long_text.windows:
            inputs, window, position = self._max_context_rows(words, pieces, sentence)
        else:
            inputs, window, position = self._word_boundary_rows(pieces, counts, sentence)
        probabilities = tf.nn.softmax(tf.cast(self._tagger(inputs, training=False), tf.float32), axis=-1)
        first_piece = tf.gather_nd(probabilities, tf.stack([window, position], axis=1))  # [words, tags]
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

    def _word_boundary_rows(self, pieces, counts, sentence):
        """--long_text=truncate: (model inputs, row, position) of each word's first piece; a sentence is cut into
        rows at word boundaries (`_windows`)."""
        room = self.seq_length - 2
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
        return self._packed(ids, lengths), window, 1 + start

    def _max_context_rows(self, words, pieces, sentence):
        """--long_text=windows: (model inputs, row, position) of each word's first piece; a sentence is read in
        fine-tuning's overlapping windows (`long_text_ops.window_starts`, not capped) and each word from the
        window where its first piece has the most context (`long_text_ops.max_context_window`)."""
        room = self.seq_length - 2
        sentence_pieces = words.with_flat_values(pieces).merge_dims(1, 2)  # [batch, (pieces)]
        num_pieces = sentence_pieces.row_lengths()
        windows = long_text_ops.document_windows(sentence_pieces, room, self.long_text.stride(room), None).values
        starts = long_text_ops.window_starts(num_pieces, room, self.long_text.stride(room), None)
        # A word's first piece in its sentence (a word without pieces: where the next word's begins).
        offset = tf.cumsum(pieces.row_lengths(), exclusive=True)
        position = offset - tf.gather(sentence_pieces.row_starts(), sentence)
        owner = long_text_ops.max_context_window(starts, num_pieces, sentence, position, room)
        row = tf.gather(starts.row_starts(), sentence) + owner
        in_row = 1 + position - tf.gather(starts.flat_values, row)
        ids = tf.pad(tf.cast(windows, tf.int32).to_tensor(self._pad, shape=[None, room]), [[0, 0], [1, 1]])
        lengths = tf.cast(windows.row_lengths(), tf.int32)
        rows = (tf.cast(row, tf.int32), tf.cast(tf.clip_by_value(in_row, 1, self.seq_length - 1), tf.int32))
        return self._packed(ids, lengths), *rows

    def _packed(self, ids, lengths):
        """The model inputs of rows `[CLS] pieces` ([rows, seq_length], `lengths` pieces each): [SEP] after the
        pieces, the mask over [CLS] to [SEP]."""
        position = tf.range(self.seq_length)[tf.newaxis, :]
        ids = tf.where(position == 0, self._cls, ids)
        ids = tf.where(position == lengths[:, tf.newaxis] + 1, self._sep, ids)
        return {
            "input_word_ids": ids,
            "input_mask": tf.cast(position <= lengths[:, tf.newaxis] + 1, tf.int32),
            "input_type_ids": tf.zeros_like(ids),
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
