"""BertPreprocessor: the TF Hub `bert_en_uncased_preprocess` interface as a SavedModel.

pre = BertPreprocessor("vocab.txt", lower_case=True)
save_preprocessor(pre, "export/preprocess")

loaded = tf.saved_model.load("export/preprocess")   # or hub.load / hub.KerasLayer
loaded(tf.constant(["hello world"]))                # dict at seq_length 128
a, b = loaded.tokenize(s1), loaded.tokenize(s2)     # ragged [batch, (pieces)]
loaded.bert_pack_inputs([a, b], seq_length=64)      # any length, even after export
loaded.tokenize.get_special_tokens_dict()
"""

import os

import tensorflow as tf

from bert_tf import file_io
from bert_tf.tokenization.bert_tokenizer import BertTokenizer
from bert_tf.tokenization.packing import MAX_SEGMENTS, bert_pack_inputs

# The functions below branch on static shapes and Python values only, so they are traced without autograph, which
# would otherwise convert tensorflow_text's Python packing code again for each of the SavedModel's traces.
_STRINGS_SPEC = tf.TensorSpec([None], tf.string)
_SEGMENT_SPEC = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1, row_splits_dtype=tf.int64)
_SEQ_LENGTH_SPEC = tf.TensorSpec([], tf.int32)


def _special_tokens_tensors(tokenizer):
    return {k: tf.constant(v, tf.int32) for k, v in tokenizer.get_special_tokens_dict().items()}


class TokenizeModule(tf.Module):
    """`preprocessor.tokenize`: tf.string [batch] -> int32 ragged [batch, (pieces)]."""

    def __init__(self, tokenizer, name="tokenize"):
        super().__init__(name=name)
        self.tokenizer = tokenizer

    @tf.function(input_signature=[_STRINGS_SPEC], autograph=False)
    def __call__(self, strings):
        return self.tokenizer(strings)

    @tf.function(input_signature=[], autograph=False)
    def get_special_tokens_dict(self):
        """int32 scalars: vocab_size, start_of_sequence_id, end_of_segment_id,
        padding_id, mask_id, unknown_id."""
        return _special_tokens_tensors(self.tokenizer)


class PackInputsModule(tf.Module):
    """`preprocessor.bert_pack_inputs(inputs, seq_length=default)`; see `bert_pack_inputs`."""

    def __init__(
        self, start_of_sequence_id, end_of_segment_id, padding_id, default_seq_length, name="bert_pack_inputs"
    ):
        super().__init__(name=name)
        self._ids = dict(
            start_of_sequence_id=start_of_sequence_id, end_of_segment_id=end_of_segment_id, padding_id=padding_id
        )
        self.default_seq_length = int(default_seq_length)

    @tf.function(autograph=False)
    def __call__(self, inputs, seq_length=None):
        if seq_length is None:
            seq_length = self.default_seq_length
        return bert_pack_inputs(inputs, seq_length, **self._ids)

    def trace(self):
        """Traces the signatures a SavedModel keeps: 1-3 segments, seq_length tensor or default."""
        for num_segments in range(1, MAX_SEGMENTS + 1):
            specs = [_SEGMENT_SPEC] * num_segments
            self.__call__.get_concrete_function(specs, seq_length=_SEQ_LENGTH_SPEC)
            self.__call__.get_concrete_function(specs)


class BertPreprocessor(tf.Module):
    """Text -> BERT encoder inputs, with the TF Hub preprocessor interface.

    Args:
      vocab_file: vocabulary file (saved as an asset of the SavedModel).
      lower_case: True for uncased models.
      default_seq_length: length used by `__call__` and by `bert_pack_inputs`
        when no `seq_length` is given.
      preserve_special_tokens: see `BertTokenizer`.

    Attributes:
      tokenize: callable tf.string [batch] -> int32 ragged [batch, (pieces)],
        with `get_special_tokens_dict()`.
      bert_pack_inputs: callable (list of 1-3 ragged segments, seq_length) ->
        dict of int32 [batch, seq_length] `input_word_ids`, `input_mask`,
        `input_type_ids`.

    Example:

    >>> import os, tempfile
    >>> vocab_file = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> with open(vocab_file, "w") as f:
    ...     _ = f.write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\nhello\\nworld\\n!\\n")
    >>> preprocessor = BertPreprocessor(vocab_file, default_seq_length=6)
    >>> inputs = preprocessor(tf.constant(["Hello world!"]))
    >>> inputs["input_word_ids"].numpy().tolist(), inputs["input_mask"].numpy().tolist()
    ([[2, 5, 6, 7, 3, 0]], [[1, 1, 1, 1, 1, 0]])
    >>> pair = preprocessor.bert_pack_inputs(
    ...     [preprocessor.tokenize(tf.constant(["hello"])), preprocessor.tokenize(tf.constant(["world"]))])
    >>> pair["input_word_ids"].numpy().tolist(), pair["input_type_ids"].numpy().tolist()
    ([[2, 5, 3, 6, 3, 0]], [[0, 0, 0, 1, 1, 0]])
    """

    def __init__(self, vocab_file, lower_case=True, default_seq_length=128, preserve_special_tokens=False, name=None):
        super().__init__(name=name)
        if int(default_seq_length) < 2:
            raise ValueError(f"default_seq_length must be at least 2, got {default_seq_length}")
        tokenizer = BertTokenizer(vocab_file, lower_case=lower_case, preserve_special_tokens=preserve_special_tokens)
        special = tokenizer.get_special_tokens_dict()
        self.vocab_file = tokenizer.vocab_file
        self.tokenize = TokenizeModule(tokenizer)
        self.bert_pack_inputs = PackInputsModule(
            special["start_of_sequence_id"], special["end_of_segment_id"], special["padding_id"], default_seq_length
        )

    @tf.function(input_signature=[_STRINGS_SPEC], autograph=False)
    def __call__(self, strings):
        return self.bert_pack_inputs([self.tokenize(strings)])

    @tf.function(input_signature=[], autograph=False)
    def get_special_tokens_dict(self):
        return self.tokenize.get_special_tokens_dict()


def save_preprocessor(preprocessor, export_dir, overwrite=False):
    """Writes `preprocessor` as a SavedModel at `export_dir`, atomically.

    The model is written to a temporary directory beside `export_dir` and
    renamed into place, so a crash never leaves a half-written export. The
    `serving_default` signature maps `strings` [batch] to the packed dict.

    Raises:
      FileExistsError: if `export_dir` exists and `overwrite` is False.
    """
    export_dir = os.path.abspath(os.fspath(export_dir))
    if os.path.exists(export_dir) and not overwrite:
        raise FileExistsError(f"Export directory {export_dir!r} already exists")
    preprocessor.bert_pack_inputs.trace()
    signatures = {"serving_default": preprocessor.__call__.get_concrete_function()}
    with file_io.atomic_path(export_dir, directory=True) as tmp:
        tf.saved_model.save(preprocessor, tmp, signatures=signatures)
    return export_dir
