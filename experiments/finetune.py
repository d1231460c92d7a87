"""Fine-tunes BERT on classification, regression, tagging, SQuAD or a plug-in task; evaluates and predicts.

The flags follow google-research/bert's `run_classifier.py` and
`run_squad.py` where those have one. Examples:

    # GLUE MRPC from a prepared TFDS directory (nothing is downloaded)
    python -m experiments.finetune --task=sentence_pair_classification \\
        --tfds_name=glue/mrpc --tfds_data_dir=$HOME/tensorflow_datasets \\
        --model_dir=models/bert_base --output_dir=runs/mrpc \\
        --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \\
        --learning_rate=2e-5 --num_train_epochs=3

    # Sentiment from a TSV with a header "sentence<TAB>label"
    python -m experiments.finetune --task=classification --train_file=train.tsv \\
        --eval_file=dev.tsv --text_a_column=sentence --label_column=label \\
        --model_dir=models/bert_base --output_dir=runs/sst --do_train --do_eval

    # SQuAD v1.1
    python -m experiments.finetune --task=squad --train_file=train-v1.1.json \\
        --predict_file=dev-v1.1.json --eval_file=dev-v1.1.json \\
        --model_dir=models/bert_base --output_dir=runs/squad --do_train --do_eval --do_predict \\
        --max_seq_length=384 --doc_stride=128 --train_batch_size=32 --learning_rate=3e-5 \\
        --num_train_epochs=2

    # NER from CoNLL files (word ... tag per line)
    python -m experiments.finetune --task=token_classification --train_file=train.conll \\
        --eval_file=dev.conll --model_dir=models/bert_base_cased --do_lower_case=false \\
        --output_dir=runs/ner --do_train --do_eval

Differences from `run_classifier.py`: batches are packed rows. The training
examples are drawn in a random order, epoch by epoch from --seed, and rows of
--max_seq_length tokens are filled with as many whole examples as fit; each
example is computed as if alone (a block-diagonal mask, its own positions and
[CLS]: the same predictions as one example a row, to float rounding;
tests/test_finetune_packing.py), a batch holds --train_batch_size examples on
average, and every batch has one static shape. Evaluation and prediction pack
the examples in input order. A resumed run sees the same batches.
--nopacking gives batches of one example a row, in the same kind of random
order, each padded to the smallest multiple of --bucket_width (16) that holds
its longest sequence (--bucket_width=0: to --max_seq_length, changing nothing
else; tests/test_finetune_buckets.py). --group_by_length makes such batches of
near-equal lengths instead (HuggingFace's opt-in of that name): slower learning
on small data (benchmarks/RESULTS.md, finetune_accuracy). SQuAD, and
--group_by_length or --num_microbatches>1, take one example a row (logged);
SQuAD keeps fixed windows and an example-by-example shuffle. The job logs the
share of real tokens of its batches. --long_text says what a text longer than
the window becomes: truncate (the first pieces), head_tail (its first and last
pieces) or windows (every window of a document, their logits pooled by
--window_pooling into the document's before the loss; a tagger tags each word
from the window where it has the most context; windows pack;
docs/finetuning.md, "Long documents"). Without --long_text, classification and
regression of single texts read their texts in windows when one is longer than
the window (windows beat truncation on long documents: benchmarks/RESULTS.md,
long_documents), and every other case truncates; task_config.json records the
mode. The log and eval_results.json say how many texts were cut and by how
much. Adam corrects its moments' bias and uses epsilon 1e-8, as PyTorch's
AdamW; --noadam_bias_correction --adam_epsilon=1e-6 gives the original BERT's
update. Labels or tags of the evaluation data that the training data never had
count as errors, and a warning and eval_results.json say how many.

Outputs in --output_dir: checkpoints (training resumes from them), TensorBoard
summaries, `eval_results.json`, `eval_predictions.*`, `predictions.*`, and
`bert_config.json` + `vocab.txt` + `task_config.json` (the task, labels,
sequence length, casing and the data columns), so the directory can be
evaluated or used for prediction later with only --output_dir and the data:

    python -m experiments.finetune --output_dir=runs/sst --do_predict --predict_file=new.tsv

`predictions.tsv` holds, per example, its guid (file:line), its text, the
predicted label's name and one probability per label; an earlier
`predictions.*` is not replaced without --overwrite_predictions.
`python -m experiments.export --model_dir=runs/sst --export_dir=...` turns the
directory into a servable classifier (text in, label scores and names out).
"""

import sys

from absl import flags, logging

from bert_tf import cli, errors
from bert_tf.checkpoints.model_source import TASK_CONFIG_NAME, ModelSource, read_task_config
from experiments import job_flags

FLAGS = flags.FLAGS


def define_flags():
    """Defines this job's flags (at run time, so importing the module defines none)."""
    from bert_tf.jobs.finetuning.config import DEFAULT_SCHEDULE
    from bert_tf.tasks.registry import task_names

    job_flags.define_runtime_flags()

    # A string, not an enum: a plug-in registered after the flags are defined is a valid --task too.
    flags.DEFINE_string("task", None, f"The task: one of {', '.join(task_names())}, or a registered plug-in's name.")
    job_flags.define("output_dir", notes={"output_dir": "Checkpoints, results and predictions are written there."})

    # Data.
    job_flags.define(*job_flags.FINETUNING_DATA_FLAGS, *job_flags.PREDICTION_FLAGS, "do_eval")
    flags.DEFINE_list(
        "label_list",
        None,
        "Class names or tags in id order (default: sorted from the training data, or the TFDS label names).",
    )

    # Model.
    job_flags.define_model_source_flags()
    job_flags.define("dropout_rate")
    job_flags.define_init_from_flag()

    # Training.
    flags.DEFINE_boolean("do_train", False, "Fine-tune.")
    flags.DEFINE_boolean(
        "overwrite_predictions", False, "Replace the predictions.* of an earlier --do_predict in --output_dir."
    )
    job_flags.define(
        "max_seq_length",
        "bucket_width",
        notes={
            "bucket_width": "Here for batches of one example a row (--nopacking, --group_by_length, "
            "--num_microbatches>1); packed rows and squad's windows do not use it."
        },
    )
    job_flags.define(*job_flags.FINETUNING_SCHEDULE_FLAGS, schedule=DEFAULT_SCHEDULE)
    job_flags.define_num_microbatches_flag()
    job_flags.define_adam_flags(DEFAULT_SCHEDULE)
    job_flags.define("group_by_length")
    job_flags.define_packing_flag()
    job_flags.define_long_text_flags()
    job_flags.define("eval_every_steps", notes={"eval_every_steps": "With --do_eval."})

    # SQuAD (SquadConfig's fields; refused with another --task).
    flags.DEFINE_integer("doc_stride", 128, "SQuAD: pieces between the starts of context windows.")
    flags.DEFINE_integer("max_query_length", 64, "SQuAD: question length cap in pieces.")
    flags.DEFINE_integer("max_answer_length", 30, "SQuAD: answer length cap in pieces.")
    flags.DEFINE_integer("n_best_size", 20, "SQuAD: size of the n-best lists.")
    flags.DEFINE_boolean("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer.")
    flags.DEFINE_float(
        "null_score_diff_threshold",
        0.0,
        "SQuAD v2.0: predict no answer when the null score exceeds the best span's by more than this.",
    )


def _recorded_settings() -> dict:
    """Config overrides from the task_config.json of an earlier run in --output_dir, for flags not given.

    A fine-tuned directory records its task, sequence length, casing and data columns, so evaluating or
    predicting later needs only --output_dir and the data files; a flag given explicitly wins.
    """
    recorded = read_task_config(FLAGS.output_dir) or {}
    task_type = FLAGS.task or recorded.get("task")
    if not task_type:
        raise errors.BadInputError(f"--task is required (--output_dir={FLAGS.output_dir} holds no task_config.json)")
    overrides = {"task": {"task": task_type}, "model": {}, "data": {}}
    if recorded and not FLAGS["max_seq_length"].present and "max_seq_length" in recorded:
        overrides["task"]["max_seq_length"] = recorded["max_seq_length"]
    overrides["task"]["long_text_config"] = job_flags.long_text_config(recorded.get("long_text"))
    if recorded and not FLAGS["do_lower_case"].present and "do_lower_case" in recorded:
        overrides["model"]["do_lower_case"] = recorded["do_lower_case"]
    for name, value in recorded.get("data", {}).items():
        if not FLAGS[name].present:
            overrides["data"][name] = job_flags.column(value) if isinstance(value, str) else value
    if recorded and not FLAGS.task:
        logging.info("--task=%s and the data columns of %s.", task_type, TASK_CONFIG_NAME)
    return overrides


def _task_config(overrides: dict):
    """The chosen task's own config class (`FinetuningTask.config_class`) from the flags of its fields.

    A flag that only another task's config has (say --doc_stride without --task=squad) is refused, naming it,
    rather than silently unused.
    """
    import dataclasses

    from bert_tf.tasks import registry

    config_class = registry.task_class(overrides["task"]).config_class
    own = {field.name for field in dataclasses.fields(config_class)}
    for name in registry.task_names():
        for field in dataclasses.fields(registry.task_class(name).config_class):
            if field.name not in own and field.name in FLAGS and FLAGS[field.name].present:
                raise errors.BadInputError(
                    f"--{field.name} is an option of --task={name}, not of --task={overrides['task']}."
                )
    return job_flags.config_from_flags(config_class, **overrides)


# Bad input (a DataError is a ValueError) is one clear line instead of a traceback.
@cli.main_function("finetune", bad_input=(ValueError, FileNotFoundError, FileExistsError))
def main(argv):
    del argv  # Checked by cli.main_function.
    from bert_tf.jobs.finetuning.job import run_finetuning
    from bert_tf.training import RuntimeConfig, TrainingConfig

    cli.require_flags("output_dir")
    recorded = _recorded_settings()
    # Each config checks its flags as it is built; run_finetuning checks the files, data and model.
    task = _task_config(recorded["task"])
    model = job_flags.config_from_flags(ModelSource, **recorded["model"])
    data = job_flags.finetuning_data_config(**recorded["data"])
    training_config = job_flags.config_from_flags(TrainingConfig)
    runtime = job_flags.config_from_flags(RuntimeConfig)
    try:
        results = run_finetuning(
            FLAGS.output_dir,
            task,
            model,
            data,
            training_config,
            runtime,
            do_train=FLAGS.do_train,
            do_eval=FLAGS.do_eval,
            do_predict=FLAGS.do_predict,
            overwrite_predictions=FLAGS.overwrite_predictions,
        )
    except errors.NonFiniteMetricError as e:
        # A failed run, not bad input: status 1.
        sys.exit(f"finetune: error: {cli.one_line(e)}")
    if results:
        print("***** Eval results *****")
        for key in sorted(results):
            print(f"{key} = {results[key]}")


def run(argv=None):
    """Console-script entry point."""
    cli.run(main, define_flags, argv)


if __name__ == "__main__":
    run()
