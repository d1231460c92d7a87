"""The main job's settings: one dataclass, built from the job's flags (same names) and checked once.

The steps (`experiments.demo.steps`) read this object, never the flags, so they run the same from a test or
another program: `DemoConfig(output_dir="runs/demo", tours=("probes",))`.
"""

import dataclasses
import os

from bert_tf import errors

# The optional tours of the job (`--tours`): name -> what it adds.
TOURS = {
    "probes": "every layer's frozen features probed (POS tags, reviews), against random twins",
    "distillation": "the real-weights classifier distilled into a smaller, faster student",
}

# The bundled reviews' labels 0 and 1 (data/README.md).
LABEL_NAMES = ("other", "great")

_POSITIVE = (
    "num_layers",
    "pretrain_steps",
    "pretrain_batch_size",
    "max_seq_length",
    "max_predictions_per_seq",
    "dupe_factor",
    "real_weights_seq_length",
    "real_weights_epochs",
    "small_encoder_epochs",
    "distill_student_layers",
    "distill_seq_length",
    "distill_speed_examples",
    "vocab_size",
    "vocab_input_words",
    "tool_time_limit_minutes",
)
_NOT_NEGATIVE = ("corpus_lines", "train_examples", "test_examples", "probe_sentences", "probe_reviews")


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """What the main job builds and how; each field is the job's flag of the same name (its help there)."""

    output_dir: str = "runs/demo"
    tours: tuple = ()
    # Pretraining from scratch.
    vocab_size: int = 8000
    vocab_input_words: int = 8000
    num_layers: int = 2
    hidden_size: int = 128
    max_seq_length: int = 64
    max_predictions_per_seq: int = 10
    dupe_factor: int = 2
    pretrain_steps: int = 1000
    pretrain_batch_size: int = 32
    pretrain_learning_rate: float = 5e-4
    pretrain_dropout: float = 0.0
    distribution_strategy: str = "one_device"
    # Real published weights.
    real_weights_dir: str | None = None
    real_weights_seq_length: int = 128
    real_weights_epochs: int = 1
    real_weights_learning_rate: float = 1e-4
    real_weights_packing: bool = True
    # The small encoders.
    small_encoder_epochs: int = 2
    small_encoder_learning_rate: float = 1e-3
    finetune_from_scratch: bool = True
    compare_random_init: bool = True
    # The distillation tour.
    distill_student_layers: int = 3
    distill_seq_length: int = 64
    distill_epochs: float = 1.0
    distill_learning_rate: float = 1e-4
    distill_speed_examples: int = 256
    # Smaller runs.
    corpus_lines: int = 0
    train_examples: int = 0
    test_examples: int = 0
    probe_sentences: int = 1000
    probe_reviews: int = 2000
    tool_time_limit_minutes: int = 60

    def __post_init__(self):
        tours = tuple(dict.fromkeys(t.strip() for t in self.tours if t.strip()))
        unknown = [t for t in tours if t not in TOURS]
        if unknown:
            raise errors.BadInputError(f"--tours: unknown tour {unknown[0]!r}; the tours are {', '.join(TOURS)}.")
        object.__setattr__(self, "tours", tours)
        if self.hidden_size < 64 or self.hidden_size % 64:
            raise errors.BadInputError(f"--hidden_size={self.hidden_size} must be a multiple of 64 (heads of size 64).")
        for name in _POSITIVE:
            if getattr(self, name) < 1:
                raise errors.BadInputError(f"--{name} must be positive, got {getattr(self, name)}.")
        for name in _NOT_NEGATIVE:
            if getattr(self, name) < 0:
                raise errors.BadInputError(f"--{name} must be 0 or more, got {getattr(self, name)}.")
        for name in ("pretrain_learning_rate", "real_weights_learning_rate", "small_encoder_learning_rate"):
            if not getattr(self, name) > 0:
                raise errors.BadInputError(f"--{name} must be positive, got {getattr(self, name)}.")
        if not self.distill_epochs > 0:
            raise errors.BadInputError(f"--distill_epochs must be positive, got {self.distill_epochs}.")
        if not 0 <= self.pretrain_dropout < 1:
            raise errors.BadInputError(f"--pretrain_dropout must be in [0, 1), got {self.pretrain_dropout}.")
        if self.distribution_strategy not in ("one_device", "mirrored"):
            raise errors.BadInputError(
                f"--distribution_strategy={self.distribution_strategy}: the demo pretrains on this host "
                "(one_device or mirrored); run experiments.pretrain for multi-worker or TPU pretraining."
            )
        if self.real_weights_dir and not os.path.isdir(self.real_weights_dir):
            raise errors.BadInputError(f"--real_weights_dir: directory not found: {self.real_weights_dir}")

    def runs(self, tour: str) -> bool:
        """Whether the optional tour `tour` (a key of `TOURS`) is part of this run."""
        return tour in self.tours

    def small_encoder_config(self, vocab_size=None):
        """The `BertConfig` of the encoder step 3 pretrains (and of its random twin); `vocab_size`: the learned
        vocabulary's, when step 1 has run."""
        from bert_tf.config import BertConfig

        return BertConfig(
            vocab_size=vocab_size or self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.hidden_size // 64,
            intermediate_size=4 * self.hidden_size,
            max_position_embeddings=max(128, self.max_seq_length),
        )

    def tool_time_limit_seconds(self) -> float:
        return 60.0 * self.tool_time_limit_minutes
