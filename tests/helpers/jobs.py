"""The training jobs called with the flags as flat keyword arguments, as the tests' argument dicts hold them.

    result = jobs.pretrain(output_dir=..., input_file=..., bert_config_file=..., num_train_steps=20, ...)
    results = jobs.finetune("classification", output_dir, train_file=..., model_dir=..., do_train=True)

The task's options go into its registered plug-in's config class (`SquadConfig` for "squad"). Fine-tuning and
distillation default to the original BERT update (`synthetic.ORIGINAL_UPDATE`), whose larger first steps let
the tests' tiny models learn in few steps; the jobs' own default is checked where it is set.

Each sorts the names into the job's config objects (by their fields; a name no
config has goes to the job as a keyword argument, so an unknown one is a
TypeError), builds them, and calls `run_pretraining`/`run_finetuning`. The
configs are built inside the call, so `pytest.raises` around it also sees
their errors. The same dicts become command lines (`--name=value`) and JSON
arguments of `training_run.py`, hence flat.
"""

import dataclasses

from tests.fixtures.finetune.synthetic import ORIGINAL_UPDATE


def _take(config_class, arguments: dict, **defaults):
    """`config_class` built from (and without) the entries of `arguments` that are its fields."""
    names = {field.name for field in dataclasses.fields(config_class)}
    values = dict(defaults, **{name: arguments.pop(name) for name in list(arguments) if name in names})
    return config_class(**values)


def pretrain(output_dir, **arguments):
    """`bert_tf.jobs.pretrain.run_pretraining` with the flags of `experiments.pretrain` as keywords."""
    from bert_tf.jobs import pretrain as pretraining
    from bert_tf.training import RuntimeConfig, TrainingConfig

    arguments = dict(arguments)
    bert_config = pretraining.resolve_bert_config(
        arguments.pop("bert_config_file", None), arguments.pop("preset", None)
    )
    data = _take(pretraining.PretrainingDataConfig, arguments)
    runtime = _take(RuntimeConfig, arguments, seed=pretraining.DEFAULT_SEED)
    training_config = _take(TrainingConfig, arguments, **pretraining.DEFAULT_SCHEDULE)
    return pretraining.run_pretraining(output_dir, bert_config, data, training_config, runtime, **arguments)


def finetune(task, output_dir, **arguments):
    """`bert_tf.jobs.finetuning.job.run_finetuning` with the flags of `experiments.finetune` as keywords."""
    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs import DEFAULT_SEED
    from bert_tf.jobs.finetuning.config import DEFAULT_SCHEDULE, FinetuningDataConfig
    from bert_tf.jobs.finetuning.job import run_finetuning
    from bert_tf.tasks import registry
    from bert_tf.training import RuntimeConfig, TrainingConfig

    arguments = dict(arguments)
    task_config = _take(registry.task_class(task).config_class, arguments, task=task)
    model = _take(ModelSource, arguments)
    data = _take(FinetuningDataConfig, arguments)
    runtime = _take(RuntimeConfig, arguments, seed=DEFAULT_SEED)
    training_config = _take(TrainingConfig, arguments, **dict(DEFAULT_SCHEDULE, **ORIGINAL_UPDATE))
    return run_finetuning(output_dir, task_config, model, data, training_config, runtime, **arguments)


def distill(output_dir, **arguments):
    """`bert_tf.jobs.distillation.run_distillation` with the flags of `experiments.distill` as keywords."""
    from bert_tf.jobs import distillation as job
    from bert_tf.jobs.finetuning.config import DEFAULT_SCHEDULE, FinetuningDataConfig
    from bert_tf.training import RuntimeConfig, TrainingConfig

    arguments = dict(arguments)
    config = _take(job.DistillationConfig, arguments)
    student = _take(job.StudentConfig, arguments)
    data = _take(FinetuningDataConfig, arguments)
    runtime = _take(RuntimeConfig, arguments, seed=job.DEFAULT_SEED)
    training_config = _take(TrainingConfig, arguments, **dict(DEFAULT_SCHEDULE, **ORIGINAL_UPDATE))
    return job.run_distillation(output_dir, config, student, data, training_config, runtime, **arguments)


def extract_features(input_file, output_file, **arguments):
    """`bert_tf.jobs.run_feature_extraction` with the flags of `experiments.extract_features` as
    keywords (`jit_compile` and `strategy` go to the call)."""
    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs import extract_features as job

    arguments = dict(arguments)
    model = _take(ModelSource, arguments)
    config = _take(job.FeatureExtractionConfig, arguments, input_file=input_file, model=model)
    return job.run_feature_extraction(output_file, config, **arguments)


def record_compute_dtypes(monkeypatch) -> list:
    """The compute dtype of every task model's encoder the jobs build from now on (fine-tuning, distillation's
    teacher and students), appended to the returned list."""
    from bert_tf.jobs.finetuning import phases as finetuning_phases

    compute_dtypes = []
    build_model = finetuning_phases.build_model

    def recording_build_model(task_object, config):
        model = build_model(task_object, config)
        compute_dtypes.append(model.encoder.dtype_policy.compute_dtype)
        return model

    monkeypatch.setattr(finetuning_phases, "build_model", recording_build_model)
    return compute_dtypes
