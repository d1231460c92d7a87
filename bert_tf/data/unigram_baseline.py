"""What pretraining scores without looking at the context: the unigram and majority baselines.

A model that ignores every input and always predicts the masked tokens'
unigram distribution (counted on the training TFRecords) reaches, on held-out
TFRecords, an accuracy equal to the frequency there of the most common
training token, and a cross-entropy equal to the held-out tokens' mean
negative log unigram probability. An MLM that beats both has learned
something from the context. Counts are add-one smoothed over the vocabulary
so that a token unseen in training has a finite loss.

    >>> baseline = unigram_baseline("train.tfrecord", "eval.tfrecord", seq_length=64,
    ...                             max_predictions_per_seq=10, vocab_size=8000)  # doctest: +SKIP
    >>> baseline.accuracy, baseline.loss  # doctest: +SKIP

Likewise a next-sentence head that ignores its input scores, at best, the
held-out labels' frequencies (`next_sentence_baseline`): accuracy 0.5 when
the file's "is random next" labels are balanced, more when short documents
leave fewer actual next sentences, and a loss equal to their entropy.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from bert_tf.data.pretraining_dataset import pretraining_dataset


@dataclasses.dataclass(frozen=True)
class UnigramBaseline:
    accuracy: float  # held-out masked tokens equal to the most frequent training masked token
    loss: float  # mean -log p_unigram(token) over held-out masked tokens, in nats
    most_frequent_id: int
    train_predictions: int
    eval_predictions: int


def _batches(input_patterns, seq_length, max_predictions_per_seq, max_records: int | None = None, sentence_task="nsp"):
    """The files' records in order, in batches of 256; only the first `max_records` of them when given."""
    dataset = pretraining_dataset(
        input_patterns,
        sentence_task=sentence_task,
        batch_size=256,
        seq_length=seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        training=False,
        drop_remainder=False,
    )
    if max_records is not None:
        dataset = dataset.unbatch().take(max_records).batch(256)
    return dataset


@dataclasses.dataclass(frozen=True)
class NextSentenceBaseline:
    accuracy: float  # always answering the most common label
    loss: float  # cross-entropy of always answering the label frequencies (their entropy), in nats


def next_sentence_baseline(
    input_patterns,
    seq_length: int,
    max_predictions_per_seq: int,
    max_records: int | None = None,
    sentence_task: str = "nsp",
) -> NextSentenceBaseline:
    """What a sentence head scores on these files (their first `max_records`) from the label frequencies alone.

    `sentence_task`: the records' ("nsp", or "sop": ALBERT's sentence order).
    """
    from bert_tf.data.pretraining_schema import SENTENCE_LABEL_FEATURES

    counts = np.zeros([2], np.int64)
    for batch in _batches(input_patterns, seq_length, max_predictions_per_seq, max_records, sentence_task):
        counts += np.bincount(batch[SENTENCE_LABEL_FEATURES[sentence_task]].numpy().ravel(), minlength=2)[:2]
    if not counts.sum():
        raise ValueError(f"{input_patterns}: no records.")
    frequencies = counts[counts > 0] / counts.sum()
    return NextSentenceBaseline(
        accuracy=float(frequencies.max()), loss=float(-(frequencies * np.log(frequencies)).sum())
    )


def masked_token_counts(
    input_patterns,
    seq_length: int,
    max_predictions_per_seq: int,
    vocab_size: int,
    max_records: int | None = None,
    sentence_task: str = "nsp",
) -> np.ndarray:
    """int64 [vocab_size]: how often each id is a masked-LM label (weight > 0) in the files (their first records)."""
    counts = np.zeros([vocab_size], np.int64)
    for batch in _batches(input_patterns, seq_length, max_predictions_per_seq, max_records, sentence_task):
        ids = batch["masked_lm_ids"].numpy().ravel()
        real = batch["masked_lm_weights"].numpy().ravel() > 0
        if ids[real].size and ids[real].max() >= vocab_size:
            raise ValueError(
                f"{input_patterns}: masked-LM id {ids[real].max()} is outside a vocabulary of {vocab_size}."
            )
        counts += np.bincount(ids[real], minlength=vocab_size)
    return counts


def unigram_baseline(
    train_patterns,
    eval_patterns,
    seq_length: int,
    max_predictions_per_seq: int,
    vocab_size: int,
    *,
    max_train_records: int | None = None,
    max_eval_records: int | None = None,
    sentence_task: str = "nsp",
) -> UnigramBaseline:
    """The unigram baseline of the masked LM: fitted on `train_patterns`, scored on `eval_patterns`.

    `max_train_records` / `max_eval_records` (None: all) read only the files' first records; `sentence_task`:
    the records' (`bert_tf.data.pretraining_schema.SENTENCE_TASKS`).
    """
    counts = functools.partial(masked_token_counts, sentence_task=sentence_task)
    train = counts(train_patterns, seq_length, max_predictions_per_seq, vocab_size, max_train_records)
    held_out = counts(eval_patterns, seq_length, max_predictions_per_seq, vocab_size, max_eval_records)
    if not held_out.sum():
        raise ValueError(f"{eval_patterns}: no masked-LM predictions to score.")
    log_probs = np.log(train + 1.0) - np.log(train.sum() + vocab_size)
    most_frequent = int(np.argmax(train))
    return UnigramBaseline(
        accuracy=float(held_out[most_frequent] / held_out.sum()),
        loss=float(-(held_out * log_probs).sum() / held_out.sum()),
        most_frequent_id=most_frequent,
        train_predictions=int(train.sum()),
        eval_predictions=int(held_out.sum()),
    )
