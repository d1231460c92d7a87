"""Tagging with --long_text=windows: each word tagged from the window where its first piece has the most context
(google-research/bert's SQuAD rule), trained there only, packed like any row; and a long document whose tags
depend on the next word, tagged right with windows where a split at word boundaries misses it."""

import os
import random

import numpy as np
import pytest

from bert_tf.data.examples import TaggingExample
from bert_tf.errors import JobArgumentError
from bert_tf.tasks import long_text
from bert_tf.tasks.tagging import IGNORED_LABEL, TaggingTask
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import run_main
from tests.helpers.jobs import finetune

TAGS = ["O", "B-LOC", "I-LOC", "B-PER"]
WINDOWS = long_text.LongTextConfig("windows", window_stride=3)


def squad_max_context(starts, lengths, span_index, position):
    """google-research/bert run_squad.py `_check_is_max_context`, as written there."""
    best_score, best_span_index = None, None
    for index, (start, length) in enumerate(zip(starts, lengths)):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_span_index = score, index
    return span_index == best_span_index


def reference_owner(num_pieces, window, stride):
    """Each piece's max-context window by `squad_max_context`, over `window_starts`' windows."""
    starts = long_text.window_starts(num_pieces, window, stride)
    lengths = [min(window, num_pieces - s) for s in starts]
    owners = []
    for position in range(num_pieces):
        owning = [i for i in range(len(starts)) if squad_max_context(starts, lengths, i, position)]
        assert len(owning) == 1
        owners.append(owning[0])
    return starts, owners


@pytest.mark.parametrize(
    "num_pieces,window,stride", [(1, 4, 2), (4, 4, 1), (9, 4, 1), (23, 6, 2), (40, 14, 7), (31, 8, 5)]
)
def test_max_context_window_of_each_piece_equals_squads_rule(num_pieces, window, stride):
    starts, owners = reference_owner(num_pieces, window, stride)
    assert long_text.max_context_windows(starts, window, num_pieces).tolist() == owners


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return TaskTokenizer(synthetic.write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt")))


def sentences(n, seed, low=1, high=14):
    """Tagged sentences (some words of several pieces, some empty), from the tagging fixture's words."""
    rng = random.Random(seed)
    words = synthetic.FILLER[:6] + synthetic.PERSONS + synthetic.SPLIT_WORDS
    out = []
    for i in range(n):
        chosen = [rng.choice(words) for _ in range(rng.randint(low, high))] if i else []
        tags = ["B-PER" if w in synthetic.PERSONS else "O" for w in chosen]
        out.append(TaggingExample(f"s:{i}", tuple(chosen), tuple(tags)))
    return out


def test_every_word_is_trained_once_in_its_max_context_window(tokenizer):
    examples = sentences(12, 0)
    task = TaggingTask(tokenizer, seq_length=6, tag_list=TAGS, long_text=WINDOWS, bucket_width=0)
    features = task.featurize(examples, training=True)
    labels, words = features.inputs["label_ids"], features.word_index
    for index, example in enumerate(examples):
        rows = np.flatnonzero(features.example_index == index)
        tagged = sorted(words[rows][words[rows] >= 0].tolist())
        assert tagged == list(range(len(example.words)))  # each word once
        assert ((labels[rows] != IGNORED_LABEL) == (words[rows] >= 0)).all()
        for row in rows:
            for position in np.flatnonzero(words[row] >= 0):
                assert TAGS[labels[row, position]] == example.labels[words[row, position]]
    assert (features.inputs["input_mask"].sum(axis=1) <= 6).all()
    # The truncate split tags each word once too, in fewer rows; both cut reports count the same texts.
    split = TaggingTask(tokenizer, seq_length=6, tag_list=TAGS).featurize(examples, training=True)
    assert len(split) < len(features)
    report = task.cut_report(features)
    assert report == TaggingTask(tokenizer, 6, TAGS).cut_report(split)
    assert report["texts_longer_than_window"] == int((features.num_pieces > 4).sum()) > 0
    assert report["empty_texts"] == 1 and report["dropped_piece_share_of_long_texts"] == 0.0
    lines = task.describe_cut(report, "train")
    assert "--long_text=windows drops 0.0%" in lines[0]


def test_head_tail_is_refused_naming_the_flag_and_windows_pack(tokenizer):
    from bert_tf.tasks.task_config import FinetuningTaskConfig

    with pytest.raises(JobArgumentError, match="--long_text=head_tail"):
        TaggingTask(tokenizer, 6, TAGS, long_text=long_text.LongTextConfig("head_tail"))
    # A tagger's windows are rows like its sentences: packed by default.
    assert FinetuningTaskConfig("token_classification", long_text_config=WINDOWS).resolve_packing().packing
    assert FinetuningTaskConfig("token_classification", packing=True, long_text_config=WINDOWS).packing


@pytest.fixture(scope="module")
def tagger():
    import keras

    from bert_tf.models import BertEncoder, BertTokenClassifier

    keras.utils.set_random_seed(3)
    encoder = BertEncoder(synthetic.tiny_config())
    unpacked = BertTokenClassifier(encoder, num_labels=len(TAGS))
    packed = BertTokenClassifier(encoder, num_labels=len(TAGS), packed=True)
    packed.token_classifier.set_weights(unpacked.token_classifier.get_weights())
    return unpacked, packed


def test_predictions_are_the_max_context_windows_outputs(tokenizer, tagger):
    examples = sentences(10, 1, low=5, high=16)
    task = TaggingTask(tokenizer, seq_length=8, tag_list=TAGS, long_text=WINDOWS)
    features = task.featurize(examples, training=False)
    inputs = {k: features.inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    logits = np.asarray(tagger[0](inputs))
    predictions = task.postprocess(examples, features, {"logits": logits})
    window = 6
    for index, example in enumerate(examples):
        rows = np.flatnonzero(features.example_index == index)
        pieces = [tokenizer.flat_pieces(p) for p in tokenizer.word_pieces(list(example.words))]
        firsts = np.cumsum([0] + [len(p) for p in pieces])[:-1]
        starts, owners = reference_owner(sum(len(p) for p in pieces), window, WINDOWS.window_stride)
        assert len(rows) == len(starts)
        expected = []
        for word, first in enumerate(firsts.tolist()):
            if not pieces[word]:
                expected.append(task.default_tag)
                continue
            owner = owners[first]
            expected.append(TAGS[logits[rows[owner], 1 + first - starts[owner]].argmax()])
        assert predictions[index] == tuple(expected)


def test_packed_windows_give_the_unpacked_logits(tokenizer, tagger):
    from bert_tf.tasks.inference import predict_outputs

    examples = sentences(16, 2, low=1, high=20)
    outputs = {}
    for packing, model in zip((False, True), tagger):
        task = TaggingTask(tokenizer, seq_length=12, tag_list=TAGS, long_text=WINDOWS, packing=packing)
        features = task.featurize(examples, training=False)
        dataset = task.dataset(features, batch_size=4, training=False)
        outputs[packing] = predict_outputs(model, dataset, num_features=len(features))["logits"]
    mask = features.inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(outputs[True][mask], outputs[False][mask], atol=1e-5)


# --- a long document whose tags depend on the words after them -------------------------------------------
# Place names are persons (B-PER) in a document whose cue word is "comes" and places (B-LOC) where it is
# "after"; every other word is O. Each document has 40 one-piece words: 13 filler words, a place at word 13 (the
# last word of the first 14-word part that --long_text=truncate tags alone, at max_seq_length 16), then
# "cue cue filler place" repeated: the first place's only cues are in the next part.
CUES = {"comes": "B-PER", "after": "B-LOC"}
MAX_SEQ_LENGTH = 16


def next_word_documents(n, seed):
    rng = random.Random(seed)
    documents = []
    for _ in range(n):
        cue = rng.choice(sorted(CUES))
        words = [(rng.choice(synthetic.FILLER), "O") for _ in range(13)]
        while len(words) < 40:
            words += [
                (rng.choice(synthetic.PLACES), CUES[cue]),
                (cue, "O"),
                (cue, "O"),
                (rng.choice(synthetic.FILLER), "O"),
            ]
        documents.append(words[:40])
    return documents


def place_accuracy(predictions_file, documents, position=None):
    """Share of the place words (only the one at `position`, if given) whose predicted tag is the gold one."""
    with open(predictions_file) as f:
        parsed = [[line.split("\t") for line in block.splitlines()] for block in f.read().strip().split("\n\n")]
    right = []
    for document, predicted in zip(documents, parsed):
        assert [w for w, _ in document] == [row[0] for row in predicted]
        for i, ((word, gold), row) in enumerate(zip(document, predicted)):
            if word in synthetic.PLACES and position in (None, i):
                right.append(row[-1] == gold)
    return float(np.mean(right))


def test_windows_tag_a_word_from_its_context_where_the_split_cuts_it_off(tmp_path):
    import experiments.finetune as job

    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    dev = next_word_documents(60, 2)
    files = {
        "train_file": synthetic.write_conll(str(tmp_path / "train.conll"), next_word_documents(240, 1)),
        "eval_file": synthetic.write_conll(str(tmp_path / "dev.conll"), dev),
    }
    output_dir = str(tmp_path / "windows")
    results = finetune(
        "token_classification",
        output_dir,
        model_dir=model_dir,
        max_seq_length=MAX_SEQ_LENGTH,
        long_text_config=long_text.LongTextConfig("windows", window_stride=7),
        train_batch_size=32,
        learning_rate=1e-3,
        num_train_steps=500,  # the type flips from constant to right between 300 and 500 steps
        steps_per_loop=250,
        do_train=True,
        do_eval=True,
        seed=1,
        **files,
    )
    assert results["texts_longer_than_window"] == 60 and results["dropped_piece_share_of_long_texts"] == 0.0
    predictions = os.path.join(output_dir, "eval_predictions.txt")
    assert place_accuracy(predictions, dev) >= 0.95
    windowed_at_13 = place_accuracy(predictions, dev, position=13)
    assert windowed_at_13 >= 0.95
    # The same weights reading each document split at word boundaries: the place at word 13 lost its cue.
    again = [f"--output_dir={output_dir}", f"--eval_file={files['eval_file']}", "--do_eval", "--long_text=truncate"]
    assert run_main(job, again) == 0
    assert place_accuracy(predictions, dev, position=13) <= windowed_at_13 - 0.2


def test_tagging_head_tail_exits_2_naming_the_flag(tmp_path, capfd):
    import experiments.finetune as job

    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_conll(str(tmp_path / "train.conll"), synthetic.tagging_sentences(8, 1))
    out = tmp_path / "out"
    argv = [
        f"--model_dir={model_dir}",
        f"--train_file={train}",
        f"--output_dir={out}",
        "--task=token_classification",
        "--do_train",
        "--max_seq_length=16",
        "--long_text=head_tail",
    ]
    assert run_main(job, argv) == 2
    assert "--long_text=head_tail" in capfd.readouterr().err
    assert not os.path.exists(out)
