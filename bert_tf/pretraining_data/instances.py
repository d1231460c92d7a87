"""BERT pretraining instances (sentence pairs + masked LM) from token ids.

`InstanceConfig.sentence_task` picks how sequences are cut from the documents:
"nsp" (the original's next-sentence pairs, described below), "sop" (ALBERT's
sentence-order pairs: `create_sentence_order_spans`) or "none" (RoBERTa's
FULL-SENTENCES packing with no sentence label: `create_full_sentence_spans`);
`InstanceConfig.masking` picks "token", "whole_word", "span" (SpanBERT,
`span_masking`), or ERNIE's "phrase" and "entity" (`knowledge_units`) masking.

This is the algorithm of google-research/bert's `create_pretraining_data.py`,
rewritten to work on one bounded chunk of documents held as flat numpy arrays:

* For each document (`dupe_factor` times), sentences are gathered into a
  segment until it reaches a target length (`max_seq_length - 3`, or with
  probability `short_seq_prob` a random length in [2, max_seq_length - 3]).
  The segment is split at a random sentence boundary into A and B. With
  probability 0.5, or always when the segment holds one sentence, B is replaced
  by sentences from another document of the chunk (`next_sentence_labels=1`)
  and the unused sentences are put back for the next segment.
* The pair is trimmed to `max_seq_length - 3` tokens by removing tokens from
  the longer side, each removal from the front or the back at random.
* `min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`
  positions (never [CLS]/[SEP]) are chosen; each becomes [MASK] 80% of the
  time, a random vocabulary id 10%, itself 10%. With whole-word masking a word
  (a token plus its following `##` pieces) is chosen or skipped as a unit;
  with span masking, whole-word spans are chosen (`span_masking`) and the
  80/10/10 choice is made once per span; with phrase or entity masking, a
  phrase or entity is chosen or skipped as a unit like a word (`knowledge_units`),
  the choice made once per unit.

What differs from the original, and why:

* Random "next" documents come from the current chunk, not the whole corpus,
  and instances are shuffled within the chunk, so memory stays bounded.
* Pair building runs per document in Python; assembling, truncation offsets
  and masking are vectorised over thousands of instances with numpy.
* Whole-word masking never joins a `##` piece to the token before a [SEP]
  (the original attached a B segment that starts with `##` to the last word
  of A).

Everything is seeded: the same chunk, config and seed give the same arrays.
"""

import dataclasses
import random
from collections.abc import Sequence

import numpy as np

from bert_tf.data.pretraining_schema import KNOWLEDGE_MASKING, MASKING_METHODS, SENTENCE_TASKS, UNIT_FEATURES, UNIT_NONE
from bert_tf.pretraining_data import knowledge_units, span_masking

# A [SEP]/[CLS] can never be chosen: their sort key is above every uniform draw.
_UNSELECTABLE_KEY = 2.0

MASK_CHOICE_NONE = 0
MASK_CHOICE_MASK = 1
MASK_CHOICE_RANDOM = 2
MASK_CHOICE_KEEP = 3


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """Parameters of instance building, named as google-research/bert's flags."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    masking: str = "token"
    do_masking: bool = True
    sentence_task: str = "nsp"

    def validate(self):
        """Raises ValueError naming the offending parameter (= the CLI flag)."""
        if self.sentence_task not in SENTENCE_TASKS:
            raise ValueError(f"--sentence_task={self.sentence_task!r} must be one of {', '.join(SENTENCE_TASKS)}.")
        if self.masking not in MASKING_METHODS:
            raise ValueError(f"--masking={self.masking!r} must be one of {', '.join(MASKING_METHODS)}.")
        if self.max_seq_length < 5:
            raise ValueError(
                f"--max_seq_length={self.max_seq_length} is too small: an instance "
                "needs [CLS] A [SEP] B [SEP], at least 5 tokens."
            )
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe_factor={self.dupe_factor} must be >= 1.")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"--short_seq_prob={self.short_seq_prob} must be in [0, 1].")
        if not self.do_masking:
            return
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"--masked_lm_prob={self.masked_lm_prob} must be in (0, 1).")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"--max_predictions_per_seq={self.max_predictions_per_seq} must be >= 1.")

    def masking_shortfall(self):
        """Predictions a full-length instance wants beyond --max_predictions_per_seq (0: none).

        The original accepts such a cap and masks long instances at a lower
        rate than --masked_lm_prob; so does this tool, with a warning.
        """
        if not self.do_masking:
            return 0
        needed = int(round(self.max_seq_length * self.masked_lm_prob))
        return max(0, needed - self.max_predictions_per_seq)

    @property
    def max_num_tokens(self):
        """Tokens left for the text: after [CLS] A [SEP] B [SEP]'s three, or [CLS] ... [SEP]'s two ("none")."""
        return self.max_seq_length - (2 if self.sentence_task == "none" else 3)


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """What the algorithm needs to know about the vocabulary.

    Attributes:
        vocab_size: number of ids; random replacements are drawn from all of them.
        cls_id, sep_id, mask_id: ids of [CLS], [SEP], [MASK].
        is_continuation: bool array [vocab_size], True for `##` pieces.
    """

    vocab_size: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_continuation: np.ndarray

    @classmethod
    def from_tokens(cls, tokens: Sequence[str], source: str = "vocabulary"):
        """Builds it from the vocabulary's token list (index = id)."""
        index = {}
        for i, token in enumerate(tokens):
            index.setdefault(token, i)
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
        if missing:
            raise ValueError(
                f"{source} has no {', '.join(missing)} token; BERT pretraining data needs [CLS], [SEP] and [MASK]."
            )
        is_continuation = np.array([t.startswith("##") for t in tokens], bool)
        return cls(
            vocab_size=len(tokens),
            cls_id=index["[CLS]"],
            sep_id=index["[SEP]"],
            mask_id=index["[MASK]"],
            is_continuation=is_continuation,
        )


@dataclasses.dataclass
class DocumentChunk:
    """Tokenized documents, flat.

    Attributes:
        token_ids: int32 [num_tokens], all sentences back to back.
        sentence_offsets: int64 [num_sentences + 1], token offset of each sentence.
        document_offsets: int64 [num_documents + 1], sentence offset of each doc.
    Every sentence and every document is non-empty.
    """

    token_ids: np.ndarray
    sentence_offsets: np.ndarray
    document_offsets: np.ndarray

    @classmethod
    def from_documents(cls, documents: Sequence[Sequence[Sequence[int]]]):
        """Builds a chunk from documents -> sentences -> token ids (empty dropped)."""
        sentences = []
        document_offsets = [0]
        for document in documents:
            kept = [list(s) for s in document if len(s)]
            if kept:
                sentences.extend(kept)
                document_offsets.append(len(sentences))
        lengths = [len(s) for s in sentences]
        token_ids = np.fromiter((t for s in sentences for t in s), np.int32, count=sum(lengths))
        return cls(
            token_ids=token_ids,
            sentence_offsets=np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64),
            document_offsets=np.asarray(document_offsets, np.int64),
        )

    @property
    def num_documents(self):
        return len(self.document_offsets) - 1

    @property
    def num_tokens(self):
        return int(self.token_ids.shape[0])


@dataclasses.dataclass
class PairSpans:
    """A/B token spans of instances, before assembly. All arrays are [N].

    `is_random_next` is the sentence label: 1 when B is from another document
    ("nsp") or when A and B were swapped ("sop"); 0 for "none", whose spans have
    no B (`b_length` 0). `one_sentence` marks segments of a single sentence,
    whose B is random whatever the coin says ("nsp") or which were cut inside
    the sentence ("sop").
    """

    a_start: np.ndarray
    a_length: np.ndarray
    b_start: np.ndarray
    b_length: np.ndarray
    is_random_next: np.ndarray
    one_sentence: np.ndarray

    def __len__(self):
        return int(self.a_start.shape[0])

    def take(self, index):
        return PairSpans(*(getattr(self, f.name)[index] for f in dataclasses.fields(self)))


@dataclasses.dataclass
class PretrainingInstances:
    """A batch of finished instances, padded like the original TFRecords.

    Attributes:
        input_ids: int32 [N, max_seq_length], masked.
        input_mask: int32 [N, max_seq_length].
        segment_ids: int32 [N, max_seq_length].
        masked_lm_positions: int32 [N, max_predictions_per_seq], 0-padded.
        masked_lm_ids: int32 [N, max_predictions_per_seq], original ids, 0-padded.
        masked_lm_weights: float32 [N, max_predictions_per_seq], 1 or 0.
        sentence_labels: int32 [N], the sentence task's label (see `PairSpans`);
            written as `next_sentence_labels` ("nsp"), `sentence_order_labels`
            ("sop"), or not at all ("none").
        mask_choices: int8 [N, max_predictions_per_seq], MASK_CHOICE_* per
            prediction (for statistics; not written).
        one_sentence: bool [N], the segment had one sentence so B had to be
            random (for statistics; not written).
        mask_units: int32 [N, max_predictions_per_seq], the unit (span, phrase,
            entity or word) of each prediction, -1 where none or when masking
            by tokens or words (for statistics; not written).
        mask_in_phrase: bool [N, max_predictions_per_seq], the prediction is part
            of a phrase or entity, not of a word outside them (for statistics; not written).
        unit_features: `pretraining_schema.UNIT_FEATURES` name -> int32 [N, max_seq_length]
            unit flags, for the unmasked records of phrase and entity masking.
    """

    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    masked_lm_positions: np.ndarray
    masked_lm_ids: np.ndarray
    masked_lm_weights: np.ndarray
    sentence_labels: np.ndarray
    mask_choices: np.ndarray
    one_sentence: np.ndarray
    mask_units: np.ndarray | None = None
    mask_in_phrase: np.ndarray | None = None
    unit_features: dict = dataclasses.field(default_factory=dict)

    def __len__(self):
        return int(self.input_ids.shape[0])


def _random_b_span(randint, doc, target_b_length, document_start, sentence_start, sentence_length):
    """A random next sentence: from a random sentence of another document until target_b_length tokens.

    Returns the [b_from, b_to) token offsets.
    """
    num_documents = len(document_start) - 1
    # Few tries suffice on real corpora; a one-document chunk falls
    # back to itself, as the original does for a one-document corpus.
    for _ in range(10):
        other = randint(0, num_documents - 1)
        if other != doc:
            break
    other_first, other_stop = (document_start[other], document_start[other + 1])
    j = randint(other_first, other_stop - 1)
    b_from = sentence_start[j]
    b_tokens = 0
    while j < other_stop:
        b_tokens += sentence_length[j]
        j += 1
        if b_tokens >= target_b_length:
            break
    b_to = sentence_start[j]
    return b_from, b_to


class _PairLists:
    """The columns of `PairSpans`, appended one pair at a time by the segment walks.

    `add(a_from, a_to, b_from, b_to, label, one_sentence)` is a closure over the lists' `append`s: it runs once
    a segment, in the walks' inner loop.
    """

    def __init__(self):
        self.columns = ([], [], [], [], [], [])
        a_start, a_length, b_start, b_length, labels, one_sentences = (column.append for column in self.columns)

        def add(a_from, a_to, b_from, b_to, label, one_sentence):
            a_start(a_from)
            a_length(a_to - a_from)
            b_start(b_from)
            b_length(b_to - b_from)
            labels(label)
            one_sentences(one_sentence)

        self.add = add

    def spans(self) -> PairSpans:
        a_start, a_length, b_start, b_length, labels, one_sentences = self.columns
        return PairSpans(
            a_start=np.asarray(a_start, np.int64),
            a_length=np.asarray(a_length, np.int64),
            b_start=np.asarray(b_start, np.int64),
            b_length=np.asarray(b_length, np.int64),
            is_random_next=np.asarray(labels, np.int32),
            one_sentence=np.asarray(one_sentences, bool),
        )


def _uniform_randint(uniform):
    """`randint(low, high)` from `uniform()` draws, as the walks use it."""

    def randint(low, high):
        # random.randint is unbiased but draws its bits in a loop of Python calls, and this runs for every
        # segment; the bias of one float here is < 2**-40.
        return low + int(uniform() * (high - low + 1))

    return randint


def _walk_parts(chunk: DocumentChunk, rng: random.Random):
    """What a walk's `segment_end` works with: the pairs it adds to, the sentences' token offsets (a list), and
    `uniform()` and `randint(low, high)` drawing from `rng` (the walk's own draws come from the same `rng`)."""
    uniform = rng.random
    return _PairLists(), chunk.sentence_offsets.tolist(), uniform, _uniform_randint(uniform)


def _walk_segments(chunk: DocumentChunk, config: InstanceConfig, rng: random.Random, segment_end) -> None:
    """The original's segment walk, shared by "nsp" and "sop"; `segment_end` makes each segment's pair.

    The documents are shuffled once, before the dupe rounds (as the original shuffles its list); in each round
    every document is cut into segments of sentences up to a target length (`max_num_tokens`, or with
    probability `short_seq_prob` a random one). At each segment's end the walk calls
    `segment_end(doc, first_sentence, last_sentence, target_length)`, which returns how many of the segment's
    last sentences it did not use: the walk reads them again for the next segment.
    """
    sentence_length = np.diff(chunk.sentence_offsets).tolist()
    document_start = chunk.document_offsets.tolist()
    max_num_tokens = config.max_num_tokens
    short_seq_prob = config.short_seq_prob
    uniform = rng.random
    randint = _uniform_randint(uniform)
    document_order = list(range(len(document_start) - 1))
    rng.shuffle(document_order)
    for _ in range(config.dupe_factor):
        for doc in document_order:
            first, stop = document_start[doc], document_start[doc + 1]
            target_length = max_num_tokens
            if uniform() < short_seq_prob:
                target_length = randint(2, max_num_tokens)
            segment_first = first
            segment_tokens = 0
            i = first
            while i < stop:
                segment_tokens += sentence_length[i]
                if i == stop - 1 or segment_tokens >= target_length:
                    i -= segment_end(doc, segment_first, i, target_length)
                    segment_first = i + 1
                    segment_tokens = 0
                i += 1


def create_pair_spans(chunk: DocumentChunk, config: InstanceConfig, rng: random.Random) -> PairSpans:
    """BERT's next-sentence pairs: for every document and dupe round, segments split into A and a B that is
    the rest of the segment, or half the time (always for a one-sentence segment) a random span of another
    document, whose unused sentences go back to the walk.

    Returns spans before truncation, in creation order.
    """
    sentence_length = np.diff(chunk.sentence_offsets).tolist()
    document_start = chunk.document_offsets.tolist()
    pairs, sentence_start, uniform, randint = _walk_parts(chunk, rng)
    add = pairs.add

    def segment_end(doc, segment_first, last, target_length):
        num_sentences = last - segment_first + 1
        a_sentences = 1
        if num_sentences >= 2:
            a_sentences = randint(1, num_sentences - 1)
        a_from = sentence_start[segment_first]
        a_to = sentence_start[segment_first + a_sentences]
        if num_sentences == 1 or uniform() < 0.5:
            b_from, b_to = _random_b_span(
                randint, doc, target_length - (a_to - a_from), document_start, sentence_start, sentence_length
            )
            add(a_from, a_to, b_from, b_to, 1, num_sentences == 1)
            return num_sentences - a_sentences  # the sentences meant for B were not used: give them back
        add(a_from, a_to, a_to, sentence_start[last + 1], 0, num_sentences == 1)
        return 0

    _walk_segments(chunk, config, rng, segment_end)
    return pairs.spans()


def create_sentence_order_spans(chunk: DocumentChunk, config: InstanceConfig, rng: random.Random) -> PairSpans:
    """ALBERT's sentence-order pairs: two consecutive pieces of one document, swapped half the time.

    Segments are gathered as for "nsp" (target length, `short_seq_prob`) and
    split at a random sentence boundary into A and B; B is never taken from
    another document. A one-sentence segment is cut at a random token inside
    the sentence (ALBERT falls back to a random next sentence there; a
    one-token sentence gives no pair). With probability 0.5 A and B change
    places and the label (`is_random_next`) is 1.
    """
    pairs, sentence_start, uniform, randint = _walk_parts(chunk, rng)
    add = pairs.add

    def segment_end(doc, segment_first, last, target_length):
        num_sentences = last - segment_first + 1
        first_token, stop_token = sentence_start[segment_first], sentence_start[last + 1]
        if num_sentences >= 2:
            cut = sentence_start[segment_first + randint(1, num_sentences - 1)]
        elif stop_token - first_token >= 2:
            cut = first_token + randint(1, stop_token - first_token - 1)
        else:
            return 0
        if uniform() < 0.5:
            add(cut, stop_token, first_token, cut, 1, num_sentences == 1)
        else:
            add(first_token, cut, cut, stop_token, 0, num_sentences == 1)
        return 0

    _walk_segments(chunk, config, rng, segment_end)
    return pairs.spans()


def create_full_sentence_spans(
    chunk: DocumentChunk, config: InstanceConfig, vocab: VocabInfo, rng: random.Random
) -> tuple[np.ndarray, PairSpans]:
    """RoBERTa's FULL-SENTENCES packing: contiguous sentences up to `max_seq_length - 2` tokens, one segment.

    Each dupe round lays the chunk's documents end to end in a new random
    order with one [SEP] between documents, and cuts that stream into
    sequences of whole sentences: a sequence takes sentences while they fit and
    crosses document boundaries (keeping the [SEP] between them), never starts
    or ends with the separator, and a sentence longer than a whole sequence is
    cut into full-length pieces. `short_seq_prob` does not apply (RoBERTa
    trains on full-length sequences only).

    Returns:
      (token_ids int32: the streams of every round back to back, spans into
      them with `b_length` 0 and label 0).
    """
    sentence_length = np.diff(chunk.sentence_offsets).tolist()
    sentence_start = chunk.sentence_offsets.tolist()
    document_start = chunk.document_offsets.tolist()
    budget = config.max_num_tokens
    separator = np.asarray([vocab.sep_id], np.int32)
    pieces, starts, lengths = [], [], []
    offset = 0  # of the next piece in the stream
    document_order = list(range(len(document_start) - 1))
    for _ in range(config.dupe_factor):
        rng.shuffle(document_order)
        window_start, window_end, ends_with_separator = None, 0, False

        def close():
            nonlocal window_start
            if window_start is not None:
                starts.append(window_start)
                lengths.append(window_end - window_start - int(ends_with_separator))
            window_start = None

        for k, doc in enumerate(document_order):
            if k:
                pieces.append(separator)
                if window_start is not None:
                    if window_end + 1 - window_start > budget:
                        close()
                    else:
                        window_end, ends_with_separator = window_end + 1, True
                offset += 1
            first, stop = document_start[doc], document_start[doc + 1]
            pieces.append(chunk.token_ids[sentence_start[first] : sentence_start[stop]])
            for i in range(first, stop):
                length = sentence_length[i]
                if window_start is not None and window_end + length - window_start > budget:
                    close()
                while length > budget:
                    starts.append(offset)
                    lengths.append(budget)
                    offset += budget
                    length -= budget
                if length:
                    if window_start is None:
                        window_start = window_end = offset
                    window_end += length
                    ends_with_separator = False
                    offset += length
        close()
    token_ids = np.concatenate(pieces).astype(np.int32) if pieces else np.zeros([0], np.int32)
    n = len(starts)
    spans = PairSpans(
        a_start=np.asarray(starts, np.int64),
        a_length=np.asarray(lengths, np.int64),
        b_start=np.zeros(n, np.int64),
        b_length=np.zeros(n, np.int64),
        is_random_next=np.zeros(n, np.int32),
        one_sentence=np.zeros(n, bool),
    )
    return token_ids, spans


def truncate_pairs(spans: PairSpans, max_num_tokens: int, rng: np.random.Generator) -> PairSpans:
    """Trims pairs to `max_num_tokens` like the original's `truncate_seq_pair`.

    The original pops one token at a time from the longer list (B on ties),
    front or back by a coin flip. The number of pops per side follows from the
    lengths alone; the front/back split of each side is Binomial(pops, 0.5).
    """
    a_length, b_length = spans.a_length, spans.b_length
    excess = np.maximum(a_length + b_length - max_num_tokens, 0)
    gap = np.abs(a_length - b_length)
    beyond_gap = np.maximum(excess - gap, 0)  # pops once the sides are equal
    a_longer = a_length > b_length
    # Once equal, pops alternate B, A, B, ...: B takes the odd one.
    a_cut = np.where(a_longer, np.minimum(excess, gap), 0) + beyond_gap // 2
    b_cut = np.where(a_longer, 0, np.minimum(excess, gap)) + beyond_gap - beyond_gap // 2
    a_front = rng.binomial(a_cut, 0.5)
    b_front = rng.binomial(b_cut, 0.5)
    return PairSpans(
        a_start=spans.a_start + a_front,
        a_length=a_length - a_cut,
        b_start=spans.b_start + b_front,
        b_length=b_length - b_cut,
        is_random_next=spans.is_random_next,
        one_sentence=spans.one_sentence,
    )


def assemble_instances(token_ids: np.ndarray, spans: PairSpans, config: InstanceConfig, vocab: VocabInfo):
    """Lays out [CLS] A [SEP] B [SEP] + padding.

    Returns:
        (input_ids, input_mask, segment_ids), each int32 [N, max_seq_length].
    """
    n = len(spans)
    # int32 index arithmetic: chunks hold far fewer than 2**31 tokens.
    position = np.arange(config.max_seq_length, dtype=np.int32)[None, :]
    if config.sentence_task == "none":
        return _assemble_one_segment(token_ids, spans, position, vocab)
    a_length = spans.a_length.astype(np.int32)[:, None]
    b_length = spans.b_length.astype(np.int32)[:, None]
    length = a_length + b_length + 3
    in_a = (position >= 1) & (position <= a_length)
    b_offset = position - a_length - 2
    in_b = (b_offset >= 0) & (b_offset < b_length)
    source = np.where(
        in_a,
        spans.a_start.astype(np.int32)[:, None] + (position - 1),
        spans.b_start.astype(np.int32)[:, None] + b_offset,
    )
    in_text = in_a | in_b
    input_ids = np.where(in_text, token_ids[np.where(in_text, source, 0)], 0).astype(np.int32)
    rows = np.arange(n)
    input_ids[:, 0] = vocab.cls_id
    input_ids[rows, spans.a_length + 1] = vocab.sep_id
    input_ids[rows, spans.a_length + spans.b_length + 2] = vocab.sep_id
    input_mask = (position < length).astype(np.int32)
    segment_ids = ((position >= a_length + 2) & (position < length)).astype(np.int32)
    return input_ids, input_mask, segment_ids


def _assemble_one_segment(token_ids, spans: PairSpans, position, vocab: VocabInfo):
    """[CLS] A [SEP] + padding, segment ids all 0."""
    a_length = spans.a_length.astype(np.int32)[:, None]
    in_a = (position >= 1) & (position <= a_length)
    source = np.where(in_a, spans.a_start.astype(np.int32)[:, None] + (position - 1), 0)
    input_ids = np.where(in_a, token_ids[source], 0).astype(np.int32)
    input_ids[:, 0] = vocab.cls_id
    input_ids[np.arange(len(spans)), spans.a_length + 1] = vocab.sep_id
    input_mask = (position < a_length + 2).astype(np.int32)
    return input_ids, input_mask, np.zeros_like(input_mask)


def _num_to_predict(length: np.ndarray, config: InstanceConfig):
    # np.rint rounds half to even, like Python's round() in the original.
    wanted = np.rint(length.astype(np.float64) * config.masked_lm_prob)
    return np.minimum(config.max_predictions_per_seq, np.maximum(1, wanted)).astype(np.int64)


def _select_token_positions(candidates: np.ndarray, num_to_predict: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Chooses `num_to_predict` random candidate positions per row.

    Returns:
        int [N, max(num_to_predict)]: chosen positions ascending, then
        `seq_length` as padding.
    """
    n, seq_length = candidates.shape
    most = int(min(seq_length, num_to_predict.max(initial=0)))
    if most == 0:
        return np.zeros((n, 0), np.int64)
    keys = rng.random(candidates.shape, dtype=np.float32)
    keys[~candidates] = _UNSELECTABLE_KEY
    rows = np.arange(n)[:, None]
    # Only the `most` smallest keys of a row can be chosen: partition, then
    # order those few.
    smallest = (
        np.argpartition(keys, most - 1, axis=1)[:, :most]
        if most < seq_length
        else np.tile(np.arange(seq_length), (n, 1))
    )
    smallest = np.take_along_axis(smallest, np.argsort(keys[rows, smallest], axis=1), axis=1)
    take = (np.arange(most)[None, :] < num_to_predict[:, None]) & (keys[rows, smallest] < _UNSELECTABLE_KEY)
    return np.sort(np.where(take, smallest, seq_length), axis=1)


def _select_whole_words(
    input_ids: np.ndarray,
    candidates: np.ndarray,
    num_to_predict: np.ndarray,
    vocab: VocabInfo,
    rng: np.random.Generator,
) -> np.ndarray:
    """Whole-word selection: words in random order, skipping any that overflow.

    A word is a candidate token plus the `##` candidates right after it. As in
    the original, a word that would take the count past `num_to_predict` is
    skipped and later (shorter) words may still fit.
    """
    n, seq_length = candidates.shape
    continues = vocab.is_continuation[input_ids] & candidates
    continues[:, 1:] &= candidates[:, :-1]
    continues[:, 0] = False
    starts = candidates & ~continues
    word_index = np.cumsum(starts, axis=1) - 1  # valid where candidates
    num_words = starts.sum(axis=1)
    max_words = int(num_words.max()) if n else 0
    if max_words == 0:
        return np.zeros_like(candidates)
    rows = np.arange(n)
    word_length = np.zeros((n, max_words), np.int64)
    cand_rows, cand_cols = np.nonzero(candidates)
    np.add.at(word_length, (cand_rows, word_index[cand_rows, cand_cols]), 1)
    keys = rng.random((n, max_words))
    keys[np.arange(max_words)[None, :] >= num_words[:, None]] = _UNSELECTABLE_KEY
    order = np.argsort(keys, axis=1, kind="stable")
    chosen_words = np.zeros((n, max_words), bool)
    count = np.zeros(n, np.int64)
    for r in range(max_words):
        word = order[:, r]
        size = word_length[rows, word]
        take = (r < num_words) & (count + size <= num_to_predict)
        chosen_words[rows[take], word[take]] = True
        count += np.where(take, size, 0)
    safe_index = np.where(candidates, word_index, 0)
    return candidates & chosen_words[rows[:, None], safe_index]


def mask_instances(
    input_ids: np.ndarray,
    input_mask: np.ndarray,
    spans: PairSpans,
    config: InstanceConfig,
    vocab: VocabInfo,
    rng: np.random.Generator,
    unit_flags: np.ndarray | None = None,
):
    """Applies masked-LM masking in place on `input_ids`.

    `unit_flags` (int [N, max_seq_length], `knowledge_units.mark_units`'s flags laid out like
    the rows) gives the phrases or entities of "phrase" and "entity" masking.

    Returns:
        (masked_lm_positions, masked_lm_ids, masked_lm_weights, mask_choices, mask_units,
        mask_in_phrase), each [N, max_predictions_per_seq], positions ascending then 0-padded;
        `mask_units` is the span or unit of each prediction (-1: none, or token or word masking),
        `mask_in_phrase` True where it belongs to a phrase or entity.
    """
    n, seq_length = input_ids.shape
    max_predictions = config.max_predictions_per_seq
    positions_out = np.zeros((n, max_predictions), np.int32)
    ids_out = np.zeros((n, max_predictions), np.int32)
    weights_out = np.zeros((n, max_predictions), np.float32)
    choices_out = np.zeros((n, max_predictions), np.int8)
    units_out = np.full((n, max_predictions), -1, np.int32)
    in_phrase_out = np.zeros((n, max_predictions), bool)
    if not config.do_masking or n == 0:
        return positions_out, ids_out, weights_out, choices_out, units_out, in_phrase_out

    length = input_mask.sum(axis=1).astype(np.int64)
    rows = np.arange(n)
    candidates = input_mask.astype(bool)
    candidates[:, 0] = False
    candidates[rows, spans.a_length + 1] = False
    candidates[rows, length - 1] = False
    if config.sentence_task == "none":
        candidates &= input_ids != vocab.sep_id  # the separators between documents
    num_to_predict = _num_to_predict(length, config)
    span_id = None
    if config.masking == "token":
        positions = _select_token_positions(candidates, num_to_predict, rng)
    else:
        if config.masking == "whole_word":
            selected = _select_whole_words(input_ids, candidates, num_to_predict, vocab, rng)
        elif config.masking in KNOWLEDGE_MASKING:
            selected, span_id = knowledge_units.select_units(
                candidates, vocab.is_continuation[input_ids], unit_flags, num_to_predict, rng
            )
        else:
            selected, span_id = span_masking.select_spans(
                candidates, vocab.is_continuation[input_ids], num_to_predict, rng, num_tries=2 * max_predictions
            )
        # Selected positions first (ascending), then padding.
        positions = np.sort(np.where(selected, np.arange(seq_length)[None, :], seq_length), axis=1)[:, :max_predictions]
    if positions.shape[1] < max_predictions:
        positions = np.pad(positions, [(0, 0), (0, max_predictions - positions.shape[1])], constant_values=seq_length)
    valid = positions < seq_length
    positions = np.where(valid, positions, 0)
    original = input_ids[rows[:, None], positions]

    if span_id is None:
        draw = rng.random((n, max_predictions), dtype=np.float32)
        keep_or_random = rng.random((n, max_predictions), dtype=np.float32)
    else:
        # SpanBERT decides [MASK] / random / keep once per span, for all its tokens (ERNIE: per unit).
        span_of = np.maximum(span_id[rows[:, None], positions], 0)
        units_out[:] = np.where(valid, span_of, -1)
        num_spans = int(span_id.max(initial=0)) + 1
        draw = rng.random((n, num_spans), dtype=np.float32)[rows[:, None], span_of]
        keep_or_random = rng.random((n, num_spans), dtype=np.float32)[rows[:, None], span_of]
    random_ids = rng.integers(0, vocab.vocab_size, size=(n, max_predictions))
    choice = np.where(
        draw < 0.8, MASK_CHOICE_MASK, np.where(keep_or_random < 0.5, MASK_CHOICE_KEEP, MASK_CHOICE_RANDOM)
    )
    replacement = np.where(
        choice == MASK_CHOICE_MASK, vocab.mask_id, np.where(choice == MASK_CHOICE_KEEP, original, random_ids)
    )
    valid_rows, valid_cols = np.nonzero(valid)
    input_ids[valid_rows, positions[valid_rows, valid_cols]] = replacement[valid_rows, valid_cols]

    positions_out[:] = positions
    ids_out[:] = np.where(valid, original, 0)
    weights_out[:] = valid
    choices_out[:] = np.where(valid, choice, MASK_CHOICE_NONE)
    if unit_flags is not None:
        in_phrase_out[:] = valid & (unit_flags[rows[:, None], positions] != UNIT_NONE)
    return positions_out, ids_out, weights_out, choices_out, units_out, in_phrase_out


def finish_instances(
    token_ids: np.ndarray,
    spans: PairSpans,
    config: InstanceConfig,
    vocab: VocabInfo,
    rng: np.random.Generator,
    unit_flags: dict | None = None,
) -> PretrainingInstances:
    """Truncates, lays out and masks a batch of pair spans.

    `unit_flags` maps "phrase"/"entity" to the unit flags of `token_ids` (int8, same length).
    """
    spans = truncate_pairs(spans, config.max_num_tokens, rng)
    input_ids, input_mask, segment_ids = assemble_instances(token_ids, spans, config, vocab)
    # The flags laid out like the ids, 0 at [CLS] and [SEP].
    no_specials = dataclasses.replace(vocab, cls_id=0, sep_id=0)
    laid_out = {
        mode: assemble_instances(flags, spans, config, no_specials)[0] for mode, flags in (unit_flags or {}).items()
    }
    positions, ids, weights, choices, units, in_phrase = mask_instances(
        input_ids, input_mask, spans, config, vocab, rng, laid_out.get(config.masking)
    )
    return PretrainingInstances(
        input_ids=input_ids,
        input_mask=input_mask,
        segment_ids=segment_ids,
        masked_lm_positions=positions,
        masked_lm_ids=ids,
        masked_lm_weights=weights,
        sentence_labels=spans.is_random_next.astype(np.int32),
        mask_choices=choices,
        one_sentence=spans.one_sentence,
        mask_units=units,
        mask_in_phrase=in_phrase,
        unit_features={} if config.do_masking else {UNIT_FEATURES[m]: f for m, f in laid_out.items()},
    )


def chunk_seeds(random_seed: int, chunk_index: int):
    """(python_seed, numpy_generator) of one chunk, independent of other chunks.

    Any integer seed works, as in the original (Python's `random.Random`):
    numpy's `SeedSequence` takes only non-negative entropy, so a negative seed
    `s` seeds with `[-s, chunk_index, 1]`, which no non-negative seed's
    `[s, chunk_index]` (the same as `[s, chunk_index, 0]` to `SeedSequence`) gives.
    """
    entropy = [random_seed, chunk_index] if random_seed >= 0 else [-random_seed, chunk_index, 1]
    sequence = np.random.SeedSequence(entropy)
    python_seed = int.from_bytes(sequence.generate_state(4).tobytes(), "little")
    return python_seed, np.random.Generator(np.random.PCG64(sequence.spawn(1)[0]))


def create_instances(
    chunk: DocumentChunk,
    config: InstanceConfig,
    vocab: VocabInfo,
    seed: int,
    chunk_index: int = 0,
    batch_size: int | None = 4096,
    units: dict | None = None,
):
    """Yields `PretrainingInstances` batches for one chunk, shuffled.

    Args:
        chunk: the documents.
        config: instance parameters.
        vocab: special ids and `##` table.
        seed: the run's random seed.
        chunk_index: position of the chunk in the corpus; with `seed` it fixes
            every random draw, so chunks can be processed in any process or order.
        batch_size: instances per yielded batch (bounds memory); None = all.
        units: "phrase"/"entity" -> `knowledge_units.UnitTable`: the units of
            `config.masking` (needed for it), or, for unmasked records, every
            mode whose unit flags the records should carry.
    """
    python_seed, generator = chunk_seeds(seed, chunk_index)
    if chunk.num_documents == 0:
        return
    unit_flags = _chunk_unit_flags(chunk, config, vocab, units or {})
    token_ids = chunk.token_ids
    if config.sentence_task == "none":
        token_ids, spans, unit_flags = _full_sentence_spans(
            chunk, config, vocab, random.Random(python_seed), unit_flags
        )
    elif config.sentence_task == "sop":
        spans = create_sentence_order_spans(chunk, config, random.Random(python_seed))
    else:
        spans = create_pair_spans(chunk, config, random.Random(python_seed))
    spans = spans.take(generator.permutation(len(spans)))
    step = batch_size or max(len(spans), 1)
    for begin in range(0, len(spans), step):
        yield finish_instances(token_ids, spans.take(slice(begin, begin + step)), config, vocab, generator, unit_flags)


def _chunk_unit_flags(chunk: DocumentChunk, config: InstanceConfig, vocab: VocabInfo, units: dict) -> dict:
    """mode -> `knowledge_units.mark_units` flags of the chunk's tokens, for the modes the instances need."""
    if config.masking not in KNOWLEDGE_MASKING:
        return {}
    if config.do_masking:
        if config.masking not in units:
            raise ValueError(f"--masking={config.masking} needs its units (a knowledge_units.UnitTable).")
        units = {config.masking: units[config.masking]}
    return {
        mode: knowledge_units.mark_units(chunk.token_ids, chunk.sentence_offsets, table, vocab.is_continuation)
        for mode, table in units.items()
    }


# Unit flags ride above the ids through the full-sentence stream (vocabularies hold < 2**24 ids).
_FLAG_SHIFT = 24


def _full_sentence_spans(chunk, config, vocab, rng, unit_flags):
    """`create_full_sentence_spans`, carrying each mode's unit flags into the stream (0 at its separators)."""
    if not unit_flags:
        return (*create_full_sentence_spans(chunk, config, vocab, rng), {})
    if vocab.vocab_size > 1 << _FLAG_SHIFT:
        raise ValueError(f"phrase and entity masking take vocabularies of at most 2**{_FLAG_SHIFT} ids")
    (mode, flags), *others = unit_flags.items()
    carried = dataclasses.replace(chunk, token_ids=chunk.token_ids | (flags.astype(np.int32) << _FLAG_SHIFT))
    if others:  # the second mode's flags two bits higher
        carried.token_ids |= others[0][1].astype(np.int32) << (_FLAG_SHIFT + 2)
    stream, spans = create_full_sentence_spans(carried, config, vocab, rng)
    stream_flags = {mode: ((stream >> _FLAG_SHIFT) & 3).astype(np.int8)}
    if others:
        stream_flags[others[0][0]] = ((stream >> (_FLAG_SHIFT + 2)) & 3).astype(np.int8)
    return stream & ((1 << _FLAG_SHIFT) - 1), spans, stream_flags
