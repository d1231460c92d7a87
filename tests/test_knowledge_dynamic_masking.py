"""ERNIE's knowledge masking read by the pretraining job: dynamic masking by phrases and entities (the same
distribution as the writer's), ERNIE's staged schedule (switch and resumption), the job's checks.

The writer and the units: tests/test_knowledge_masking.py (whose records and helpers this module reuses).
"""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import dynamic_masking, pretraining_schema
from bert_tf.data.pretraining_dataset import check_record_format
from bert_tf.pretraining_data import knowledge_units as ku
from bert_tf.tokenization import load_vocab
from tests.helpers import jobs, training_data
from tests.test_knowledge_masking import (
    PREDICTIONS,
    SEQ,
    VOCAB_FILE,
    _masked_at,
    _whole_or_nothing,
    _write,
    listed_phrase_ids,
    write_phrase_file,
    write_phrase_records,
)


@pytest.fixture(scope="module")
def vocab():
    return load_vocab(VOCAB_FILE)


@pytest.fixture(scope="module")
def phrase_file(tmp_path_factory):
    return write_phrase_file(tmp_path_factory.mktemp("phrases"))


@pytest.fixture(scope="module")
def phrase_records(tmp_path_factory, phrase_file):
    return write_phrase_records(tmp_path_factory.mktemp("phrase_records"), phrase_file)


# --- dynamic masking -----------------------------------------------------------------------------------------------


def _features(records, rows):
    names = {"input_ids": "input_word_ids", "input_mask": "input_mask", "segment_ids": "input_type_ids"}
    features = {names.get(k, k): v[rows] for k, v in records.items() if k != "next_sentence_labels"}
    return {k: tf.constant(v, tf.float32 if k == "masked_lm_weights" else tf.int32) for k, v in features.items()}


def _distribution(ids, masked, flags, mask_id, masked_ids):
    """(predictions per row, share of masked tokens in phrases, share of phrase tokens masked, [MASK] share)."""
    in_phrase = flags != pretraining_schema.UNIT_NONE
    return np.array(
        [
            masked.sum(axis=1).mean(),
            (masked & in_phrase).sum() / masked.sum(),
            (masked & in_phrase).sum() / in_phrase.sum(),
            (masked_ids[masked] == mask_id).mean(),
        ]
    )


def test_dynamic_masking_gives_the_writers_distribution(phrase_records, vocab):
    phrase_ids = listed_phrase_ids()
    is_piece = np.array([t.startswith("##") for t in vocab])
    masked_records, unmasked, _ = phrase_records
    ids, masked = _masked_at(masked_records)
    mask_id = vocab.index("[MASK]")
    flags = unmasked["phrase_units"]
    written = _distribution(ids, masked, flags, mask_id, masked_records["input_ids"])
    config = dynamic_masking.DynamicMaskingConfig.from_vocab_file(VOCAB_FILE, masking="phrase")
    features = _features(unmasked, np.arange(len(ids)))
    draws = []
    for seed in range(4):
        batch = dynamic_masking.dynamic_mask_batch(features, config, PREDICTIONS, tf.constant([seed, 7], tf.int64))
        assert "phrase_units" not in batch and "entity_units" not in batch
        batch = {k: v.numpy() for k, v in batch.items()}
        dynamic = _masked_at(
            {
                "input_ids": batch["input_word_ids"],
                **{k: batch[k] for k in ("masked_lm_weights", "masked_lm_positions", "masked_lm_ids")},
            }
        )
        np.testing.assert_array_equal(dynamic[0], ids)
        assert _whole_or_nothing(ids, dynamic[1], phrase_ids, is_piece)[1] == 0
        draws.append(_distribution(ids, dynamic[1], flags, mask_id, batch["input_word_ids"]))
    drawn = np.mean(draws, axis=0)
    # Budgets: the writer rounds 15% of the row with [CLS]/[SEP], dynamic masking takes the ceiling of 15%
    # of the maskable tokens: at most a few tenths of a prediction apart per row.
    assert abs(drawn[0] - written[0]) < 0.3
    # Phrases hold 0.7% of the masked tokens and 18% of their own tokens are masked (one written draw against
    # four dynamic ones: a few draws' spread); [MASK] replaces 80%.
    np.testing.assert_allclose(drawn[1:3], written[1:3], rtol=0.3)
    assert abs(drawn[3] - written[3]) < 0.02 and abs(drawn[3] - 0.8) < 0.02


def test_schedule_switches_the_mode_by_batches_read_and_resumes(phrase_records, tmp_path):
    _, unmasked, _ = phrase_records
    features = _features(unmasked, np.arange(16))
    schedule = (("token", 0.25), ("phrase", 0.25), ("entity", 0.5))
    config = dynamic_masking.DynamicMaskingConfig.from_vocab_file(VOCAB_FILE, schedule=schedule, schedule_batches=4)
    assert dynamic_masking.schedule_ends(schedule, 4) == [1, 2, 4]
    assert config.unit_features == ("phrase_units", "entity_units")
    dataset = dynamic_masking.apply_dynamic_masking(
        tf.data.Dataset.from_tensors(features).repeat(), config, PREDICTIONS, seed=11
    )
    seeds = list(tf.data.Dataset.random(seed=11).batch(2).take(5))
    iterator = iter(dataset)
    got = [next(iterator)["input_word_ids"].numpy() for _ in range(5)]
    # Beyond the schedule's batches the last stage goes on.
    for index, mode in enumerate(["token", "phrase", "entity", "entity", "entity"]):
        expected = dynamic_masking.dynamic_mask_batch(features, config, PREDICTIONS, seeds[index], mode)
        np.testing.assert_array_equal(got[index], expected["input_word_ids"].numpy())
    # The stages differ: the first batch masked by phrases would be another.
    other = dynamic_masking.dynamic_mask_batch(features, config, PREDICTIONS, seeds[0], "phrase")
    assert (other["input_word_ids"].numpy() != got[0]).any()
    # An iterator restored mid-stage goes on with the same batches (and stages).
    iterator = iter(dataset)
    next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    path = checkpoint.save(str(tmp_path / "ckpt"))
    iterator = iter(dataset)
    tf.train.Checkpoint(iterator=iterator).restore(path)
    np.testing.assert_array_equal(next(iterator)["input_word_ids"].numpy(), got[1])


def test_reader_requires_the_unit_flags_of_its_masking(tmp_path):
    path = tmp_path / "plain.tfrecord"
    _write(path, masking="span", do_masking=False)
    with pytest.raises(ValueError, match="no feature 'phrase_units'.*--masking=phrase\\|entity --nodo_masking"):
        check_record_format(str(path), "", SEQ, PREDICTIONS, need_masked_lm=False, unit_features=["phrase_units"])


def test_job_config_checks_the_schedule():
    from bert_tf.errors import JobArgumentError
    from bert_tf.jobs.pretrain import PretrainingDataConfig

    config = PretrainingDataConfig("x", dynamic_masking=True, masking_schedule="token:0.3,phrase:0.3,entity:0.4")
    assert config.masking_modes == ("token", "phrase", "entity")
    with pytest.raises(JobArgumentError, match="sum to 0.9"):
        PretrainingDataConfig("x", dynamic_masking=True, masking_schedule="token:0.3,phrase:0.6")
    with pytest.raises(JobArgumentError, match="--masking_schedule needs --dynamic_masking"):
        PretrainingDataConfig("x", masking_schedule="token:1")
    with pytest.raises(JobArgumentError, match="replaces --masking"):
        PretrainingDataConfig("x", dynamic_masking=True, masking="span", masking_schedule="token:1")


def test_pretraining_job_trains_on_a_schedule_and_checks_the_unit_flags(tmp_path, phrase_file):
    from bert_tf.errors import JobArgumentError

    units = ku.unit_tables("phrase", False, VOCAB_FILE, True, phrase_file)
    records = training_data.write_pretraining_records(tmp_path / "units", units, masking="phrase", do_masking=False)
    config_file = tmp_path / "bert_config.json"
    training_data.tiny_bert_config(training_data.vocab_size(), num_layers=1).to_json_file(str(config_file))
    arguments = {
        "input_file": records["train"],
        "bert_config_file": str(config_file),
        "vocab_file": records["vocab"],
        "max_seq_length": training_data.SEQ_LENGTH,
        "max_predictions_per_seq": training_data.MAX_PREDICTIONS,
        "train_batch_size": 8,
        "num_train_steps": 4,
        "num_warmup_steps": 1,
        "steps_per_loop": 2,
        "shuffle_buffer_size": 100,
        "dynamic_masking": True,
    }
    # (The stages' switch and resumption: test_schedule_switches_the_mode_by_batches_read_and_resumes.)
    result = jobs.pretrain(**arguments, masking_schedule="phrase:0.5,entity:0.5", output_dir=str(tmp_path / "run"))
    assert result.step == 4 and np.isfinite(result.train_metrics["loss"])
    # Records written without the unit flags are refused before anything is written.
    plain = training_data.write_pretraining_records(tmp_path / "plain", do_masking=False)
    arguments.update(input_file=plain["train"])
    with pytest.raises(JobArgumentError, match="--input_file: .*no feature 'entity_units'"):
        jobs.pretrain(**arguments, masking="entity", output_dir=str(tmp_path / "refused"))
    assert not (tmp_path / "refused").exists()
