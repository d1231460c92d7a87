"""Datasets bundled with the repository: readers and TFDS builders.

Importing this package registers the TFDS builders `bundled_sentiment` and
`bundled_corpus`, so `tfds.load("bundled_sentiment", data_dir=...)` works
offline.
"""

from bert_tf.datasets import bundled
from bert_tf.datasets.bundled import (
    CorpusDocument,
    corpus_documents_path,
    corpus_path,
    corpus_sentence_dataset,
    pos_path,
    read_corpus_documents,
    read_sentiment,
    sentiment_dataset,
    sentiment_path,
    sentiment_paths,
)
from bert_tf.datasets.bundled_corpus import BundledCorpus
from bert_tf.datasets.bundled_sentiment import BundledSentiment
