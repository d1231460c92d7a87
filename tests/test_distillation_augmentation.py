"""Altered copies of the training texts for the teacher to label (`bert_tf.distillation.augmentation`)."""

import random

import pytest

from bert_tf.data.examples import TaggingExample, TextExample
from bert_tf.distillation.augmentation import altered_text, augmented_examples

REVIEWS = [TextExample(f"train.tsv:{i}", " ".join(f"w{i}_{j}" for j in range(20)), label=str(i % 2)) for i in range(50)]


def _is_ordered_subsequence(part, whole):
    remaining = iter(whole)
    return all(word in remaining for word in part)


def test_copies_are_unlabelled_subsequences_of_their_text_reproducible_for_a_seed():
    copies = augmented_examples(REVIEWS, copies=3, seed=5)
    assert len(copies) == 150 and all(c.label is None and c.text_b is None for c in copies)
    assert [c.guid for c in copies[:3]] == ["train.tsv:0:copy1", "train.tsv:0:copy2", "train.tsv:0:copy3"]
    for k, copy in enumerate(copies):
        source = REVIEWS[k // 3].text_a.split()
        words = copy.text_a.split()
        assert 1 <= len(words) <= len(source) and _is_ordered_subsequence(words, source)
    # A copy equals its text only when no word was drawn for dropping and no crop: 0.85**20 / 2, about 2%.
    assert sum(c.text_a != REVIEWS[k // 3].text_a for k, c in enumerate(copies)) >= 140
    assert augmented_examples(REVIEWS, copies=3, seed=5) == copies
    assert augmented_examples(REVIEWS, copies=3, seed=6) != copies
    assert augmented_examples(REVIEWS, copies=0, seed=5) == []


def test_drop_rate_and_crops_are_what_the_docstring_says():
    rng = random.Random(0)
    text = " ".join(str(i) for i in range(1000))
    # No cropping: about 15% of the words go.
    kept = [len(altered_text(text, rng, crop_probability=0.0).split()) for _ in range(20)]
    assert 0.82 < sum(kept) / (20 * 1000) < 0.88
    # Always cropping, nothing dropped: a contiguous span of at least half the words.
    for _ in range(20):
        words = [int(w) for w in altered_text(text, rng, word_drop_rate=0.0, crop_probability=1.0).split()]
        assert len(words) >= 500 and words == list(range(words[0], words[0] + len(words)))
    # A one-word text keeps its word even when every word is dropped; an empty one stays empty.
    assert altered_text("coffee", rng, word_drop_rate=1.0) == "coffee" and altered_text("", rng) == ""


def test_both_texts_of_a_pair_are_altered_and_tagging_examples_are_refused():
    pair = TextExample("pairs.tsv:1", "a b c d e f g h", "i j k l m n o p", label="1")
    copies = augmented_examples([pair], copies=20, seed=1)
    assert all(set(c.text_a.split()) <= set("abcdefgh") and set(c.text_b.split()) <= set("ijklmnop") for c in copies)
    assert len({c.text_b for c in copies}) > 1
    with pytest.raises(TypeError, match="TextExample"):
        augmented_examples([TaggingExample("t.conll:1", ("a",), ("O",))], copies=1, seed=1)
