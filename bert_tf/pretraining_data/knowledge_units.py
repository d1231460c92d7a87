"""ERNIE's knowledge masking units (Sun et al., 2019): phrases and named entities, found in token ids.

ERNIE 1.0 keeps BERT's model and changes what is masked: a whole phrase or a
whole named entity is masked together, so the model predicts it from its
context rather than from its own other pieces. Here a unit is a run of whole
words (every word with its `##` pieces) inside one sentence:

* "phrase": the longest listed phrase at each word, left to right
  (`UnitTable.phrases`: token ids of each line of a phrase list, or of
  the collocations `phrase_learning` finds in the corpus).
* "entity": the listed phrases too when a list is given; otherwise, for cased
  vocabularies, every run of capitalised words that does not start its
  sentence ("... said Colonel Brandon ." -> "Colonel Brandon"; in "New York is
  far" only "York"); a capitalised token of one character ("I", "A") does not count.

`mark_units` flags each token of a chunk (`UNIT_NONE`, `UNIT_START`,
`UNIT_CONTINUE`); `select_units` treats every phrase or entity of a row as one
unit and every other word as a unit of its own (the whole-word fallback), and
chooses units in random order until the row's budget is spent, skipping whole
a unit that would overflow it. As in ERNIE, a phrase is then masked about as
often as a word, but always whole: the model never sees part of it.
It is numpy only, like the rest of `bert_tf.pretraining_data`;
`bert_tf.data.dynamic_masking` selects the same way with TensorFlow ops from
the flags the writer stores in unmasked records (`UNIT_FEATURES`).

    >>> import numpy as np
    >>> table = UnitTable(phrases=((7, 8),))
    >>> is_continuation = np.zeros(10, bool)
    >>> mark_units(np.array([5, 7, 8, 9], np.int32), np.array([0, 4]), table, is_continuation).tolist()
    [0, 1, 2, 0]
"""

import dataclasses

import numpy as np

from bert_tf.data.pretraining_schema import (
    KNOWLEDGE_MASKING,
    MASKING_METHODS,
    UNIT_CONTINUE,
    UNIT_NONE,
    UNIT_START,
)

# Where `bert_tf_make_vocab --learn_phrases` writes the learned phrases: beside the vocabulary.
PHRASE_FILE_NAME = "phrases.txt"

_MAX_KEY = 2.0  # above every real key (uniform draws in [0, 1))


@dataclasses.dataclass(frozen=True)
class UnitTable:
    """Where one masking mode's units come from (picklable: the writer's helpers get it once).

    Attributes:
        phrases: the token ids of each phrase (empty ones are ignored); matched whole words only,
            longest first.
        capitalised: bool [vocab_size], True for tokens that start with an upper-case letter and
            are longer than one character (the entity heuristic), or None to use `phrases`.
        source: what the units came from, for log lines and errors.
    """

    phrases: tuple = ()
    capitalised: np.ndarray | None = None
    source: str = ""

    @classmethod
    def from_phrase_ids(cls, phrase_ids, source: str):
        """A table of phrases given as token-id sequences (deduplicated; sequences of one word are kept)."""
        unique = sorted({tuple(int(t) for t in ids) for ids in phrase_ids if len(ids)})
        return cls(phrases=tuple(unique), source=source)

    @classmethod
    def capitalisation(cls, vocab_tokens):
        """The entity heuristic's table for a cased vocabulary's tokens (index = id)."""
        capitalised = np.array([len(t) > 1 and t[0].isupper() for t in vocab_tokens], bool)
        return cls(capitalised=capitalised, source="capitalised words not at a sentence start")


def mark_units(token_ids, sentence_offsets, table: UnitTable, is_continuation) -> np.ndarray:
    """Flags the units of a chunk's tokens.

    Args:
        token_ids: int [num_tokens], sentences back to back.
        sentence_offsets: int [num_sentences + 1], the token offset of each sentence.
        table: the units to find.
        is_continuation: bool [vocab_size], True for `##` pieces.

    Returns:
        int8 [num_tokens]: `UNIT_START` at a unit's first token, `UNIT_CONTINUE` on its other
        tokens, `UNIT_NONE` elsewhere. Units never cross a sentence boundary.
    """
    token_ids = np.asarray(token_ids)
    if table.capitalised is not None:
        return _capitalised_runs(token_ids, np.asarray(sentence_offsets), table.capitalised, is_continuation)
    return _phrase_matches(token_ids, np.asarray(sentence_offsets), table.phrases, is_continuation)


def _phrase_matches(token_ids, sentence_offsets, phrases, is_continuation) -> np.ndarray:
    """Greedy left-to-right matching of whole-word phrases, the longest first at each word."""
    flags = np.zeros(token_ids.shape[0], np.int8)
    if not phrases or not token_ids.size:
        return flags
    by_first = {}
    for phrase in sorted(phrases, key=len, reverse=True):
        by_first.setdefault(phrase[0], []).append(phrase)
    word_start = ~is_continuation[token_ids]
    starts = np.flatnonzero(np.isin(token_ids, np.fromiter(by_first, np.int64)) & word_start)
    sentence_end = sentence_offsets[np.searchsorted(sentence_offsets, starts, side="right")]
    ids = token_ids.tolist()
    next_free = 0
    for start, end in zip(starts.tolist(), sentence_end.tolist()):
        if start < next_free:
            continue
        for phrase in by_first[ids[start]]:
            stop = start + len(phrase)
            if stop <= end and tuple(ids[start:stop]) == phrase and (stop == end or word_start[stop]):
                flags[start] = UNIT_START
                flags[start + 1 : stop] = UNIT_CONTINUE
                next_free = stop
                break
    return flags


def _capitalised_runs(token_ids, sentence_offsets, capitalised, is_continuation) -> np.ndarray:
    """Runs of capitalised words, a sentence's first word excluded."""
    if not token_ids.size:
        return np.zeros(0, np.int8)
    word_start = ~is_continuation[token_ids]
    word_start[sentence_offsets[:-1]] = True  # a sentence never continues the previous one's word
    entity_start = word_start & capitalised[token_ids]
    entity_start[sentence_offsets[:-1]] = False
    word_of_token = np.cumsum(word_start) - 1
    in_entity = entity_start[np.flatnonzero(word_start)][word_of_token]
    previous = np.concatenate([[False], in_entity[:-1]])
    previous[sentence_offsets[:-1]] = False
    flags = np.where(in_entity, np.where(previous, UNIT_CONTINUE, UNIT_START), UNIT_NONE)
    return flags.astype(np.int8)


def item_table(candidates: np.ndarray, is_continuation_token: np.ndarray, unit_flags: np.ndarray):
    """The items of each row: units (all their tokens) and the words outside units.

    A token joins the item before it when that is a candidate and the token is a unit's
    `UNIT_CONTINUE` or, outside units, a `##` piece; so a unit cut by truncation keeps its visible part.

    Returns:
        (item_index int64 [N, L]: the item of each candidate, -1 elsewhere; item_length int64 [N, I];
        num_items int64 [N]).
    """
    n, _ = candidates.shape
    previous = np.zeros_like(candidates)
    previous[:, 1:] = candidates[:, :-1]
    joins = np.where(unit_flags != UNIT_NONE, unit_flags == UNIT_CONTINUE, is_continuation_token)
    starts = candidates & ~(joins & previous)
    item_index = np.where(candidates, np.cumsum(starts, axis=1) - 1, -1)
    num_items = starts.sum(axis=1).astype(np.int64)
    width = max(int(num_items.max(initial=0)), 1)
    item_length = np.zeros((n, width), np.int64)
    rows, cols = np.nonzero(candidates)
    np.add.at(item_length, (rows, item_index[rows, cols]), 1)
    return item_index, item_length, num_items


def select_units(
    candidates: np.ndarray,
    is_continuation_token: np.ndarray,
    unit_flags: np.ndarray,
    num_to_predict: np.ndarray,
    rng: np.random.Generator,
):
    """Chooses items (phrases or entities, and the words outside them) in random order until
    `num_to_predict` tokens per row.

    An item that would take the count past the budget is skipped whole and later (shorter) ones
    may still fit, as the original's whole-word masking does.

    Args:
        candidates: bool [N, L], the maskable positions.
        is_continuation_token: bool [N, L], True on `##` pieces.
        unit_flags: int [N, L], the `mark_units` flags laid out like the rows.
        num_to_predict: int [N], the budget of each row.
        rng: the draws.

    Returns:
        (selected bool [N, L], item int64 [N, L]: the item of each selected position, -1 elsewhere),
        the item being the unit of the 80/10/10 choice.
    """
    n, _ = candidates.shape
    item_index, item_length, num_items = item_table(candidates, is_continuation_token, unit_flags)
    width = item_length.shape[1]
    keys = rng.random((n, width))
    keys[np.arange(width)[None, :] >= num_items[:, None]] = _MAX_KEY
    order = np.argsort(keys, axis=1, kind="stable")
    rows = np.arange(n)
    chosen = np.zeros((n, width), bool)
    count = np.zeros(n, np.int64)
    for r in range(int(num_items.max(initial=0))):
        item = order[:, r]
        size = item_length[rows, item]
        take = (r < num_items) & (count + size <= num_to_predict)
        chosen[rows[take], item[take]] = True
        count += np.where(take, size, 0)
    selected = candidates & chosen[rows[:, None], np.maximum(item_index, 0)]
    return selected, np.where(selected, item_index, -1)


def unit_tables(masking: str, do_masking: bool, vocab_file: str, do_lower_case: bool, phrase_file=None) -> dict:
    """The `UnitTable`s a run needs: "phrase"/"entity" -> table (empty for the other masking modes).

    Masked records need their `masking`'s table; unmasked records (for dynamic masking) of
    "phrase" or "entity" carry the flags of every mode with a source. Sources, in order: the
    user's `phrase_file` (both modes); else `PHRASE_FILE_NAME` beside the vocabulary ("phrase")
    and the capitalisation heuristic of cased vocabularies ("entity").

    Raises:
        ValueError, FileNotFoundError: naming the flag or file (`masking`'s source is missing,
        a phrase file is not UTF-8 or lists no phrase).
    """
    import os

    from bert_tf.tokenization import load_vocab

    if masking not in KNOWLEDGE_MASKING:
        return {}
    modes = (masking,) if do_masking else KNOWLEDGE_MASKING
    learned = os.path.join(os.path.dirname(os.path.abspath(vocab_file)), PHRASE_FILE_NAME)
    tables = {}
    for mode in modes:
        if phrase_file or (mode == "phrase" and os.path.exists(learned)):
            tables[mode] = read_phrase_file(phrase_file or learned, vocab_file, do_lower_case)
        elif mode == "entity" and not do_lower_case:
            tables[mode] = UnitTable.capitalisation(load_vocab(vocab_file))
        elif mode == masking:
            raise ValueError(
                "--masking=phrase needs --phrase_file or the learned phrases beside the vocabulary "
                f"({learned}: bert_tf_make_vocab --learn_phrases writes them)"
                if mode == "phrase"
                else "--masking=entity with --do_lower_case needs --phrase_file: the capitalisation heuristic "
                "needs cased text (--nodo_lower_case)"
            )
    return tables


def read_phrase_file(path: str, vocab_file: str, do_lower_case: bool) -> UnitTable:
    """One phrase or entity per line (blank lines skipped) -> a `UnitTable` of their token ids.

    Phrases are tokenized as the corpus is (the pure-Python twin of the in-graph tokenizer), so an
    uncased vocabulary matches them case-insensitively.
    """
    from bert_tf.tokenization.python_tokenizer import PythonBertTokenizer

    tokenizer = PythonBertTokenizer(vocab_file, lower_case=do_lower_case)
    phrases = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise ValueError(f"--phrase_file {path}: line {number} is not UTF-8") from None
            if line:
                phrases.append(tokenizer.tokenize(line))
    table = UnitTable.from_phrase_ids(phrases, source=path)
    if not table.phrases:
        raise ValueError(f"--phrase_file {path} lists no phrase")
    return table


def parse_masking_schedule(text: str) -> tuple:
    """ "token:0.3,phrase:0.3,entity:0.4" -> (("token", 0.3), ("phrase", 0.3), ("entity", 0.4)).

    ERNIE's staged masking: each mode for its fraction of the training steps, in order. The
    fractions are > 0 and sum to 1.

    Raises:
        ValueError: naming --masking_schedule and what is wrong.
    """
    stages = []
    for part in (p.strip() for p in text.split(",")):
        mode, _, fraction = part.partition(":")
        try:
            value = float(fraction)
        except ValueError:
            value = float("nan")
        if mode not in MASKING_METHODS or not value > 0:
            raise ValueError(
                f"--masking_schedule={text!r}: {part!r} is not MODE:FRACTION with MODE one of "
                f"{', '.join(MASKING_METHODS)} and FRACTION > 0"
            )
        stages.append((mode, value))
    total = sum(value for _, value in stages)
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"--masking_schedule={text!r}: the fractions sum to {total:g}, not 1")
    return tuple(stages)
