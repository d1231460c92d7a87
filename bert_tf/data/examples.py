"""The examples of the fine-tuning tasks: what the readers (`finetuning_readers`) produce and the task plug-ins
(`bert_tf.tasks`) featurize. Plain dataclasses, below both.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One sentence or sentence pair with its label.

    `guid` says where the example came from ("train.tsv:12", "glue/mrpc:train:5").
    `label` is a class name (str), a regression target (float) or None for
    unlabelled (prediction) data.
    """

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None


@dataclasses.dataclass(frozen=True)
class TaggingExample:
    """One sentence as words with one tag per word (`labels` None when unlabelled)."""

    guid: str
    words: tuple
    labels: tuple | None = None


@dataclasses.dataclass(frozen=True)
class SquadAnswer:
    text: str
    start_char: int


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One SQuAD question with its context paragraph.

    `answers` holds every gold answer (character offsets into `context`);
    `is_impossible` marks SQuAD v2.0 questions without an answer.
    """

    qas_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False
