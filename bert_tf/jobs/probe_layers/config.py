"""`ProbeLayersConfig`: what `bert_tf.jobs.probe_layers` probes and how (the flags of `experiments.probe_layers`)."""

from __future__ import annotations

import dataclasses

from bert_tf.checkpoints.model_source import ModelSource
from bert_tf.data.length_buckets import DEFAULT_BUCKET_WIDTH
from bert_tf.errors import JobArgumentError, check_int
from bert_tf.jobs import DEFAULT_SEED
from bert_tf.probing import data as data_lib
from bert_tf.probing.layer_features import WORD_PIECE_MODES

TASKS = (data_lib.TOKEN, data_lib.SENTENCE)
# The report's sections of each task: words, and sentences by their mean and by [CLS].
REPORT_KEYS = {data_lib.TOKEN: ("token",), data_lib.SENTENCE: ("sentence_mean", "sentence_cls")}
#: Written as each part of the job finishes, removed when report.json is complete (a stopped run keeps it).
PARTIAL_REPORT_NAME = "report.partial.json"


@dataclasses.dataclass(frozen=True)
class ProbeLayersConfig:
    """What to probe and how (the flags of the same names).

    Attributes:
      model: the model's files.
      token_train_file, token_test_file: `word<TAB>tag` files; None: the bundled Brown tags.
      sentence_train_file, sentence_test_file: `text<TAB>label` TSVs; None: the bundled reviews.
      tasks: a subset of `TASKS`.
      max_seq_length, batch_size, bucket_width: the forward passes (bucket_width 0: pad to max_seq_length).
      packing: the forward passes run rows filled with whole sentences, each computed as if alone
        (`bert_tf.data.packed_rows`; the default); False: one sentence a row in length buckets. The same
        features to float rounding, so the cache key leaves it out. The fine-tuned reference row batches as
        fine-tuning resolves it (one example a row while `finetune_microbatches` > 1, logged).
      word_piece: "first" or "mean": a word's representation.
      random_control: also probe the randomly initialised twin.
      finetune: add the fine-tuned reference row; finetune_epochs, finetune_learning_rate,
        finetune_batch_size its recipe (BERT's schedule: 10% warm-up, then linear decay);
        finetune_min_steps: at least this many steps however small the training file (more epochs), so that
        the reference row is a fine-tuned model rather than one barely past its warm-up;
        finetune_microbatches: each batch runs as this many pieces with summed gradients (the loop's
        `num_microbatches`), so activation memory shrinks and the default run keeps its memory budget.
      dev_fraction: the training file's share held out to choose each probe's strength.
      seed: the development split, the random twin's weights, the probes and the fine-tuning.
      cache_dir: the features' cache; None: `<output_dir>/feature_cache`.
    """

    model: ModelSource
    token_train_file: str | None = None
    token_test_file: str | None = None
    sentence_train_file: str | None = None
    sentence_test_file: str | None = None
    tasks: tuple = TASKS
    max_seq_length: int = 128
    batch_size: int = 32
    bucket_width: int = DEFAULT_BUCKET_WIDTH
    packing: bool = True
    word_piece: str = "first"
    random_control: bool = True
    finetune: bool = True
    finetune_epochs: float = 1.0
    finetune_learning_rate: float = 1e-4
    finetune_batch_size: int = 32
    finetune_min_steps: int = 300
    finetune_microbatches: int = 8
    dev_fraction: float = 0.1
    seed: int = DEFAULT_SEED
    cache_dir: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "tasks", tuple(self.tasks))
        unknown = [task for task in self.tasks if task not in TASKS]
        if unknown or not self.tasks:
            raise JobArgumentError(f"--tasks must name some of {', '.join(TASKS)}, got {list(self.tasks)}.")
        check_int("max_seq_length", self.max_seq_length, minimum=3)  # [CLS], one piece, [SEP]
        check_int("batch_size", self.batch_size)
        check_int("finetune_batch_size", self.finetune_batch_size)
        check_int("finetune_microbatches", self.finetune_microbatches)
        check_int("finetune_min_steps", self.finetune_min_steps, minimum=0)
        if self.finetune_batch_size % self.finetune_microbatches:
            raise JobArgumentError(
                f"--finetune_microbatches={self.finetune_microbatches} must divide "
                f"--finetune_batch_size={self.finetune_batch_size}."
            )
        check_int("bucket_width", self.bucket_width, minimum=0)
        if self.word_piece not in WORD_PIECE_MODES:
            raise JobArgumentError(
                f"--word_piece must be one of {', '.join(WORD_PIECE_MODES)}, got {self.word_piece!r}."
            )
        if not 0.0 < self.dev_fraction < 0.5:
            raise JobArgumentError(f"--dev_fraction must be in (0, 0.5), got {self.dev_fraction}.")
        if not self.finetune_epochs > 0 or not self.finetune_learning_rate > 0:
            raise JobArgumentError("--finetune_epochs and --finetune_learning_rate must be positive.")

    def files(self) -> dict:
        """task -> (flag prefix, train path, test path), the bundled files where none was given."""
        from bert_tf.datasets import bundled

        return {
            data_lib.TOKEN: (
                "token",
                self.token_train_file or str(bundled.pos_path("train")),
                self.token_test_file or str(bundled.pos_path("test")),
            ),
            data_lib.SENTENCE: (
                "sentence",
                self.sentence_train_file or str(bundled.sentiment_path("train")),
                self.sentence_test_file or str(bundled.sentiment_path("test")),
            ),
        }
