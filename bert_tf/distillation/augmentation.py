"""More text for the teacher to label: altered copies of the training texts (TinyBERT's augmentation idea).

A student learns the teacher's function from the inputs it sees; on a few thousand labelled texts it sees too
few. TinyBERT adds, for each training text, variants in which words are replaced by a masked LM's guesses or
by embedding neighbours, and lets the teacher label them. Here, in a form that needs no second model, each
copy drops words at random (`word_drop_rate`) and, with probability `crop_probability`, keeps only a random
span of at least half the remaining words. The copies carry no label: the teacher's soft targets are their
only loss.

Example (two copies of one review, reproducible for a seed):

>>> from bert_tf.data.examples import TextExample
>>> from bert_tf.distillation.augmentation import augmented_examples
>>> review = TextExample("train.tsv:2", "the coffee arrived fresh and tastes wonderful every morning", label="1")
>>> copies = augmented_examples([review], copies=2, seed=1)
>>> [c.guid for c in copies], [c.label for c in copies]
(['train.tsv:2:copy1', 'train.tsv:2:copy2'], [None, None])
>>> all(set(c.text_a.split()) <= set(review.text_a.split()) for c in copies)
True
"""

from __future__ import annotations

import dataclasses
import random

from bert_tf.data.examples import TextExample


def altered_text(text: str, rng: random.Random, word_drop_rate: float = 0.15, crop_probability: float = 0.5) -> str:
    """`text` with words dropped and maybe cropped to a span; never empty when `text` has a word."""
    words = text.split()
    if not words:
        return text
    kept = [word for word in words if rng.random() >= word_drop_rate] or [rng.choice(words)]
    if len(kept) > 1 and rng.random() < crop_probability:
        length = rng.randint((len(kept) + 1) // 2, len(kept))
        start = rng.randint(0, len(kept) - length)
        kept = kept[start : start + length]
    return " ".join(kept)


def augmented_examples(
    examples: list, copies: int, seed: int, word_drop_rate: float = 0.15, crop_probability: float = 0.5
) -> list:
    """`copies` unlabelled, altered copies of each `TextExample` (both texts of a pair altered independently).

    Args:
      examples: `TextExample`s (the training data).
      copies: copies per example (0: none).
      seed: the copies depend on it alone, for a given list of examples.
      word_drop_rate, crop_probability: see the module docstring.

    Returns:
      A list of `len(examples) * copies` `TextExample`s with `label=None`, guids `<guid>:copy<k>`.
    """
    rng = random.Random(seed)
    result = []
    for example in examples:
        if not isinstance(example, TextExample):
            raise TypeError(f"augmented_examples takes TextExamples, got {type(example).__name__}.")
        for k in range(1, copies + 1):
            result.append(
                dataclasses.replace(
                    example,
                    guid=f"{example.guid}:copy{k}",
                    text_a=altered_text(example.text_a, rng, word_drop_rate, crop_probability),
                    text_b=None
                    if example.text_b is None
                    else altered_text(example.text_b, rng, word_drop_rate, crop_probability),
                    label=None,
                )
            )
    return result
