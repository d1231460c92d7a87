"""Tokenization: in-graph WordPiece, packing, the preprocessing SavedModel, vocab tools.

`BertTokenizer` reproduces the original BERT tokenizer id for id (see its
docstring and tests/fixtures/tokenization/README.md for the exact reference).
"""

from bert_tf.tokenization.basic_tokenizer import BasicTokenizer
from bert_tf.tokenization.bert_tokenizer import MAX_CHARS_PER_WORD, BertTokenizer
from bert_tf.tokenization.packing import bert_pack_inputs
from bert_tf.tokenization.preprocessor import BertPreprocessor, save_preprocessor
from bert_tf.tokenization.vocab import (
    SPECIAL_TOKENS,
    SUFFIX_INDICATOR,
    continuation_mask,
    load_vocab,
    special_token_ids,
    write_vocab,
)
from bert_tf.tokenization.vocab_learning import count_words, learn_vocab

__all__ = [
    "BasicTokenizer",
    "BertPreprocessor",
    "BertTokenizer",
    "MAX_CHARS_PER_WORD",
    "SPECIAL_TOKENS",
    "SUFFIX_INDICATOR",
    "bert_pack_inputs",
    "continuation_mask",
    "count_words",
    "learn_vocab",
    "load_vocab",
    "save_preprocessor",
    "special_token_ids",
    "write_vocab",
]
