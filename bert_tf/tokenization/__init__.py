"""Tokenization: in-graph WordPiece, packing, the preprocessing SavedModel, vocab tools.

`BertTokenizer` reproduces the original BERT tokenizer id for id (see its
docstring and tests/fixtures/tokenization/README.md for the exact reference);
`PythonBertTokenizer` gives the same ids in plain Python, without TensorFlow.
"""

from bert_tf.lazy_namespace import lazy_names

_NAMES = {
    "basic_tokenizer": ("BasicTokenizer",),
    "bert_tokenizer": ("MAX_CHARS_PER_WORD", "BertTokenizer"),
    "packing": ("bert_pack_inputs",),
    "preprocessor": ("BertPreprocessor", "save_preprocessor"),
    "python_tokenizer": ("PythonBertTokenizer",),
    "vocab": (
        "SPECIAL_TOKENS",
        "SUFFIX_INDICATOR",
        "continuation_mask",
        "load_vocab",
        "special_token_ids",
        "write_vocab",
    ),
    "vocab_learning": ("count_words", "learn_vocab"),
}
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names}


# Names load on first use: the in-graph tokenizer imports TensorFlow and tensorflow_text,
# `PythonBertTokenizer` and `vocab` need neither.
__getattr__, __dir__ = lazy_names(__name__, {name: f"{__name__}.{module}" for name, module in _MODULE_OF.items()})

__all__ = [
    "BasicTokenizer",
    "BertPreprocessor",
    "BertTokenizer",
    "MAX_CHARS_PER_WORD",
    "PythonBertTokenizer",
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
