"""Dynamic (per-epoch) masked-LM masking of pretraining batches, RoBERTa style.

Static TFRecords fix each instance's mask when they are written
(`dupe_factor` masks per sentence). Dynamic masking draws a new mask every
time a batch is read, with tensorflow_text's `mask_language_model`
(`RandomItemSelector` + `MaskValuesChooser`): per sequence,
`ceil(masked_lm_prob * selectable tokens)` positions (at most
`max_predictions_per_seq`; never [CLS], [SEP], [PAD] or other
`unselectable_ids`), each replaced by [MASK] 80%, a random id 10%, itself 10%.

Records that were written masked are first restored from their
`masked_lm_positions`/`masked_lm_ids`, so any pretraining TFRecord works.

Randomness is stateless, seeded per batch: stateful random ops cannot be saved
in a tf.data iterator checkpoint, and the training loop resumes mid-epoch from
one.
"""

import dataclasses
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_text as tf_text


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
    """

    vocab_size: int
    mask_token_id: int
    unselectable_ids: Sequence[int]
    masked_lm_prob: float = 0.15
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1

    def __post_init__(self):
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if min(self.mask_token_rate, self.random_token_rate) < 0 or self.mask_token_rate + self.random_token_rate > 1.0:
            raise ValueError(
                "mask_token_rate and random_token_rate must be >= 0 with a sum "
                f"<= 1, got {self.mask_token_rate} and {self.random_token_rate}"
            )
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ValueError(f"mask_token_id {self.mask_token_id} is not in [0, vocab_size={self.vocab_size})")

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


def dynamic_mask_batch(features, config: DynamicMaskingConfig, max_predictions_per_seq: int, seed):
    """Re-masks one parsed batch.

    Args:
        features: dict with int32 `input_word_ids`, `input_mask` [batch, seq]
            and `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`
            [batch, max_predictions] (all-zero weights for unmasked records).
        config: masking parameters.
        max_predictions_per_seq: width of the masked_lm_* outputs.
        seed: int [2] stateless seed of this batch.

    Returns:
        A new dict with the same keys and shapes.
    """
    seed = tf.cast(seed, tf.int64)
    selector_seed, chooser_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    ids = restore_masked_tokens(
        features["input_word_ids"],
        features["masked_lm_positions"],
        features["masked_lm_ids"],
        features["masked_lm_weights"],
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


def apply_dynamic_masking(
    dataset: tf.data.Dataset, config: DynamicMaskingConfig, max_predictions_per_seq: int, seed: int | None = None
) -> tf.data.Dataset:
    """Maps `dynamic_mask_batch` over a dataset of parsed batches.

    Per-batch seeds come from `tf.data.Dataset.random(seed)`, which is saved in
    iterator checkpoints; the same `seed` gives the same masks.
    """
    seeds = tf.data.Dataset.random(seed=seed).batch(2, drop_remainder=True)
    return tf.data.Dataset.zip((dataset, seeds)).map(
        lambda features, batch_seed: dynamic_mask_batch(features, config, max_predictions_per_seq, batch_seed),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
