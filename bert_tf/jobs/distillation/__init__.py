"""The distillation jobs: `run_distillation` (a fine-tuned teacher trains a smaller student, the job behind
`experiments.distill`) and `run_frontier` (students and inference forms, accuracy against speed, behind
`experiments.distill_frontier`).

    from bert_tf.jobs.distillation import DistillationConfig, StudentConfig, run_distillation
    from bert_tf.jobs.finetuning.config import FinetuningDataConfig
    from bert_tf.training import TrainingConfig

    results = run_distillation(
        "runs/sst_3_layers",
        DistillationConfig(teacher_dir="runs/sst", temperature=2.0, alpha=0.5),
        StudentConfig(student_num_layers=3),
        FinetuningDataConfig(train_file="train.tsv", eval_file="dev.tsv", text_a_column="sentence"),
        TrainingConfig(learning_rate=1e-4, num_train_epochs=3.0, warmup_proportion=0.1))

The teacher is a model directory that `experiments.finetune` wrote (`task_config.json`, `bert_config.json`,
`vocab.txt`, a checkpoint or `weights.safetensors`): classification, sentence pairs, regression or tagging.
The data are read by the fine-tuning job's readers with its `FinetuningDataConfig`, featurized by the same
task plug-in (`bert_tf.tasks`) with the teacher's labels and vocabulary, and the student trains in the
project's distributed loop (`bert_tf.training.train`: strategies, length buckets, exact resume after a
kill) with `bert_tf.distillation.losses.DistillationLoss` in place of the task's loss. With
`StudentConfig.intermediate_num_layers` the student is the last of a route of ever shallower students, each
trained the same way in `intermediate_<n>_layers/` and started from the one before.

The teacher's logits are computed once, before training, over the training features (and the
`unlabeled_file` ones, which only the teacher labels) and travel with the batches as a `teacher_logits`
column: one inference pass instead of a teacher forward pass in every step of every epoch, and the same
targets on every resume. Only the hidden-state loss (`hidden_loss_weight`) runs the teacher's encoder inside
the step, since its states are too large to store.

`output_dir` becomes a model directory like fine-tuning's (`bert_config.json` of the student, the teacher's
`vocab.txt`, `task_config.json`, `ckpt-*`, `weights.safetensors`, `eval_results.json`,
`eval_predictions.*`), so `experiments.finetune --do_eval`, `experiments.export` and `load_task_model` take
it; `distillation.json` records the teacher, the student's origin and layers and the losses, and
`distillation_results.json` the teacher's and the student's evaluation metrics side by side.

A teacher fine-tuned with `--long_text` (its `task_config.json`'s `long_text`) passes its cut to the student
(`teacher.student_long_text`): with windows, its logits are per document, pooled over its windows, and the
student's windows are pooled before the loss.

Modules: `config` (`StudentConfig`, `DistillationConfig`, `FrontierConfig`), `teacher` (the teacher's directory,
task plug-in and model), `route` (the students trained in turn), `data` (the examples and the texts only the
teacher labels), `teacher_logits` (the logits cache), `settings` (`distillation.json` and the output directory),
`stages` (training the route), `evaluation` (the student beside the teacher), `job` (`run_distillation`, the
stages in order), and `frontier` with `frontier_speed` and `frontier_report` (`run_frontier`).
"""

from bert_tf.jobs import DEFAULT_SEED
from bert_tf.jobs.distillation.config import (
    DISTILLATION_CONFIG_NAME,
    DISTILLATION_RESULTS_NAME,
    DistillationConfig,
    FrontierConfig,
    StudentConfig,
)
from bert_tf.jobs.distillation.frontier import run_frontier
from bert_tf.jobs.distillation.frontier_report import PLOT_NAME, REPORT_JSON, REPORT_MD, report_markdown
from bert_tf.jobs.distillation.job import run_distillation
from bert_tf.jobs.distillation.route import intermediate_dir_name
from bert_tf.jobs.distillation.teacher_logits import TEACHER_LOGITS_DIR, TEACHER_LOGITS_KEY, teacher_logits_key
from bert_tf.tasks.base import LABEL_WEIGHT_KEY

__all__ = [
    "DEFAULT_SEED",
    "DISTILLATION_CONFIG_NAME",
    "DISTILLATION_RESULTS_NAME",
    "LABEL_WEIGHT_KEY",
    "PLOT_NAME",
    "REPORT_JSON",
    "REPORT_MD",
    "TEACHER_LOGITS_DIR",
    "TEACHER_LOGITS_KEY",
    "DistillationConfig",
    "FrontierConfig",
    "StudentConfig",
    "intermediate_dir_name",
    "report_markdown",
    "run_distillation",
    "run_frontier",
    "teacher_logits_key",
]
