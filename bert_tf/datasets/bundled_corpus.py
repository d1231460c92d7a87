"""TFDS builder for the bundled Jane Austen corpus (no download)."""

import numpy as np
import tensorflow_datasets as tfds

from bert_tf.datasets import bundled

_DESCRIPTION = """\
The six novels of Jane Austen from the R package janeaustenr (Project Gutenberg
texts), one example per chapter (269 in all) with its sentences in order.
Read from data/austen_corpus.txt of the bert_tf repository; nothing is
downloaded. See data/README.md.
"""

_CITATION = """\
@misc{silge2022janeaustenr,
  title={janeaustenr: Jane Austen's Complete Novels},
  author={Silge, Julia},
  year={2022},
  note={R package version 1.0.0},
  url={https://CRAN.R-project.org/package=janeaustenr}
}
"""


class BundledCorpus(tfds.core.GeneratorBasedBuilder):
    """Unlabelled English text for pretraining: Jane Austen's novels, one document per chapter."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "janeaustenr 1.0.0, rule-based sentence splitting."}

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "novel": tfds.features.Text(),
                    "chapter": tfds.features.Scalar(dtype=np.int32),
                    "heading": tfds.features.Text(),
                    "sentences": tfds.features.Sequence(tfds.features.Text()),
                }
            ),
            homepage="https://github.com/juliasilge/janeaustenr",
            citation=_CITATION,
            # File order: tfds agrees with the plain readers (shuffle when reading).
            disable_shuffling=True,
            license="Public domain text; janeaustenr packaging MIT",
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # the data is in the repository
        bundled.corpus_path()
        bundled.corpus_documents_path()
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for index, document in enumerate(bundled.read_corpus_documents()):
            yield (
                index,
                {
                    "novel": document.novel,
                    "chapter": document.chapter,
                    "heading": document.heading,
                    "sentences": list(document.sentences),
                },
            )
