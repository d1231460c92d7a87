"""ERNIE's knowledge masking in the writer: phrase and entity units, learned phrases, the records, the programs.

The writer runs on the real text sample of tests/fixtures/pretraining/ (uncased vocabulary) with a phrase
list and with phrases learned from the sample; the selection and the entity heuristic on small synthetic ids.
Dynamic masking, the schedule and the pretraining job: tests/test_knowledge_dynamic_masking.py.
"""

import doctest
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pretraining_features, pretraining_schema
from bert_tf.pretraining_data import instances as pi
from bert_tf.pretraining_data import knowledge_units as ku
from bert_tf.pretraining_data import writer
from bert_tf.tokenization import load_vocab, phrase_learning
from bert_tf.tokenization.python_tokenizer import PythonBertTokenizer
from tests.helpers import absl_flags, training_data

SAMPLE = str(training_data.SAMPLE_TEXT)
VOCAB_FILE = str(training_data.VOCAB_FILE)
SEQ = 64
PREDICTIONS = 10
# Case differs from the text: the uncased vocabulary matches them anyway.
PHRASES = ["Norland Park", "MRS. DASHWOOD", "john dashwood", "Barton Park", "Mrs. Jennings", "Colonel Brandon"]


def _write(path, masking="phrase", do_masking=True, phrase_file=None, vocab_file=VOCAB_FILE, seed=3):
    config = pi.InstanceConfig(
        max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=3, masking=masking, do_masking=do_masking
    )
    units = ku.unit_tables(masking, do_masking, vocab_file, True, phrase_file)
    return writer.write_pretraining_data(
        [SAMPLE], [str(path)], vocab_file, config, num_workers=1, seed=seed, units=units
    )


def _read(path, unit_features=()):
    spec = pretraining_features.feature_spec(SEQ, PREDICTIONS)
    spec.update({name: tf.io.FixedLenFeature([SEQ], tf.int64) for name in unit_features})
    dataset = tf.data.TFRecordDataset(str(path)).batch(100000).map(lambda r: tf.io.parse_example(r, spec))
    return {k: v.numpy() for k, v in next(iter(dataset)).items()}


def _masked_at(batch):
    """(original ids, bool [N, SEQ] masked positions) of masked records."""
    ids = batch["input_ids"].copy()
    masked = np.zeros(ids.shape, bool)
    rows, cols = np.nonzero(batch["masked_lm_weights"] > 0)
    ids[rows, batch["masked_lm_positions"][rows, cols]] = batch["masked_lm_ids"][rows, cols]
    masked[rows, batch["masked_lm_positions"][rows, cols]] = True
    return ids, masked


def _occurrences(ids, phrase, is_piece):
    """(row, start) of every whole-word occurrence of `phrase` (token ids) in the rows.

    One followed by [SEP] or [PAD] (id 3 or 0 in both vocabularies) is left out: truncation may have cut
    the `##` piece that made its last word another word.
    """
    n = len(phrase)
    found = []
    for row in range(ids.shape[0]):
        for start in range(1, ids.shape[1] - n):
            after = ids[row, start + n]
            if tuple(ids[row, start : start + n]) == phrase and not is_piece[after] and after not in (0, 3):
                found.append((row, start))
    return found


def _whole_or_nothing(ids, masked, phrases, is_piece):
    """(occurrences masked whole, occurrences masked in part, occurrences) of `phrases` in the rows."""
    whole = partial = total = 0
    for phrase in phrases:
        for row, start in _occurrences(ids, phrase, is_piece):
            count = masked[row, start : start + len(phrase)].sum()
            whole += int(count == len(phrase))
            partial += int(0 < count < len(phrase))
            total += 1
    return whole, partial, total


def write_phrase_file(directory) -> str:
    path = directory / "phrases.txt"
    path.write_text("\n".join(PHRASES) + "\n\n", encoding="utf-8")
    return str(path)


def write_phrase_records(directory, phrase_file):
    """Masked and unmasked records of the same instances (same seed, one batch: the same draws up to masking):
    (masked batch, unmasked batch with the unit flags, the masked run's summary)."""
    masked_summary = _write(directory / "masked.tfrecord", phrase_file=phrase_file)
    _write(directory / "unmasked.tfrecord", do_masking=False, phrase_file=phrase_file)
    return (
        _read(directory / "masked.tfrecord"),
        _read(directory / "unmasked.tfrecord", pretraining_schema.UNIT_FEATURES.values()),
        masked_summary,
    )


def listed_phrase_ids() -> list:
    tokenizer = PythonBertTokenizer(VOCAB_FILE, lower_case=True)
    return [tuple(tokenizer.tokenize(p)) for p in PHRASES]


@pytest.fixture(scope="module")
def vocab():
    return load_vocab(VOCAB_FILE)


@pytest.fixture(scope="module")
def is_piece(vocab):
    return np.array([t.startswith("##") for t in vocab])


@pytest.fixture(scope="module")
def phrase_file(tmp_path_factory):
    return write_phrase_file(tmp_path_factory.mktemp("phrases"))


@pytest.fixture(scope="module")
def phrase_ids():
    return listed_phrase_ids()


@pytest.fixture(scope="module")
def phrase_records(tmp_path_factory, phrase_file):
    return write_phrase_records(tmp_path_factory.mktemp("phrase_records"), phrase_file)


@pytest.mark.parametrize("module", [ku, phrase_learning], ids=lambda m: m.__name__)
def test_the_modules_examples_run(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# --- units ---------------------------------------------------------------------------------------------------


def test_phrases_match_whole_words_longest_first_within_sentences():
    is_continuation = np.zeros(50, bool)
    is_continuation[40:] = True  # ids 40.. are ## pieces
    table = ku.UnitTable.from_phrase_ids([(5, 6), (5, 6, 7), (8, 9)], source="test")
    # [5 6 7] beats [5 6]; [5 6 41] is "5" + "6##41", not the phrase [5 6]; [8 | 9] crosses sentences.
    ids = np.array([5, 6, 7, 1, 5, 6, 41, 5, 6, 2, 8, 9], np.int32)
    flags = ku.mark_units(ids, np.array([0, 11, 12]), table, is_continuation)
    assert flags.tolist() == [1, 2, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0]


def test_entity_heuristic_marks_capitalised_runs_not_at_a_sentence_start():
    tokens = ["[PAD]", "the", "New", "York", "Times", "said", "I", "##s", "Mr", "Darcy", "saw", "."]
    table = ku.UnitTable.capitalisation(tokens)
    is_continuation = np.array([t.startswith("##") for t in tokens])
    sentences = [[2, 3, 5, 9, 7, 11], [1, 2, 3, 4, 5, 6, 10, 8, 9, 11]]  # "New York said Darcy##s ." ...
    ids = np.array([t for s in sentences for t in s], np.int32)
    flags = ku.mark_units(ids, np.array([0, 6, 16]), table, is_continuation)
    # The first sentence's "New" starts it, so "York" alone is an entity; "I" (one character) is not one.
    assert flags[:6].tolist() == [0, 1, 0, 1, 2, 0]
    assert flags[6:].tolist() == [0, 1, 2, 2, 0, 0, 0, 1, 2, 0]


def test_unit_sources_and_their_errors(tmp_path, phrase_file, vocab):
    assert ku.unit_tables("span", True, VOCAB_FILE, True, None) == {}
    assert set(ku.unit_tables("phrase", False, VOCAB_FILE, True, phrase_file)) == {"phrase", "entity"}
    with pytest.raises(ValueError, match="--masking=phrase needs --phrase_file"):
        ku.unit_tables("phrase", True, VOCAB_FILE, True, None)
    with pytest.raises(ValueError, match="--masking=entity with --do_lower_case needs --phrase_file"):
        ku.unit_tables("entity", True, VOCAB_FILE, True, None)
    cased = ku.unit_tables("entity", True, VOCAB_FILE, False, None)["entity"]
    assert cased.capitalised is not None and cased.capitalised.sum() == sum(
        len(t) > 1 and t[0].isupper() for t in vocab
    )
    (tmp_path / "empty.txt").write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt lists no phrase"):
        ku.read_phrase_file(str(tmp_path / "empty.txt"), VOCAB_FILE, True)
    (tmp_path / "latin1.txt").write_bytes(b"new york\ncaf\xe9 society\n")
    with pytest.raises(ValueError, match="latin1.txt: line 2 is not UTF-8"):
        ku.read_phrase_file(str(tmp_path / "latin1.txt"), VOCAB_FILE, True)


# --- selection: budget, wholeness, 80/10/10 per unit --------------------------------------------------------------


def _synthetic(num_documents=60, seed=0):
    """Documents of words 5..39 (a word may take the ## piece 40), with the phrases [10 11] and [20 40 21] inserted."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        document = []
        for _ in range(rng.randint(2, 8)):
            sentence = []
            while len(sentence) < rng.randint(4, 30):
                roll = rng.random()
                sentence += [10, 11] if roll < 0.1 else [20, 40, 21] if roll < 0.2 else [rng.randint(5, 39)]
                if rng.random() < 0.1:
                    sentence.append(40)
            document.append(sentence)
        documents.append(document)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, 40)] + ["##x"]
    table = ku.UnitTable.from_phrase_ids([(10, 11), (20, 40, 21)], source="test")
    return pi.DocumentChunk.from_documents(documents), pi.VocabInfo.from_tokens(tokens), table


@pytest.mark.parametrize("sentence_task", ["nsp", "none"])
def test_units_are_chosen_whole_within_the_budget_with_one_choice_per_unit(sentence_task):
    chunk, vocab, table = _synthetic()
    config = pi.InstanceConfig(
        max_seq_length=48, max_predictions_per_seq=7, dupe_factor=20, masking="phrase", sentence_task=sentence_task
    )
    batches = list(pi.create_instances(chunk, config, vocab, seed=5, units={"phrase": table}))
    unit_choices = {pi.MASK_CHOICE_MASK: 0, pi.MASK_CHOICE_RANDOM: 0, pi.MASK_CHOICE_KEEP: 0}
    phrase_tokens = masked_tokens = listed_tokens = text_tokens = 0
    for batch in batches:
        ids, masked = _masked_at(
            {
                "input_ids": batch.input_ids,
                "masked_lm_weights": batch.masked_lm_weights,
                "masked_lm_positions": batch.masked_lm_positions,
                "masked_lm_ids": batch.masked_lm_ids,
            }
        )
        length = batch.input_mask.sum(axis=1)
        budget = np.minimum(7, np.maximum(1, np.rint(length * 0.15)))
        count = masked.sum(axis=1)
        assert (count <= budget).all() and (count >= budget - 2).mean() > 0.95
        whole, partial, total = _whole_or_nothing(ids, masked, table.phrases, np.arange(41) == 40)
        assert partial == 0 and total > 500 and whole > 0.05 * total
        listed_tokens += sum(len(p) * len(_occurrences(ids, p, np.arange(41) == 40)) for p in table.phrases)
        text_tokens += int(length.sum() - 2 * len(batch))
        # Every token of a unit got its unit's choice.
        for row in range(len(batch)):
            units = batch.mask_units[row]
            for unit in set(units[units >= 0].tolist()):
                choices = set(batch.mask_choices[row][units == unit].tolist())
                assert len(choices) == 1
                unit_choices[choices.pop()] += 1
        phrase_tokens += int(batch.mask_in_phrase.sum())
        masked_tokens += int(count.sum())
    num_units = sum(unit_choices.values())
    assert num_units > 3000
    assert abs(unit_choices[pi.MASK_CHOICE_MASK] / num_units - 0.8) < 0.03
    assert abs(unit_choices[pi.MASK_CHOICE_RANDOM] / num_units - 0.1) < 0.02
    assert abs(unit_choices[pi.MASK_CHOICE_KEEP] / num_units - 0.1) < 0.02
    # Phrases are masked about as often as the other words.
    assert phrase_tokens / masked_tokens == pytest.approx(listed_tokens / text_tokens, rel=0.25)


def test_rows_without_units_fall_back_to_whole_words():
    candidates = np.ones((200, 12), bool)
    candidates[:, 0] = candidates[:, -1] = False
    is_piece = np.zeros((200, 12), bool)
    is_piece[:, 3] = True  # positions 2-3 are one word
    selected, item = ku.select_units(
        candidates, is_piece, np.zeros((200, 12), np.int8), np.full(200, 4), np.random.default_rng(0)
    )
    assert (selected.sum(axis=1) == 4).all()
    assert (selected[:, 2] == selected[:, 3]).all() and selected[:, 2].any() and not selected[:, 2].all()
    assert (item[:, 2] == item[:, 3])[selected[:, 2]].all()


# --- the writer on real text ---------------------------------------------------------------------------------------


def test_listed_phrases_are_masked_whole_or_not_at_all(phrase_records, phrase_ids, is_piece):
    masked_records, _, summary = phrase_records
    ids, masked = _masked_at(masked_records)
    whole, partial, total = _whole_or_nothing(ids, masked, phrase_ids, is_piece)
    assert partial == 0
    # Phrases are chosen before words: most of those in a row get masked (whole-word masking: about 15%).
    # A phrase is masked about as often as a word (15% of the tokens are).
    assert total > 50 and 0.05 < whole / total < 0.3
    stats = summary.stats
    # The summary counts these and the parts of phrases cut at a row's edge.
    assert whole <= stats.num_masked_units <= 1.2 * whole
    lengths = [len(p) for p in phrase_ids]
    assert min(lengths) < stats.num_masked_unit_tokens / stats.num_masked_units < max(lengths)
    text = summary.format()
    assert f"Units masked: {stats.num_masked_units:,} phrases, mean {summary.mean_unit_length:.2f} tokens" in text


def test_unmasked_records_carry_the_unit_flags(phrase_records, phrase_ids, is_piece, vocab):
    masked_records, unmasked, _ = phrase_records
    ids, _ = _masked_at(masked_records)
    np.testing.assert_array_equal(ids, unmasked["input_ids"])  # the same instances
    assert (unmasked["masked_lm_weights"] == 0).all()
    flags = unmasked["phrase_units"]
    # A phrase list is the entity source too (uncased text: no capitalisation to go by).
    np.testing.assert_array_equal(flags, unmasked["entity_units"])
    starts = {(r, c) for phrase in phrase_ids for r, c in _occurrences(ids, phrase, is_piece)}
    assert starts <= set(zip(*np.nonzero(flags == pretraining_schema.UNIT_START)))
    specials = np.isin(ids, [vocab.index("[CLS]"), vocab.index("[SEP]")]) | (unmasked["input_mask"] == 0)
    assert specials.sum() > 2 * len(ids) and not flags[specials].any()


def test_learned_collocations_are_masked_whole_or_not_at_all(tmp_path, vocab, is_piece):
    lines = phrase_learning.corpus_lines([SAMPLE])
    learned = phrase_learning.learn_phrases(lines, min_count=5, min_pmi=6.0)
    # The learned phrases are written beside the vocabulary, where the writer finds them.
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    phrase_learning.write_phrases(learned, str(tmp_path / ku.PHRASE_FILE_NAME))
    names = [" ".join(words) for words, _, _ in learned]
    assert "john dashwood" in names and "mrs dashwood" not in names  # "mrs . dashwood": punctuation is no part
    summary = _write(tmp_path / "learned.tfrecord", vocab_file=str(tmp_path / "vocab.txt"))
    ids, masked = _masked_at(_read(tmp_path / "learned.tfrecord"))
    tokenizer = PythonBertTokenizer(VOCAB_FILE, lower_case=True)
    # Learned phrases overlap ("i am", "am sure", "i am sure"): the longest match at a word is the unit, so
    # only occurrences that overlap no other have to be masked whole.
    spans = [
        (row, start, start + len(ids_))
        for ids_ in {tuple(tokenizer.tokenize(n)) for n in names}
        for row, start in _occurrences(ids, ids_, is_piece)
    ]
    covered = np.zeros(ids.shape, int)
    for row, start, stop in spans:
        covered[row, start:stop] += 1
    alone = [(row, start, stop) for row, start, stop in spans if (covered[row, start:stop] == 1).all()]
    counts = [masked[row, start:stop].sum() for row, start, stop in alone]
    whole = sum(c == stop - start for c, (_, start, stop) in zip(counts, alone))
    assert len(alone) > 100 and 0.05 < whole / len(alone) < 0.3
    assert all(c in (0, stop - start) for c, (_, start, stop) in zip(counts, alone))
    assert summary.stats.num_masked_units > 50


def test_phrase_learning_keeps_collocations_above_both_thresholds():
    rng = random.Random(0)
    filler = [f"w{i}" for i in range(50)]
    lines = []
    for _ in range(400):
        line = [rng.choice(filler) for _ in range(8)]
        line.insert(rng.randint(0, 8), "new york times" if rng.random() < 0.3 else "new york")
        if len(lines) < 3:
            line += ["rare", "pair"]
        lines.append(" ".join(line).split() + ["."])
    found = {words: (count, pmi) for words, count, pmi in phrase_learning.learn_phrases(lines, 5, 3.0)}
    assert set(found) == {("new", "york"), ("york", "times"), ("new", "york", "times")}
    assert found[("new", "york")][0] == 400
    assert 100 < found[("new", "york", "times")][0] < 140
    # "rare pair" scores high but occurs < 5 times; with a lower count threshold it is found.
    assert ("rare", "pair") in {w for w, _, _ in phrase_learning.learn_phrases(lines, 2, 3.0)}
    assert not phrase_learning.learn_phrases(lines, 5, 20.0)


# --- command lines -------------------------------------------------------------------------------------------------


def _cli(module, argv):
    return absl_flags.run_main(module, argv)


def test_cli_phrase_masking_and_its_bad_input(tmp_path, capsys, phrase_file):
    from tfrecords_tools import create_pretraining_data

    common = [
        f"--input_file={SAMPLE}",
        f"--vocab_file={VOCAB_FILE}",
        "--max_seq_length=64",
        "--max_predictions_per_seq=10",
        "--dupe_factor=1",
        "--num_workers=1",
    ]
    argv = common + [f"--output_file={tmp_path}/a.tfrecord", "--masking=phrase", f"--phrase_file={phrase_file}"]
    assert _cli(create_pretraining_data, argv) == 0
    assert "Units masked:" in capsys.readouterr().err
    for options, message in (
        (["--masking=phrase"], "--masking=phrase needs --phrase_file or the learned phrases"),
        (["--masking=entity"], "--masking=entity with --do_lower_case needs --phrase_file"),
        (["--masking=span", f"--phrase_file={phrase_file}"], "--phrase_file is for --masking=phrase|entity"),
        (["--masking=phrase", f"--phrase_file={tmp_path}/missing.txt"], "missing.txt"),
    ):
        assert _cli(create_pretraining_data, common + [f"--output_file={tmp_path}/b.tfrecord", *options]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
        assert not (tmp_path / "b.tfrecord").exists()


def test_make_vocab_learns_phrases_beside_the_vocabulary(tmp_path):
    from tfrecords_tools import make_vocab

    argv = [f"--input_file={SAMPLE}", f"--output_file={tmp_path}/vocab.txt", "--vocab_size=400", "--min_count=2"]
    assert _cli(make_vocab, argv + ["--learn_phrases", "--phrase_min_pmi=6"]) == 0
    phrases = (tmp_path / ku.PHRASE_FILE_NAME).read_text(encoding="utf-8").splitlines()
    assert "john dashwood" in phrases and all(2 <= len(p.split()) <= 3 for p in phrases)
    table = ku.read_phrase_file(str(tmp_path / ku.PHRASE_FILE_NAME), str(tmp_path / "vocab.txt"), True)
    assert len(table.phrases) == len(phrases)
