"""experiments.job_flags.define: each shared flag from its one table entry, its default from the config field."""

import dataclasses

import pytest
from absl import flags

from bert_tf.jobs import DEFAULT_SEED
from bert_tf.jobs.finetuning.config import DEFAULT_SCHEDULE, FinetuningDataConfig
from bert_tf.tasks.task_config import FinetuningTaskConfig
from bert_tf.training.config import TrainingConfig
from experiments import job_flags


def _field_default(config_class, name):
    return {field.name: field.default for field in dataclasses.fields(config_class)}[name]


def test_every_shared_flag_is_defined_from_its_table_entry():
    values = flags.FlagValues()
    job_flags.define(*job_flags.SHARED_FLAGS, flag_values=values)
    assert set(job_flags.SHARED_FLAGS) <= set(values)
    assert values["max_seq_length"].default == _field_default(FinetuningTaskConfig, "max_seq_length")
    assert values["eval_batch_size"].default == _field_default(FinetuningDataConfig, "eval_batch_size") == 8
    assert values["learning_rate"].default == _field_default(TrainingConfig, "learning_rate")
    assert values["seed"].default == DEFAULT_SEED == 42
    assert values["masking"].default == "token" and "span" in values["masking"].parser.enum_values
    for name, spec in job_flags.SHARED_FLAGS.items():
        assert values[name].help.endswith(spec.help), name  # an enum's help starts with its <choices>


def test_a_program_adds_notes_its_schedule_and_a_default_with_its_reason():
    values = flags.FlagValues()
    job_flags.define(
        "learning_rate",
        "max_seq_length",
        "do_eval",
        schedule=DEFAULT_SCHEDULE,
        notes={"do_eval": "Both models."},
        defaults={"max_seq_length": (None, "Default here: the teacher's.")},
        flag_values=values,
    )
    assert values["learning_rate"].default == DEFAULT_SCHEDULE["learning_rate"] != TrainingConfig.learning_rate
    assert values["max_seq_length"].default is None
    assert values["max_seq_length"].help.endswith("truncated. Default here: the teacher's.")
    assert values["do_eval"].help == "Evaluate on the evaluation data. Both models."


def test_a_note_or_default_for_a_flag_not_defined_is_refused():
    with pytest.raises(ValueError, match="--output_dir"):
        job_flags.define("max_seq_length", notes={"output_dir": "x"}, flag_values=flags.FlagValues())
    with pytest.raises(KeyError):
        job_flags.define("not_a_shared_flag", flag_values=flags.FlagValues())
