"""The distillation jobs' configs: the student's origin, the teacher and losses, and the frontier's measurements.

Each is checked once, when it is made, and names the flag of a bad value (`JobArgumentError`).
"""

from __future__ import annotations

import dataclasses

from bert_tf.errors import JobArgumentError, check_int
from bert_tf.tasks.long_text import LongTextConfig
from bert_tf.tasks.task_config import FinetuningTaskConfig, choose_packing, describe_packing

DISTILLATION_CONFIG_NAME = "distillation.json"
DISTILLATION_RESULTS_NAME = "distillation_results.json"


@dataclasses.dataclass(frozen=True)
class StudentConfig:
    """Where the student comes from (the flags of the same names); exactly one is given.

    Attributes:
      student_num_layers: the teacher's architecture with this many layers, initialised from the teacher's
        embeddings, pooler, head and `evenly_spaced_layers` of its Transformer layers (DistilBERT's start).
      student_model_dir: a smaller pretrained encoder (a model directory with the teacher's vocabulary); the
        head starts random.
      student_bert_config_file: a `bert_config.json`; the student starts random.
      intermediate_num_layers: with `student_num_layers`, deeper students distilled first, deepest first,
        each starting from evenly spaced layers of the model before it (the teacher, then the previous one),
        the student from the last: layers are dropped a few at a time, each step trained against the
        teacher's soft targets, instead of all at once. Empty: the student starts from the teacher.
    """

    student_num_layers: int | None = None
    student_model_dir: str | None = None
    student_bert_config_file: str | None = None
    intermediate_num_layers: tuple = ()

    def __post_init__(self):
        sources = ("student_num_layers", "student_model_dir", "student_bert_config_file")
        given = [name for name in sources if getattr(self, name) is not None]
        if len(given) != 1:
            raise JobArgumentError(
                "Give exactly one of --student_num_layers, --student_model_dir and --student_bert_config_file"
                + (f" (got {', '.join('--' + g for g in given)})." if given else ".")
            )
        if self.student_num_layers is not None:
            check_int("student_num_layers", self.student_num_layers)
        # The route runs deepest first, whatever order the depths were given in.
        depths = tuple(sorted(set(self.intermediate_num_layers), reverse=True))
        object.__setattr__(self, "intermediate_num_layers", depths)
        if depths and self.student_num_layers is None:
            raise JobArgumentError("--intermediate_num_layers needs --student_num_layers: they are its layers' route.")
        for depth in depths:
            check_int("intermediate_num_layers", depth)
        if depths and depths[-1] <= self.student_num_layers:
            raise JobArgumentError(
                f"--intermediate_num_layers={depths[-1]}: each must be deeper than "
                f"--student_num_layers={self.student_num_layers}."
            )


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """The teacher, the losses and the task options (the flags of the same names).

    Attributes:
      teacher_dir: a fine-tuned model directory (`experiments.finetune --output_dir`).
      temperature: T of the soft targets (`bert_tf.distillation.losses`).
      alpha: the soft loss's weight; the hard-label loss has 1 - alpha.
      hidden_loss_weight: weight of TinyBERT's hidden-state loss (0: off). A student of another width than the
        teacher's maps its states to the teacher's width through a learned projection (TinyBERT's W_h), trained
        with it and left out of the student that is written.
      unlabeled_file: more text that only the teacher labels: a `.txt` file of one text per line (one word
        sequence per line for tagging), or a file in the training data's format whose labels are ignored.
      augmented_copies: altered copies of each training text (words dropped, some cropped to a span) that only
        the teacher labels (`bert_tf.distillation.augmentation`; texts and sentence pairs, not tagging). 0: none.
      max_seq_length: packed length; None: the teacher's (`task_config.json`).
      bucket_width, dropout_rate: as `FinetuningTaskConfig`'s.
      packing: the teacher labels and the student trains and is evaluated on packed rows, every example computed
        as if alone. None (the default): packed unless `unpacked_reasons` gives a reason (fine-tuning's, the
        hidden-state loss, whose states of packed rows are not matched yet, or a teacher's windows), which
        `resolve_packing` decides and `packing_note` logs; True: packed, refused where there is a reason;
        False: one example a row.
      do_lower_case: the teacher's vocabulary is uncased.
      long_text_config: texts longer than the window (`bert_tf.tasks.long_text`). None: the teacher's
        (`task_config.json`'s `long_text`), which the student always reads with: the teacher's soft targets are
        per document, pooled over windows as it was trained, and the student trains on the same cut. A config
        given must equal the teacher's (`teacher.student_long_text` names the flag that differs).
    """

    teacher_dir: str
    temperature: float = 2.0
    alpha: float = 0.5
    hidden_loss_weight: float = 0.0
    unlabeled_file: str | None = None
    augmented_copies: int = 0
    max_seq_length: int | None = None
    bucket_width: int = 16
    dropout_rate: float | None = None
    packing: bool | None = None
    do_lower_case: bool = True
    long_text_config: LongTextConfig | None = None

    def __post_init__(self):
        if not self.teacher_dir:
            raise JobArgumentError("--teacher_dir is required.")
        if not self.temperature > 0:
            raise JobArgumentError(f"--temperature must be positive, got {self.temperature}.")
        if not 0.0 <= self.alpha <= 1.0:
            raise JobArgumentError(f"--alpha must be in [0, 1], got {self.alpha}.")
        if not self.hidden_loss_weight >= 0:
            raise JobArgumentError(f"--hidden_loss_weight must be >= 0, got {self.hidden_loss_weight}.")
        if self.packing and self.hidden_loss_weight:
            raise JobArgumentError(
                "--hidden_loss_weight compares the hidden states of unpacked rows: give --nopacking with it."
            )
        check_int("augmented_copies", self.augmented_copies, minimum=0)
        if self.max_seq_length is not None:
            check_int("max_seq_length", self.max_seq_length, minimum=2)
        check_int("bucket_width", self.bucket_width, minimum=0)

    def unpacked_reasons(self, task: str, long_text: LongTextConfig, num_microbatches: int = 1) -> list:
        """Why this distillation's batches cannot be packed rows (empty: they can): fine-tuning's reasons for the
        teacher's `task` (`FinetuningTaskConfig.unpacked_reasons`), the hidden-state loss, or a teacher fine-tuned
        with windows (`long_text`: how the student reads, `teacher.student_long_text`)."""
        reasons = FinetuningTaskConfig(task).unpacked_reasons(num_microbatches)
        if self.hidden_loss_weight:
            reasons.append("--hidden_loss_weight compares the hidden states of unpacked rows")
        if long_text.windows:
            reasons.append("the teacher's --long_text=windows is not packed in distillation yet")
        return reasons

    def resolve_packing(self, task: str, long_text: LongTextConfig, num_microbatches: int = 1) -> DistillationConfig:
        """This config with `packing` True or False (see the attribute and `unpacked_reasons`).

        Raises:
          JobArgumentError: `packing=True` where it cannot be, naming the reasons.
        """
        packing = choose_packing(self.packing, self.unpacked_reasons(task, long_text, num_microbatches))
        return self if packing == self.packing else dataclasses.replace(self, packing=packing)

    def packing_note(self, task: str, long_text: LongTextConfig, num_microbatches: int = 1) -> str:
        """One line for the job's log: the batches `resolve_packing` gives, and why."""
        return describe_packing(self.packing, self.unpacked_reasons(task, long_text, num_microbatches))


@dataclasses.dataclass(frozen=True)
class FrontierConfig:
    """The frontier's models, forms and timing (the flags of `experiments.distill_frontier`).

    Attributes:
      teacher_dir: the fine-tuned teacher.
      student_layers: depths of the students (each at most the teacher's depth).
      forms: inference forms measured for every model.
      seeds: each student is distilled once per seed and its metric is the mean (one distillation's metric
        moves with the seed by about as much as neighbouring students differ); empty: the runtime's seed.
      temperature, alpha: the students' losses (`DistillationConfig`).
      intermediate_num_layers: deeper students each student is distilled through first, those of these
        depths above its own (`StudentConfig.intermediate_num_layers`); empty: every student starts from the
        teacher.
      max_seq_length: None: the teacher's.
      speed_examples: evaluation texts timed per model and round.
      speed_batch_size: batch size of the timed batches.
      speed_rounds: interleaved timing rounds (the median is reported).
      packing: the students' batches (`DistillationConfig.packing`): None packs where it can.
    """

    teacher_dir: str
    student_layers: tuple = (1, 2, 3)
    forms: tuple = ("float32", "bfloat16", "int8")
    seeds: tuple = ()
    temperature: float = 2.0
    alpha: float = 0.5
    intermediate_num_layers: tuple = ()
    max_seq_length: int | None = None
    speed_examples: int = 512
    speed_batch_size: int = 32
    speed_rounds: int = 3
    packing: bool | None = None

    def __post_init__(self):
        from bert_tf.distillation.inference import INFERENCE_FORMS

        object.__setattr__(self, "student_layers", tuple(int(n) for n in self.student_layers))
        object.__setattr__(self, "forms", tuple(self.forms))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if len(set(self.seeds)) != len(self.seeds):
            raise JobArgumentError(f"--seeds: each seed once, got {list(self.seeds)}.")
        for n in self.student_layers:
            check_int("student_layers", n)
        depths = tuple(sorted({int(n) for n in self.intermediate_num_layers}, reverse=True))
        object.__setattr__(self, "intermediate_num_layers", depths)
        for n in depths:
            check_int("intermediate_num_layers", n)
        unknown = [form for form in self.forms if form not in INFERENCE_FORMS]
        if unknown or not self.forms:
            raise JobArgumentError(f"--forms: expected some of {', '.join(INFERENCE_FORMS)}, got {list(self.forms)}.")
        for name in ("speed_examples", "speed_batch_size", "speed_rounds"):
            check_int(name, getattr(self, name))
