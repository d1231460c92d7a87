"""TFDS builder for the bundled fine foods sentiment set (no download)."""

import tensorflow_datasets as tfds

from bert_tf.datasets import bundled

_DESCRIPTION = """\
5,000 Amazon fine food reviews from the R package modeldata (`small_fine_foods`),
labelled 1 ("great": a 5-star rating) or 0 ("other"). Train: 4,000 reviews,
test: 1,000. Read from data/fine_foods_{train,test}.tsv of the bert_tf
repository; nothing is downloaded. See data/README.md.
"""

_CITATION = """\
@inproceedings{mcauley2013amateurs,
  title={From amateurs to connoisseurs: modeling the evolution of user expertise through online reviews},
  author={McAuley, Julian and Leskovec, Jure},
  booktitle={Proceedings of the 22nd International Conference on World Wide Web},
  pages={897--908},
  year={2013}
}
"""


class BundledSentiment(tfds.core.GeneratorBasedBuilder):
    """Binary sentiment of Amazon fine food reviews, from files in the repository."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "modeldata 1.1.0 small_fine_foods, HTML removed."}

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "text": tfds.features.Text(),
                    "label": tfds.features.ClassLabel(names=list(bundled.SENTIMENT_LABEL_NAMES)),
                }
            ),
            supervised_keys=("text", "label"),
            homepage="https://modeldata.tidymodels.org",
            citation=_CITATION,
            # File order: tfds agrees with the plain readers (shuffle when reading).
            disable_shuffling=True,
            license="MIT (modeldata)",
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # the data is in the repository
        # Validate both files before anything is written.
        for split in bundled.SENTIMENT_SPLITS:
            bundled.sentiment_path(split)
        return {split: self._generate_examples(split) for split in bundled.SENTIMENT_SPLITS}

    def _generate_examples(self, split):
        texts, labels = bundled.read_sentiment(split)
        for index, (text, label) in enumerate(zip(texts, labels)):
            yield index, {"text": text, "label": int(label)}
