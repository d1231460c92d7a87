"""The fine-tuning job's training line: steps, epochs and batches that add up."""

from bert_tf.jobs.finetuning.phases import training_summary
from bert_tf.training import TrainingConfig


def test_a_94_step_run_of_93_batch_epochs_says_so():
    # One epoch of 2,990 features in batches of 32 is 93 full batches; ceil(2990 / 32) = 94 steps.
    config = TrainingConfig(learning_rate=1e-4, num_train_epochs=1.0).in_steps(2990, 32)
    assert config.num_train_steps == 94
    assert training_summary(3000, 2990, 32, config) == (
        "3000 examples, 2990 features, batch size 32, 94 steps = 1.01 epochs of 93 batches "
        "(each epoch leaves out 14 random features)"
    )


def test_fewer_features_than_a_batch_are_repeated_into_one():
    config = TrainingConfig(learning_rate=1e-4, num_train_steps=3)
    assert training_summary(10, 10, 32, config).endswith(
        "3 steps = 3.00 epochs of 1 batch (each epoch leaves out 8 random features)"
    )
