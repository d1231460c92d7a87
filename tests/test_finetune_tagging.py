"""Token classification: first-piece labels, long sentences split in parts, and NER-style fine-tuning."""

import os

import numpy as np
import pytest

from bert_tf.data.examples import TaggingExample
from bert_tf.errors import DataError
from bert_tf.tasks.tagging import IGNORED_LABEL, TaggingTask
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune

TAGS = ["O", "B-LOC", "I-LOC", "B-PER"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return TaskTokenizer(synthetic.write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt")))


def test_first_piece_carries_the_word_label(tokenizer):
    task = TaggingTask(tokenizer, seq_length=12, tag_list=TAGS)
    example = TaggingExample("s:1", ("Alice", "playing", "in", "New", "York"), ("B-PER", "O", "O", "B-LOC", "I-LOC"))
    features = task.featurize([example], training=True)
    assert len(features) == 1
    tokens = tokenizer.tokens(features.inputs["input_word_ids"][0])
    assert tokens[:9] == ["[CLS]", "alice", "play", "##ing", "in", "new", "york", "[SEP]", "[PAD]"]
    labels = features.inputs["label_ids"][0]
    ignored = IGNORED_LABEL
    np.testing.assert_array_equal(labels, [ignored, 3, 0, ignored, 0, 1, 2, ignored] + [ignored] * 4)
    np.testing.assert_array_equal(features.word_index[0], [-1, 0, 1, -1, 2, 3, 4] + [-1] * 5)
    np.testing.assert_array_equal(features.inputs["input_mask"][0], [1] * 8 + [0] * 4)


def test_long_sentences_are_split_at_word_boundaries_and_joined_back(tokenizer):
    task = TaggingTask(tokenizer, seq_length=6, tag_list=TAGS)
    words = ("Alice", "playing", "in", "Rome", "and", "walked", "to", "New", "York", "today")
    tags = ("B-PER", "O", "O", "B-LOC", "O", "O", "O", "B-LOC", "I-LOC", "O")
    examples = [TaggingExample("s:1", words, tags), TaggingExample("s:2", ("Bob",), ("B-PER",))]
    features = task.featurize(examples, training=True)
    assert len(features) > 3
    # No word's pieces are cut across features; at most 4 pieces (6 - [CLS] - [SEP]) per feature.
    assert (features.inputs["input_mask"].sum(axis=1) <= 6).all()
    for row in range(len(features)):
        tokens = tokenizer.tokens(features.inputs["input_word_ids"][row])
        real = [t for t in tokens if t not in ("[CLS]", "[SEP]", "[PAD]")]
        assert not real[0].startswith("##")
    # Logits that favour each first piece's gold tag give back the gold tags of both sentences.
    labels = features.inputs["label_ids"]
    logits = np.where(labels[..., None] == np.arange(len(TAGS)), 5.0, 0.0)
    predictions = task.postprocess(examples, features, {"logits": logits})
    assert predictions == [tags, ("B-PER",)]


def test_tagging_learns_names_and_places(tmp_path):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    train = synthetic.write_conll(str(tmp_path / "train.conll"), synthetic.tagging_sentences(320, 1))
    dev = synthetic.write_conll(str(tmp_path / "dev.conll"), synthetic.tagging_sentences(80, 2))
    test_sentences = synthetic.tagging_sentences(20, 3)
    test = synthetic.write_conll(str(tmp_path / "test.conll"), test_sentences, with_tags=False)
    output_dir = str(tmp_path / "out")
    results = finetune(
        "token_classification",
        output_dir,
        train_file=train,
        eval_file=dev,
        predict_file=test,
        model_dir=model_dir,
        max_seq_length=24,
        train_batch_size=32,
        learning_rate=1e-3,
        num_train_steps=100,
        do_train=True,
        do_eval=True,
        do_predict=True,
        steps_per_loop=50,
        seed=1,
    )
    # A tagger that always says "O" gets entity F1 0 (and token accuracy ~0.7).
    assert results["entity_f1"] >= 0.9 and results["token_accuracy"] >= 0.95
    assert set(results["per_type_f1"]) == {"LOC", "PER"}
    with open(os.path.join(output_dir, "predictions.txt"), encoding="utf-8") as f:
        blocks = [block.split("\n") for block in f.read().strip().split("\n\n")]
    assert len(blocks) == len(test_sentences)
    predicted = [[line.split("\t")[1] for line in block] for block in blocks]
    words = [[line.split("\t")[0] for line in block] for block in blocks]
    assert words == [[w for w, _ in sentence] for sentence in test_sentences]
    gold = [[t for _, t in sentence] for sentence in test_sentences]
    assert np.mean([p == g for p_s, g_s in zip(predicted, gold) for p, g in zip(p_s, g_s)]) >= 0.95
    with open(os.path.join(output_dir, "eval_predictions.txt"), encoding="utf-8") as f:
        first_line = f.readline().rstrip("\n").split("\t")
    assert len(first_line) == 3  # word, gold tag, predicted tag


def test_unknown_tag_names_the_sentence_and_word_in_training_data(tokenizer):
    task = TaggingTask(tokenizer, seq_length=12, tag_list=TAGS)
    with pytest.raises(DataError, match=r"train.conll:7: word 2 \('Rome'\) has unknown tag 'B-GPE'"):
        task.featurize([TaggingExample("train.conll:7", ("in", "Rome"), ("O", "B-GPE"))], training=True)


def test_tags_only_in_the_evaluation_data_count_as_errors(tokenizer, caplog):
    task = TaggingTask(tokenizer, seq_length=12, tag_list=TAGS)
    examples = [
        TaggingExample("dev.conll:7", ("in", "Rome"), ("O", "B-GPE")),
        TaggingExample("dev.conll:10", ("Alice", "&", "Bob"), ("B-PER", "SYM", "B-PER")),
    ]
    with caplog.at_level("WARNING"):
        features = task.featurize(examples, training=False)
    assert [r.getMessage() for r in caplog.records] == [
        "2 evaluation words carry labels that the training data never had ('B-GPE': 1, 'SYM': 1); they count as errors."
    ]
    # Left out of the loss; every known tag keeps its id.
    assert sorted(set(features.inputs["label_ids"][0].tolist())) == [IGNORED_LABEL, 0]
    # A tagger right on every known tag scores 3 of 5 words.
    results = task.evaluate(examples, [("O", "B-LOC"), ("B-PER", "O", "B-PER")])
    assert results["token_accuracy"] == pytest.approx(3 / 5) and results["unseen_label_words"] == 2
