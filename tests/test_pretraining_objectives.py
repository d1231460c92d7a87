"""The pretraining objectives' data: sentence tasks (nsp, sop, none) and masking (token, whole_word, span).

Statistics of the writer on the real text sample of tests/fixtures/pretraining/ and of its building
blocks on synthetic documents; the dynamic-masking counterparts; the command line's flags.
The jobs that train on such records: tests/test_pretrain_objectives_job.py.
"""

import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import dynamic_masking, pretraining_features
from bert_tf.data.pretraining_dataset import check_record_format
from bert_tf.pretraining_data import instances as pi
from bert_tf.pretraining_data import span_masking, writer
from bert_tf.tokenization import load_vocab
from tests.helpers import absl_flags, training_data

SAMPLE = str(training_data.SAMPLE_TEXT)
VOCAB_FILE = str(training_data.VOCAB_FILE)
SEQ = 64
PREDICTIONS = 10


@pytest.fixture(scope="module")
def vocab():
    return load_vocab(VOCAB_FILE)


def _write(directory, name, **options):
    path = str(directory / f"{name}.tfrecord")
    config = pi.InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=3, **options)
    summary = writer.write_pretraining_data([SAMPLE], [path], VOCAB_FILE, config, num_workers=1, seed=3)
    return path, summary


def _read(path, sentence_task):
    spec = pretraining_features.feature_spec(SEQ, PREDICTIONS, sentence_task=sentence_task)
    dataset = tf.data.TFRecordDataset(path).batch(100000).map(lambda r: tf.io.parse_example(r, spec))
    return {k: v.numpy() for k, v in next(iter(dataset)).items()}


def _unmasked(batch):
    """The records' input ids with the original tokens back at the masked positions."""
    ids = batch["input_ids"].copy()
    rows, cols = np.nonzero(batch["masked_lm_weights"] > 0)
    ids[rows, batch["masked_lm_positions"][rows, cols]] = batch["masked_lm_ids"][rows, cols]
    return ids


def _feature_names(path):
    record = next(iter(tf.data.TFRecordDataset(path))).numpy()
    return sorted(tf.train.Example.FromString(record).features.feature.keys())


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("objectives")
    return {
        name: _write(tmp, name, **options)
        for name, options in {
            "sop": dict(sentence_task="sop"),
            "none": dict(sentence_task="none"),
            "span": dict(masking="span"),
        }.items()
    }


def _chunk(num_documents=6, seed=0):
    """Synthetic documents: sentence s of document d is [1000 + 100 * d + s] * length, lengths 1..12."""
    rng = random.Random(seed)
    documents = []
    for d in range(num_documents):
        documents.append([[1000 + 100 * d + s] * rng.randint(1, 12) for s in range(rng.randint(1, 15))])
    return pi.DocumentChunk.from_documents(documents), documents


def _document_of(chunk, token_offset):
    sentence = np.searchsorted(chunk.sentence_offsets, token_offset, side="right") - 1
    return np.searchsorted(chunk.document_offsets, sentence, side="right") - 1


# --- sentence tasks --------------------------------------------------------------------------------------


def test_records_hold_the_label_feature_of_their_sentence_task(written):
    base = ["input_ids", "input_mask", "masked_lm_ids", "masked_lm_positions", "masked_lm_weights", "segment_ids"]
    assert _feature_names(written["sop"][0]) == sorted(base + ["sentence_order_labels"])
    assert _feature_names(written["none"][0]) == base
    assert _feature_names(written["span"][0]) == sorted(base + ["next_sentence_labels"])
    for name, task in (("sop", "sop"), ("none", "none"), ("span", "nsp")):
        assert check_record_format(written[name][0], "", SEQ, PREDICTIONS) == task
    with pytest.raises(ValueError, match="--sentence_task=none, not nsp"):
        check_record_format(written["none"][0], "", SEQ, PREDICTIONS, sentence_task="nsp")


def test_sentence_order_pairs_are_consecutive_pieces_of_one_document_swapped_half_the_time():
    chunk, _ = _chunk(num_documents=40)
    config = pi.InstanceConfig(max_seq_length=40, dupe_factor=5, sentence_task="sop")
    spans = pi.create_sentence_order_spans(chunk, config, random.Random(1))
    assert len(spans) > 400
    swapped = spans.is_random_next.astype(bool)
    first = np.where(swapped, spans.b_start, spans.a_start)
    second = np.where(swapped, spans.a_start, spans.b_start)
    first_length = np.where(swapped, spans.b_length, spans.a_length)
    second_length = np.where(swapped, spans.a_length, spans.b_length)
    # Before truncation, the first piece ends where the second begins, both inside one document.
    np.testing.assert_array_equal(first + first_length, second)
    assert (spans.a_length > 0).all() and (spans.b_length > 0).all()
    np.testing.assert_array_equal(_document_of(chunk, first), _document_of(chunk, second + second_length - 1))
    # The coin: Binomial(n, 0.5); 4 standard deviations.
    n = len(spans)
    assert abs(swapped.mean() - 0.5) < 4 * 0.5 / np.sqrt(n)


def test_sentence_order_records_swap_half_and_keep_one_document(written, vocab):
    path, summary = written["sop"]
    batch = _read(path, "sop")
    labels = batch["sentence_order_labels"][:, 0]
    n = len(labels)
    assert summary.stats.num_random_next == labels.sum()
    assert abs(labels.mean() - 0.5) < 4 * 0.5 / np.sqrt(n)
    # Two segments, each closed by [SEP] (counted in the text before masking: a random replacement may be [SEP]).
    sep = vocab.index("[SEP]")
    assert ((_unmasked(batch) == sep).sum(axis=1) == 2).all()
    assert (batch["segment_ids"].max(axis=1) == 1).all()
    assert "Sentence order:" in summary.format()


def test_full_sentences_pack_whole_sentences_across_documents_with_one_separator():
    chunk, documents = _chunk(num_documents=30, seed=2)
    vocab = pi.VocabInfo(vocab_size=10000, cls_id=1, sep_id=2, mask_id=3, is_continuation=np.zeros(10000, bool))
    config = pi.InstanceConfig(max_seq_length=34, dupe_factor=2, sentence_task="none")
    budget = config.max_num_tokens
    assert budget == 32
    token_ids, spans = pi.create_full_sentence_spans(chunk, config, vocab, random.Random(4))
    assert (spans.b_length == 0).all() and (spans.is_random_next == 0).all()
    assert (spans.a_length <= budget).all() and (spans.a_length > 0).all()
    # Both rounds lay out every token once, plus a separator between consecutive documents.
    assert len(token_ids) == 2 * (chunk.num_tokens + len(documents) - 1)
    round_length = chunk.num_tokens + len(documents) - 1
    crossing = 0
    for start, length, following in zip(spans.a_start, spans.a_length, list(spans.a_start[1:]) + [None]):
        window = token_ids[start : start + length]
        assert window[0] != vocab.sep_id and window[-1] != vocab.sep_id
        separators = np.flatnonzero(window == vocab.sep_id)
        crossing += len(separators) > 0
        # Between separators lie whole sentences of one document (ids 100 * document + sentence).
        for piece in np.split(window, separators):
            piece = piece[piece != vocab.sep_id]
            assert len(set(piece // 100)) == 1
        end = start + length
        if following is None or end % round_length == 0:
            continue  # the last sequence of a round
        # Fill: the next sentence (after the separator, if any) did not fit. Synthetic sentences are
        # runs of one id, shorter than a sequence, so none was cut.
        gap = following - end
        assert gap in (0, 1) and (gap == 0 or token_ids[end] == vocab.sep_id)
        run = token_ids[following:]
        next_sentence = int(np.argmax(run != run[0]))
        assert length + gap + next_sentence > budget
    assert crossing > 0


def test_full_sentence_records_are_one_segment_with_unmasked_separators(written, vocab):
    path, summary = written["none"]
    batch = _read(path, "none")
    sep, cls = vocab.index("[SEP]"), vocab.index("[CLS]")
    ids = _unmasked(batch)
    assert (batch["segment_ids"] == 0).all()
    assert (ids[:, 0] == cls).all()
    length = batch["input_mask"].sum(axis=1)
    assert (ids[np.arange(len(length)), length - 1] == sep).all()
    # The sample's five chapters are five documents: some sequences cross a boundary ([SEP] inside).
    inner = (ids == sep).sum(axis=1) - 1
    assert inner.max() >= 1 and (inner >= 1).sum() < len(inner)
    # No masked position is a [SEP] (the separator is not text).
    positions = batch["masked_lm_positions"][batch["masked_lm_weights"] > 0]
    assert (batch["masked_lm_ids"][batch["masked_lm_weights"] > 0] != sep).all() and positions.min() > 0
    # Packing fills sequences far more than pairs do: mean length near the maximum.
    assert length.mean() > 0.7 * SEQ
    assert "Full sentences" in summary.format()


def test_default_sentence_task_writes_the_original_features(tmp_path):
    path, _ = _write(tmp_path, "default")
    assert _feature_names(path) == sorted(pretraining_features.INT_FEATURES + pretraining_features.FLOAT_FEATURES)
    assert "next_sentence_labels" in _feature_names(path)


# --- span masking -------------------------------------------------------------------------------------------


def test_span_lengths_follow_spanberts_geometric_distribution():
    rng = np.random.default_rng(0)
    n = 200_000
    lengths = span_masking.sample_span_lengths(rng, n)
    expected = span_masking.span_length_probabilities()
    assert expected.sum() == pytest.approx(1.0)
    observed = np.bincount(lengths, minlength=11)[1:] / n
    assert observed.shape == expected.shape and lengths.min() == 1 and lengths.max() == 10
    # Each frequency within 5 standard deviations of its probability; the mean is SpanBERT's 3.8 words.
    np.testing.assert_array_less(np.abs(observed - expected), 5 * np.sqrt(expected * (1 - expected) / n))
    assert float((np.arange(1, 11) * expected).sum()) == pytest.approx(3.8, abs=0.05)
    # The TensorFlow sampler of dynamic masking is the same inverse CDF.
    u = np.linspace(0.0, 0.999999, 1001)
    from bert_tf.data.dynamic_masking import span_lengths_tf

    np.testing.assert_array_equal(
        span_lengths_tf(tf.constant(u, tf.float32)).numpy(), span_masking.span_lengths_from_uniform(u)
    )


def test_span_selection_masks_whole_word_runs_within_the_budget():
    rng = np.random.default_rng(1)
    n, length = 400, 60
    candidates = np.ones((n, length), bool)
    candidates[:, 0] = candidates[:, -1] = False
    continuation = rng.random((n, length)) < 0.3
    budget = np.full(n, 9)
    selected, span_id = span_masking.select_spans(candidates, continuation, budget, rng, num_tries=20)
    counts = selected.sum(axis=1)
    assert (counts <= budget).all() and counts.mean() > 8.5
    assert not selected[:, 0].any() and not selected[:, -1].any()
    # Whole words: a selected ## piece's word start is selected, and a selected word's pieces all are.
    _, _, _, word_index = span_masking.word_table(candidates, continuation)
    for row in range(n):
        for word in np.unique(word_index[row][selected[row]]):
            assert selected[row][word_index[row] == word].all()
    # Spans are runs of consecutive words: far longer than one word on average.
    words_per_span = [
        len(np.unique(word_index[r][span_id[r] == s])) for r in range(n) for s in np.unique(span_id[r][span_id[r] >= 0])
    ]
    assert 2.0 < np.mean(words_per_span) <= 3.8 and max(words_per_span) <= 10


def test_span_records_mask_fifteen_percent_with_the_80_10_10_split(written, vocab):
    path, summary = written["span"]
    batch = _read(path, "nsp")
    s = summary.stats
    assert abs(s.num_masked / s.num_instance_tokens - 0.15) < 0.01
    masked = max(s.num_masked, 1)
    n_spans_bound = 4 / np.sqrt(masked / 4)  # choices are per span (about 4 tokens each)
    assert abs(s.num_mask_token / masked - 0.8) < 0.4 * n_spans_bound + 0.02
    assert abs(s.num_random_token / masked - 0.1) < 0.2 * n_spans_bound + 0.02
    assert abs(s.num_kept_token / masked - 0.1) < 0.2 * n_spans_bound + 0.02
    # Whole words: no masked position is followed by an unmasked ## piece.
    is_piece = np.array([t.startswith("##") for t in vocab])
    rows, cols = np.nonzero(batch["masked_lm_weights"] > 0)
    positions = batch["masked_lm_positions"][rows, cols]
    originals = _unmasked(batch)
    masked_at = np.zeros_like(originals, bool)
    masked_at[rows, positions] = True
    follows = np.zeros_like(masked_at)
    follows[:, :-1] = masked_at[:, :-1] & is_piece[originals[:, 1:]] & (batch["input_mask"][:, 1:] > 0)
    assert (masked_at[:, 1:][follows[:, :-1]]).all()


def test_span_choice_is_made_once_per_span():
    chunk, _ = _chunk(num_documents=60, seed=5)
    vocab = pi.VocabInfo(vocab_size=10000, cls_id=1, sep_id=2, mask_id=3, is_continuation=np.zeros(10000, bool))
    config = pi.InstanceConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=4, masking="span")
    agree = total = 0
    for batch in pi.create_instances(chunk, config, vocab, seed=2):
        choices = batch.mask_choices
        positions = batch.masked_lm_positions
        adjacent = (np.diff(positions, axis=1) == 1) & (choices[:, 1:] != 0) & (choices[:, :-1] != 0)
        agree += int((choices[:, 1:] == choices[:, :-1])[adjacent].sum())
        total += int(adjacent.sum())
    # Neighbours share their span (and its choice) most of the time; per-token choices would agree 66%.
    assert total > 500 and agree / total > 0.85


# --- dynamic masking -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("masking", ["whole_word", "span"])
def test_dynamic_word_masking_rate_whole_words_and_determinism(written, vocab, masking):
    config = dynamic_masking.DynamicMaskingConfig.from_vocab_file(VOCAB_FILE, masking=masking)

    records = _read(written["none"][0], "none")
    features = {
        "input_word_ids": records["input_ids"][:128],
        "input_mask": records["input_mask"][:128],
        "input_type_ids": records["segment_ids"][:128],
        "masked_lm_positions": records["masked_lm_positions"][:128],
        "masked_lm_ids": records["masked_lm_ids"][:128],
        "masked_lm_weights": records["masked_lm_weights"][:128],
    }
    features = {k: tf.constant(v, tf.float32 if k == "masked_lm_weights" else tf.int32) for k, v in features.items()}

    def masked(seed):
        batch = dynamic_masking.dynamic_mask_batch(features, config, PREDICTIONS, tf.constant([seed, 0], tf.int64))
        return {k: v.numpy() for k, v in batch.items()}

    batches = [masked(5)]
    # The same seed draws the same masks, another seed others.
    np.testing.assert_array_equal(batches[0]["input_word_ids"], masked(5)["input_word_ids"])
    assert (batches[0]["input_word_ids"] != masked(6)["input_word_ids"]).any()
    is_piece = np.array([t.startswith("##") for t in vocab])
    specials = [vocab.index(t) for t in ("[CLS]", "[SEP]", "[PAD]")]
    masked = tokens = mask_tokens = 0
    for batch in batches:
        weights = batch["masked_lm_weights"] > 0
        rows, cols = np.nonzero(weights)
        positions = batch["masked_lm_positions"][rows, cols]
        labels = batch["masked_lm_ids"][rows, cols]
        assert not np.isin(labels, specials).any()
        restored = batch["input_word_ids"].copy()
        restored[rows, positions] = labels
        selectable = (batch["input_mask"] > 0) & ~np.isin(restored, specials)
        masked += weights.sum()
        tokens += selectable.sum()
        mask_tokens += (batch["input_word_ids"][rows, positions] == vocab.index("[MASK]")).sum()
        masked_at = np.zeros_like(restored, bool)
        masked_at[rows, positions] = True
        # A masked word is masked whole: no unmasked ## piece right after a masked token.
        piece_after = is_piece[restored[:, 1:]] & selectable[:, 1:]
        assert (masked_at[:, 1:][masked_at[:, :-1] & piece_after]).all()
        assert not (masked_at[:, :-1][masked_at[:, 1:] & is_piece[restored[:, 1:]]] == 0).any()
    rate = masked / tokens
    assert 0.13 < rate <= 0.165  # ceil(15%) per row, never overflowing
    assert abs(mask_tokens / masked - 0.8) < 0.1


# --- command line ----------------------------------------------------------------------------------------------


def _cli(argv):
    from tfrecords_tools import create_pretraining_data

    return absl_flags.run_main(create_pretraining_data, argv)


def test_cli_options_and_the_original_whole_word_flag(tmp_path, capsys):
    common = [
        f"--input_file={SAMPLE}",
        f"--vocab_file={VOCAB_FILE}",
        "--max_seq_length=64",
        "--max_predictions_per_seq=10",
        "--dupe_factor=1",
        "--num_workers=1",
    ]
    assert _cli(common + [f"--output_file={tmp_path}/a.tfrecord", "--do_whole_word_mask"]) == 0
    assert _cli(common + [f"--output_file={tmp_path}/b.tfrecord", "--masking=whole_word"]) == 0
    assert (tmp_path / "a.tfrecord").read_bytes() == (tmp_path / "b.tfrecord").read_bytes()
    capsys.readouterr()
    assert _cli(common + [f"--output_file={tmp_path}/c.tfrecord", "--do_whole_word_mask", "--masking=span"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--do_whole_word_mask contradicts --masking=span" in err[0]
    assert not (tmp_path / "c.tfrecord").exists()
    assert _cli(common + [f"--output_file={tmp_path}/e.tfrecord", "--sentence_task=sop", "--masking=span"]) == 0
    assert "sentence_order_labels" in _feature_names(str(tmp_path / "e.tfrecord"))


def test_inspector_reads_every_sentence_task(written):
    import io

    from bert_tf.pretraining_data import inspection

    for name, line in (("sop", "Sentence order: swapped"), ("none", "no sentence label"), ("span", "Next sentence")):
        out = io.StringIO()
        stats = inspection.inspect(written[name][0], VOCAB_FILE, num=1, out=out)
        assert line in out.getvalue() and stats.num_records == written[name][1].stats.num_instances
