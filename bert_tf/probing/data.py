"""The probing tasks' data: token files (`word<TAB>tag`) and sentence files (`text<TAB>label`).

Token files are CoNLL-style: one `word<TAB>tag` per line, a blank line between sentences, any tag set.
Sentence files are TSV with the header `text<TAB>label`, any label strings. Every error is a `DataError`
naming the file and line. The bundled defaults: Brown part-of-speech tags (`data/brown_pos_*.conll`) and the
fine-food reviews (`data/fine_foods_*.tsv`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_tf.data.finetuning_readers import DataError, read_conll, read_text_examples
from bert_tf.errors import check_utf8

TOKEN = "token"
SENTENCE = "sentence"


@dataclasses.dataclass(frozen=True)
class TokenData:
    """Sentences as word lists, with one tag per word."""

    path: str
    sentences: list  # of tuples of words
    tags: list  # of tuples of tags

    @property
    def num_words(self) -> int:
        return sum(len(s) for s in self.sentences)


@dataclasses.dataclass(frozen=True)
class SentenceData:
    path: str
    texts: list
    labels: list


def read_token_file(path: str, flag: str) -> TokenData:
    """Reads a `word<TAB>tag` file; a line without exactly two tab-separated fields is an error."""
    check_utf8(path, flag)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if line.strip() and (line.count("\t") != 1 or not all(field.strip() for field in line.split("\t"))):
                raise DataError(f"--{flag}: {path}:{number}: expected `word<TAB>tag`, got {line[:80]!r}.")
    try:
        examples = read_conll(path, word_column=0, label_column=1, delimiter="\t")
    except DataError as e:
        raise DataError(f"--{flag}: {e}") from None
    return TokenData(path, [e.words for e in examples], [e.labels for e in examples])


def read_sentence_file(path: str, flag: str) -> SentenceData:
    """Reads a TSV with the header `text<TAB>label`."""
    check_utf8(path, flag)
    try:
        examples = read_text_examples(path, "text", None, "label", file_format="tsv")
    except DataError as e:
        raise DataError(f"--{flag}: {e}") from None
    if not examples:
        raise DataError(f"--{flag}: {path}: no rows after the header.")
    return SentenceData(path, [e.text_a for e in examples], [e.label for e in examples])


def dev_split(num_items: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, dev indices): a seeded random `fraction` of `range(num_items)` held out for development."""
    order = np.random.default_rng(seed).permutation(num_items)
    num_dev = max(1, int(round(num_items * fraction)))
    if num_dev >= num_items:
        raise DataError(f"Too few training items ({num_items}) to hold out a development split.")
    return np.sort(order[num_dev:]), np.sort(order[:num_dev])


def label_ids(labels, label_list: list) -> np.ndarray:
    index = {label: i for i, label in enumerate(label_list)}
    return np.array([index.get(label, -1) for label in labels], np.int64)


def task_labels(task, split_data) -> list:
    """Every label of `split_data` in order: one per word (token task) or per text (sentence task)."""
    if task == TOKEN:
        return [tag for tags in split_data.tags for tag in tags]
    return list(split_data.labels)


def num_items(task, split_data) -> int:
    """Sentences (token task) or texts (sentence task) in `split_data`."""
    return len(split_data.sentences) if task == TOKEN else len(split_data.texts)
