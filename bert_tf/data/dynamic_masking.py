"""Dynamic (per-epoch) masked-LM masking of pretraining batches, RoBERTa style.

Static TFRecords fix each instance's mask when they are written
(`dupe_factor` masks per sentence). Dynamic masking draws a new mask every
time a batch is read, with tensorflow_text's `mask_language_model`
(`RandomItemSelector` + `MaskValuesChooser`): per sequence,
`ceil(masked_lm_prob * selectable tokens)` positions (at most
`max_predictions_per_seq`; never [CLS], [SEP], [PAD] or other
`unselectable_ids`), each replaced by [MASK] 80%, a random id 10%, itself 10%.

With `masking="whole_word"` or `"span"` (SpanBERT), the selection is by
whole words (a token and the `##` pieces after it) instead, as the writer's
`bert_tf.pretraining_data.span_masking` does it: spans of Geometric(0.2)
words cut at 10 ("span") or of one word ("whole_word") are drawn until
`ceil(masked_lm_prob * selectable tokens)` tokens (at most
`max_predictions_per_seq`) are chosen, never overflowing; a span is replaced
by [MASK] 80%, random ids 10%, itself 10% as a whole ("span"; per token for
"whole_word").

With `masking="phrase"` or `"entity"` (ERNIE's knowledge masking), units
(whole phrases or entities, and each word outside them) are chosen in random
order, each skipped whole when it would overflow the same budget, the 80/10/10
choice made once per unit (`bert_tf.pretraining_data.knowledge_units.select_units`'s
algorithm). The units come from the records: `create_pretraining_data
--masking=phrase|entity --nodo_masking` stores their flags (`phrase_units`,
`entity_units`), which the reader passes in the batch. `schedule` switches
the mode over training (ERNIE's stages: token, then phrase, then entity
masking), counted in batches read, which tf.data saves with the iterator.

Records that were written masked are first restored from their
`masked_lm_positions`/`masked_lm_ids`, so any pretraining TFRecord works.

Randomness is stateless, seeded per batch: stateful random ops cannot be saved
in a tf.data iterator checkpoint, and the training loop resumes mid-epoch from
one.
"""

import dataclasses
import math
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.data.pretraining_schema import (
    KNOWLEDGE_MASKING,
    MASKING_METHODS,
    MAX_SPAN_WORDS,
    SPAN_GEOMETRIC_P,
    UNIT_CONTINUE,
    UNIT_FEATURES,
    UNIT_NONE,
)


@dataclasses.dataclass(frozen=True)
class DynamicMaskingConfig:
    """How to re-mask batches.

    Attributes:
        vocab_size: ids of random replacements are drawn from [0, vocab_size).
        mask_token_id: id of [MASK].
        unselectable_ids: ids never masked (at least [PAD], [CLS], [SEP]).
        masked_lm_prob: fraction of selectable tokens to predict.
        mask_token_rate: fraction of predictions replaced by [MASK].
        random_token_rate: fraction replaced by a random id (the rest keep
            their token).
        masking: "token", "whole_word", "span", "phrase" or "entity" (see the module docstring).
        continuation_ids: ids of the `##` pieces (words for all but "token").
        schedule: ((mode, fraction), ...): each mode for its fraction of
            `schedule_batches` batches, in order (the last one after them);
            empty: `masking` throughout.
        schedule_batches: the batches the fractions of `schedule` are of.
    """

    vocab_size: int
    mask_token_id: int
    unselectable_ids: Sequence[int]
    masked_lm_prob: float = 0.15
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1
    masking: str = "token"
    continuation_ids: Sequence[int] = ()
    schedule: tuple = ()
    schedule_batches: int = 0

    def __post_init__(self):
        for mode in [self.masking] + [mode for mode, _ in self.schedule]:
            if mode not in MASKING_METHODS:
                raise ValueError(f"masking must be one of {MASKING_METHODS}, got {mode!r}")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if min(self.mask_token_rate, self.random_token_rate) < 0 or self.mask_token_rate + self.random_token_rate > 1.0:
            raise ValueError(
                "mask_token_rate and random_token_rate must be >= 0 with a sum "
                f"<= 1, got {self.mask_token_rate} and {self.random_token_rate}"
            )
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ValueError(f"mask_token_id {self.mask_token_id} is not in [0, vocab_size={self.vocab_size})")

    @property
    def modes(self) -> tuple:
        """Every masking mode the config uses."""
        return tuple(dict.fromkeys([mode for mode, _ in self.schedule] or [self.masking]))

    @property
    def unit_features(self) -> tuple:
        """The record features of unit flags the modes need (`pretraining_schema.UNIT_FEATURES`)."""
        return tuple(UNIT_FEATURES[mode] for mode in self.modes if mode in KNOWLEDGE_MASKING)

    @classmethod
    def from_vocab_file(cls, vocab_file: str, **kwargs):
        """Reads [MASK] and the never-masked [PAD]/[CLS]/[SEP] from a vocab."""
        from bert_tf import tokenization

        return cls.from_vocab(tokenization.load_vocab(vocab_file), vocab_file, **kwargs)

    @classmethod
    def from_vocab(cls, tokens, vocab_file: str = "<vocab>", **kwargs):
        """`from_vocab_file` for tokens already read (`vocab_file` names them in errors)."""
        index = {token: i for i, token in enumerate(tokens)}
        missing = [t for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]") if t not in index]
        if missing:
            raise ValueError(f"vocabulary {vocab_file} has no {', '.join(missing)} token, needed for dynamic masking")
        return cls(
            vocab_size=len(tokens),
            mask_token_id=index["[MASK]"],
            unselectable_ids=(index["[PAD]"], index["[CLS]"], index["[SEP]"]),
            continuation_ids=tuple(i for i, token in enumerate(tokens) if token.startswith("##")),
            **kwargs,
        )


class StatelessMaskValuesChooser(tf_text.MaskValuesChooser):
    """`MaskValuesChooser` whose draws come from a seed (checkpoint-safe)."""

    def __init__(self, vocab_size, mask_token, mask_token_rate, random_token_rate, seed):
        super().__init__(vocab_size, mask_token, mask_token_rate=mask_token_rate, random_token_rate=random_token_rate)
        # The base class exposes no getter for this rate.
        self._rate_of_mask_token = mask_token_rate
        self._seed = seed

    def get_mask_values(self, masked_lm_ids):
        flat = masked_lm_ids.flat_values
        choice_seed, id_seed = tf.unstack(tf.random.experimental.stateless_split(self._seed, 2))
        draw = tf.random.stateless_uniform(tf.shape(flat), seed=choice_seed)
        random_ids = tf.random.stateless_uniform(
            tf.shape(flat), seed=id_seed, minval=0, maxval=self.vocab_size, dtype=flat.dtype
        )
        values = tf.where(
            draw < self._rate_of_mask_token,
            tf.cast(self.mask_token, flat.dtype),
            tf.where(draw < self._rate_of_mask_token + self.random_token_rate, random_ids, flat),
        )
        return masked_lm_ids.with_flat_values(values)


def _stateless_shuffle_fn(seed):
    """Shuffle for `RandomItemSelector`, seeded per row.

    The selector calls it once per row with the row's flat positions; the
    first of them is unique to the row, so folding it into the seed gives every
    row its own permutation.
    """

    def shuffle(positions):
        first = tf.concat([tf.cast(positions, tf.int64), tf.constant([-1], tf.int64)], 0)[0]
        row_seed = tf.random.experimental.stateless_fold_in(seed, first)
        return tf.random.experimental.stateless_shuffle(positions, seed=row_seed)

    return shuffle


def restore_masked_tokens(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
    """Puts the original tokens back at masked positions.

    Args:
        input_ids: int [batch, seq_length].
        masked_lm_positions, masked_lm_ids: int [batch, max_predictions].
        masked_lm_weights: float [batch, max_predictions]; 0 marks padding.

    Returns:
        int [batch, seq_length], the unmasked ids.
    """
    real = masked_lm_weights > 0
    rows = tf.broadcast_to(tf.range(tf.shape(masked_lm_positions)[0])[:, None], tf.shape(masked_lm_positions))
    indices = tf.stack(
        [tf.boolean_mask(rows, real), tf.boolean_mask(tf.cast(masked_lm_positions, tf.int32), real)], axis=1
    )
    updates = tf.cast(tf.boolean_mask(masked_lm_ids, real), input_ids.dtype)
    return tf.tensor_scatter_nd_update(input_ids, indices, updates)


def dynamic_mask_batch(
    features, config: DynamicMaskingConfig, max_predictions_per_seq: int, seed, masking: str | None = None
):
    """Re-masks one parsed batch.

    Args:
        features: dict with int32 `input_word_ids`, `input_mask` [batch, seq]
            and `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`
            [batch, max_predictions] (all-zero weights for unmasked records);
            for "phrase" and "entity", the unit flags `phrase_units` or
            `entity_units` int32 [batch, seq].
        config: masking parameters.
        max_predictions_per_seq: width of the masked_lm_* outputs.
        seed: int [2] stateless seed of this batch.
        masking: the mode of this batch (default `config.masking`).

    Returns:
        A new dict with the same keys and shapes, without the unit flags.
    """
    masking = masking or config.masking
    features = dict(features)
    unit_flags = {name: features.pop(name) for name in UNIT_FEATURES.values() if name in features}
    seed = tf.cast(seed, tf.int64)
    selector_seed, chooser_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    ids = restore_masked_tokens(
        features["input_word_ids"],
        features["masked_lm_positions"],
        features["masked_lm_ids"],
        features["masked_lm_weights"],
    )
    if masking != "token":
        flags = unit_flags.get(UNIT_FEATURES.get(masking))
        if masking in KNOWLEDGE_MASKING and flags is None:
            raise ValueError(f"masking={masking!r} needs the records' {UNIT_FEATURES[masking]!r} feature in the batch")
        return _mask_whole_words(
            features, ids, config, max_predictions_per_seq, selector_seed, chooser_seed, masking, flags
        )
    batch = tf.shape(ids)[0]
    seq_length = tf.shape(ids)[1]
    lengths = tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1)
    ragged = tf.RaggedTensor.from_tensor(ids, lengths=lengths)
    selector = tf_text.RandomItemSelector(
        max_selections_per_batch=max_predictions_per_seq,
        selection_rate=config.masked_lm_prob,
        unselectable_ids=list(config.unselectable_ids),
        shuffle_fn=_stateless_shuffle_fn(selector_seed),
    )
    chooser = StatelessMaskValuesChooser(
        config.vocab_size, config.mask_token_id, config.mask_token_rate, config.random_token_rate, chooser_seed
    )
    masked, positions, labels = tf_text.mask_language_model(ragged, selector, chooser)
    out = dict(features)
    out["input_word_ids"] = tf.ensure_shape(
        tf.cast(masked.to_tensor(default_value=0, shape=tf.stack([batch, seq_length])), tf.int32),
        features["input_word_ids"].shape,
    )
    width = [batch, max_predictions_per_seq]
    out["masked_lm_positions"] = tf.ensure_shape(
        tf.cast(positions.to_tensor(default_value=0, shape=width), tf.int32), features["masked_lm_positions"].shape
    )
    out["masked_lm_ids"] = tf.ensure_shape(
        tf.cast(labels.to_tensor(default_value=0, shape=width), tf.int32), features["masked_lm_ids"].shape
    )
    out["masked_lm_weights"] = tf.ensure_shape(
        tf.sequence_mask(positions.row_lengths(), max_predictions_per_seq, dtype=tf.float32),
        features["masked_lm_weights"].shape,
    )
    return out


def span_lengths_tf(u):
    """`span_masking.span_lengths_from_uniform` in TensorFlow: float32 uniform draws -> int32 span lengths."""
    mass = 1.0 - (1.0 - SPAN_GEOMETRIC_P) ** MAX_SPAN_WORDS
    lengths = tf.cast(tf.math.floor(tf.math.log1p(-u * mass) / math.log1p(-SPAN_GEOMETRIC_P)), tf.int32) + 1
    return tf.clip_by_value(lengths, 1, MAX_SPAN_WORDS)


def _is_continuation(ids, config: DynamicMaskingConfig):
    """bool [batch, seq_length]: the token is a `##` piece."""
    table = tf.scatter_nd(
        tf.constant([[i] for i in config.continuation_ids], tf.int32, shape=[len(config.continuation_ids), 1]),
        tf.ones([len(config.continuation_ids)], tf.bool),
        [config.vocab_size],
    )
    return tf.gather(table, tf.clip_by_value(ids, 0, config.vocab_size - 1))


def _group_runs(candidates, joins):
    """Groups each row's candidate positions into items (words, or units): one item per run of a position and
    the positions after it that `joins` the candidate before them.

    Returns:
      item_index: int32 [batch, seq_length], the row's item at each candidate position, -1 elsewhere;
      num_items: int32 [batch];
      item_length: int32 [batch, seq_length], the length in tokens of item i at column i.
    """
    batch, seq_length = tf.shape(candidates)[0], tf.shape(candidates)[1]
    previous = tf.pad(candidates[:, :-1], [[0, 0], [1, 0]])
    starts = candidates & ~(joins & previous)
    item_index = tf.where(candidates, tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, -1)
    num_items = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    # Item lengths by (row, item): a segment sum over the candidate positions.
    segment = tf.where(candidates, tf.range(batch)[:, None] * seq_length + item_index, batch * seq_length)
    item_length = tf.reshape(
        tf.math.unsorted_segment_sum(tf.ones_like(segment), segment, batch * seq_length + 1)[:-1], [batch, seq_length]
    )
    return item_index, num_items, item_length


def _select_word_spans(ids, candidates, config: DynamicMaskingConfig, budget, num_tries: int, seed, masking):
    """Whole-word spans per row (`span_masking.select_spans`'s algorithm, stateless).

    Returns:
      int32 [batch, seq_length]: the try that chose each position, -1 where none.
    """
    batch, seq_length = tf.shape(ids)[0], tf.shape(ids)[1]
    word_index, num_words, word_length = _group_runs(candidates, _is_continuation(ids, config))
    max_words = MAX_SPAN_WORDS if masking == "span" else 1
    offsets = tf.range(max_words)[None, :]
    word_span = tf.fill([batch, seq_length], -1)
    count = tf.zeros([batch], tf.int32)
    for attempt in range(num_tries):
        length_seed, anchor_seed = tf.unstack(
            tf.random.experimental.stateless_split(tf.random.experimental.stateless_fold_in(seed, attempt), 2)
        )
        if masking == "span":
            lengths = span_lengths_tf(tf.random.stateless_uniform([batch], length_seed))
        else:
            lengths = tf.ones([batch], tf.int32)
        anchors = tf.cast(
            tf.math.floor(tf.random.stateless_uniform([batch], anchor_seed) * tf.cast(num_words, tf.float32)), tf.int32
        )
        anchors = tf.minimum(anchors, tf.maximum(num_words - 1, 0))
        words = anchors[:, None] + offsets
        in_span = (offsets < lengths[:, None]) & (words < num_words[:, None])
        safe_words = tf.minimum(words, seq_length - 1)
        free = tf.gather(word_span, safe_words, batch_dims=1) < 0
        size = tf.where(in_span, tf.gather(word_length, safe_words, batch_dims=1), 0)
        fits = count[:, None] + tf.cumsum(size, axis=1) <= budget[:, None]
        take = tf.cast(tf.math.cumprod(tf.cast(in_span & free & fits, tf.int32), axis=1), tf.bool)
        take &= (count < budget)[:, None]
        chosen = tf.reduce_any(tf.one_hot(safe_words, seq_length, on_value=True, off_value=False) & take[..., None], 1)
        word_span = tf.where(chosen, attempt, word_span)
        count += tf.reduce_sum(tf.where(take, size, 0), axis=1)
    return tf.where(word_index >= 0, tf.gather(word_span, tf.maximum(word_index, 0), batch_dims=1), -1)


def _select_units(ids, candidates, unit_flags, config: DynamicMaskingConfig, budget, seed):
    """Phrases or entities and the words outside them, per row (`knowledge_units.select_units`'s algorithm,
    stateless).

    Returns:
      int32 [batch, seq_length]: the item (unit or word) that chose each position, -1 where none.
    """
    batch, seq_length = tf.shape(ids)[0], tf.shape(ids)[1]
    unit_flags = tf.cast(unit_flags, tf.int32)
    # Inside a unit its flags join the tokens; outside, the `##` pieces join their word.
    joins = tf.where(unit_flags != UNIT_NONE, unit_flags == UNIT_CONTINUE, _is_continuation(ids, config))
    item_index, num_items, item_length = _group_runs(candidates, joins)
    slot = tf.range(seq_length)[None, :]
    keys = tf.where(slot < num_items[:, None], tf.random.stateless_uniform([batch, seq_length], seed), 2.0)
    order = tf.argsort(keys, axis=1, stable=True)
    sorted_length = tf.gather(item_length, order, batch_dims=1)

    def visit(r, count, taken):
        size = sorted_length[:, r]
        take = (r < num_items) & (count + size <= budget)
        return r + 1, count + tf.where(take, size, 0), taken | ((slot == r) & take[:, None])

    _, _, taken = tf.while_loop(
        lambda r, count, taken: r < tf.reduce_max(num_items),
        visit,
        (tf.constant(0), tf.zeros([batch], tf.int32), tf.zeros([batch, seq_length], tf.bool)),
    )
    chosen = tf.gather(taken, tf.argsort(order, axis=1), batch_dims=1)  # by item
    selected = candidates & tf.gather(chosen, tf.maximum(item_index, 0), batch_dims=1)
    return tf.where(selected, item_index, -1)


def _mask_whole_words(
    features,
    ids,
    config: DynamicMaskingConfig,
    max_predictions_per_seq,
    selector_seed,
    chooser_seed,
    masking,
    unit_flags=None,
):
    """`dynamic_mask_batch` for every masking but "token"."""
    batch, seq_length = tf.shape(ids)[0], tf.shape(ids)[1]
    position = tf.range(seq_length)[None, :]
    lengths = tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1)
    candidates = position < lengths[:, None]
    for unselectable in config.unselectable_ids:
        candidates &= ids != unselectable
    num_candidates = tf.reduce_sum(tf.cast(candidates, tf.float32), axis=1)
    budget = tf.minimum(
        tf.cast(tf.math.ceil(config.masked_lm_prob * num_candidates), tf.int32), max_predictions_per_seq
    )
    num_tries = 2 * max_predictions_per_seq
    if masking in KNOWLEDGE_MASKING:
        span_of = _select_units(ids, candidates, unit_flags, config, budget, selector_seed)
        num_units = seq_length
    else:
        span_of = _select_word_spans(ids, candidates, config, budget, num_tries, selector_seed, masking)
        num_units = num_tries
    # The chosen positions in ascending order, then `seq_length` as padding.
    ordered = tf.sort(tf.where(span_of >= 0, position, seq_length), axis=1)
    ordered = tf.pad(ordered, [[0, 0], [0, max_predictions_per_seq]], constant_values=seq_length)
    ordered = ordered[:, :max_predictions_per_seq]
    valid = ordered < seq_length
    positions = tf.where(valid, ordered, 0)
    labels = tf.gather(ids, positions, batch_dims=1)

    choice_seed, keep_seed, id_seed = tf.unstack(tf.random.experimental.stateless_split(chooser_seed, 3))
    width = [batch, max_predictions_per_seq]
    if masking != "whole_word":
        # One choice per span or unit, for all its tokens.
        span_ids = tf.maximum(tf.gather(span_of, positions, batch_dims=1), 0)
        draw = tf.gather(tf.random.stateless_uniform([batch, num_units], choice_seed), span_ids, batch_dims=1)
    else:
        draw = tf.random.stateless_uniform(width, choice_seed)
    random_ids = tf.random.stateless_uniform(width, id_seed, minval=0, maxval=config.vocab_size, dtype=tf.int32)
    values = tf.where(
        draw < config.mask_token_rate,
        tf.cast(config.mask_token_id, labels.dtype),
        tf.where(draw < config.mask_token_rate + config.random_token_rate, tf.cast(random_ids, labels.dtype), labels),
    )
    indices = tf.stack([tf.broadcast_to(tf.range(batch)[:, None], width), positions], axis=-1)
    masked = tf.tensor_scatter_nd_update(
        ids, tf.boolean_mask(indices, valid), tf.boolean_mask(tf.cast(values, ids.dtype), valid)
    )
    out = dict(features)
    out["input_word_ids"] = tf.ensure_shape(tf.cast(masked, tf.int32), features["input_word_ids"].shape)
    out["masked_lm_positions"] = tf.ensure_shape(tf.cast(positions, tf.int32), features["masked_lm_positions"].shape)
    out["masked_lm_ids"] = tf.ensure_shape(
        tf.cast(tf.where(valid, labels, 0), tf.int32), features["masked_lm_ids"].shape
    )
    out["masked_lm_weights"] = tf.ensure_shape(tf.cast(valid, tf.float32), features["masked_lm_weights"].shape)
    return out


def apply_dynamic_masking(
    dataset: tf.data.Dataset, config: DynamicMaskingConfig, max_predictions_per_seq: int, seed: int | None = None
) -> tf.data.Dataset:
    """Maps `dynamic_mask_batch` over a dataset of parsed batches.

    Per-batch seeds come from `tf.data.Dataset.random(seed)`, and with a
    `config.schedule` the stage from the number of batches read
    (`tf.data.Dataset.range`); both are saved in iterator checkpoints, so the
    same `seed` gives the same masks, resumed or not.
    """
    seeds = tf.data.Dataset.random(seed=seed).batch(2, drop_remainder=True)
    if not config.schedule:
        return tf.data.Dataset.zip((dataset, seeds)).map(
            lambda features, batch_seed: dynamic_mask_batch(features, config, max_predictions_per_seq, batch_seed),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
    if config.schedule_batches < 1:
        raise ValueError(f"a masking schedule needs schedule_batches >= 1, got {config.schedule_batches}")
    ends = schedule_ends(config.schedule, config.schedule_batches)

    modes = config.modes
    stage_modes = tf.constant([modes.index(mode) for mode, _ in config.schedule], tf.int32)

    def mask_stage(features, batch_seed, index):
        stage = tf.reduce_sum(tf.cast(index >= tf.constant(ends, tf.int64), tf.int32))
        mode_index = tf.gather(stage_modes, tf.minimum(stage, len(ends) - 1))
        # Every mode masks the batch and the stage's result is kept: a tf.switch_case around tensorflow_text's
        # masking (which holds stateful assertions) would make the iterator impossible to checkpoint.
        result = dynamic_mask_batch(features, config, max_predictions_per_seq, batch_seed, modes[0])
        for i, mode in enumerate(modes[1:], 1):
            masked = dynamic_mask_batch(features, config, max_predictions_per_seq, batch_seed, mode)
            result = tf.nest.map_structure(lambda kept, new, i=i: tf.where(mode_index == i, new, kept), result, masked)
        return result

    return tf.data.Dataset.zip((dataset, seeds, tf.data.Dataset.range(2**62))).map(
        mask_stage, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )


def schedule_ends(schedule, num_batches: int) -> list:
    """The batch index at which each stage of `schedule` ends (the cumulative fractions of `num_batches`)."""
    ends, total = [], 0.0
    for _, fraction in schedule:
        total += fraction
        ends.append(int(round(total * num_batches)))
    return ends
