"""SQuAD: windowed featurization, answer post-processing, and fine-tuning v1.1 and v2.0 end to end."""

import json
import os

import numpy as np
import pytest

from bert_tf.data.examples import SquadAnswer, SquadExample
from bert_tf.tasks.squad_features import featurize_squad
from bert_tf.tasks.squad_postprocessing import postprocess_squad
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers.jobs import finetune

CONTEXT = "Alice walked to Paris, then  Bob's team played the match in Rome and London today."


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return TaskTokenizer(synthetic.write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt")))


def example(answer="Rome", qas_id="q"):
    return SquadExample(qas_id, "What comes after marker?", CONTEXT, (SquadAnswer(answer, CONTEXT.index(answer)),))


def test_windows_cover_the_context_once_at_maximal_context(tokenizer):
    features = featurize_squad([example()], tokenizer, seq_length=16, doc_stride=4, max_query_length=5, training=False)
    query = tokenizer.tokenize(["What comes after marker?"])[0]
    assert len(query) == 5
    ids = features.inputs["input_word_ids"]
    assert len(features) > 3
    owner = {}
    for f in range(len(features)):
        row = ids[f]
        assert row[0] == tokenizer.cls_id and list(row[1:6]) == query and row[6] == tokenizer.sep_id
        length = int(features.inputs["input_mask"][f].sum())
        assert row[length - 1] == tokenizer.sep_id
        np.testing.assert_array_equal(features.inputs["input_type_ids"][f][:length], [0] * 7 + [1] * (length - 7))
        for position in range(7, length - 1):
            start, end = features.char_start[f, position], features.char_end[f, position]
            piece = tokenizer.vocab[row[position]]
            if piece != "[UNK]":
                # Every piece maps back to the context characters it was made from.
                assert CONTEXT[start:end].lower() == (piece[2:] if piece.startswith("##") else piece)
            if features.is_max_context[f, position]:
                assert (start, end, piece) not in owner
                owner[(start, end, piece)] = f
        assert (features.char_start[f, length - 1 :] == -1).all()
    # Every context piece is owned by exactly one window.
    all_pieces = {
        (features.char_start[f, p], features.char_end[f, p], tokenizer.vocab[ids[f, p]])
        for f in range(len(features))
        for p in range(16)
        if features.char_start[f, p] >= 0
    }
    assert set(owner) == all_pieces
    assert set(features.example_index.tolist()) == {0}


def test_training_positions_point_at_the_answer_or_cls(tokenizer):
    features = featurize_squad(
        [example("Rome")], tokenizer, seq_length=16, doc_stride=4, max_query_length=5, training=True
    )
    starts, ends = features.inputs["start_positions"], features.inputs["end_positions"]
    hits = 0
    for f in range(len(features)):
        if starts[f] == 0:
            assert ends[f] == 0
            continue
        hits += 1
        span = CONTEXT[features.char_start[f, starts[f]] : features.char_end[f, ends[f]]]
        assert span == "Rome"
    assert hits >= 1 and hits < len(features)
    # A multi-piece answer spans all its pieces ("walk ##ed").
    features = featurize_squad([example("walked")], tokenizer, 16, 4, 5, training=True)
    f = int(np.argmax(features.inputs["start_positions"] > 0))
    start, end = features.inputs["start_positions"][f], features.inputs["end_positions"][f]
    assert end == start + 1
    assert CONTEXT[features.char_start[f, start] : features.char_end[f, end]] == "walked"


def logits_for(features, text, score=10.0):
    """Start/end logits that pick `text` (located in CONTEXT) in every window holding it."""
    first, last = CONTEXT.index(text), CONTEXT.index(text) + len(text)
    start = np.zeros(features.char_start.shape, np.float32)
    end = np.zeros(features.char_start.shape, np.float32)
    for f in range(len(features)):
        for p in range(features.char_start.shape[1]):
            if features.char_start[f, p] == first:
                start[f, p] = score
            if features.char_start[f, p] >= 0 and features.char_end[f, p] == last:
                end[f, p] = score
    return start, end


def test_postprocessing_cuts_answers_out_of_the_context(tokenizer):
    examples = [example()]
    features = featurize_squad(examples, tokenizer, 16, 4, 5, training=False)
    # "Bob" is the first piece of "Bob's": the answer keeps the original casing and drops "'s".
    start, end = logits_for(features, "Bob")
    predictions = postprocess_squad(examples, features, start, end, n_best_size=5)
    assert predictions.answers == {"q": "Bob"}
    nbest = predictions.nbest["q"]
    assert nbest[0]["text"] == "Bob"
    assert sum(entry["probability"] for entry in nbest) == pytest.approx(1.0)
    assert len({entry["text"] for entry in nbest}) == len(nbest) <= 5
    # Spans keep the context's characters between pieces ("Paris, then  Bob").
    start, _ = logits_for(features, "Paris")
    _, end = logits_for(features, "Bob")
    predictions = postprocess_squad(examples, features, start, end, n_best_size=5, max_answer_length=10)
    assert predictions.answers["q"] == "Paris, then  Bob"
    # ... unless the span is longer than max_answer_length pieces.
    predictions = postprocess_squad(examples, features, start, end, n_best_size=5, max_answer_length=3)
    assert predictions.answers["q"] != "Paris, then  Bob"


def test_v2_null_answer_and_threshold(tokenizer):
    examples = [example()]
    features = featurize_squad(examples, tokenizer, 16, 4, 5, training=False)
    start, end = logits_for(features, "Rome", score=3.0)
    start[:, 0] = end[:, 0] = 2.0  # null score 4 < span score 6 in the best window
    predictions = postprocess_squad(examples, features, start, end, version_2_with_negative=True)
    assert predictions.answers["q"] == "Rome"
    assert predictions.null_odds["q"] == pytest.approx(4.0 - 6.0)
    assert "" in [entry["text"] for entry in predictions.nbest["q"]]
    start[:, 0] = end[:, 0] = 4.0  # null score 8 > 6
    predictions = postprocess_squad(examples, features, start, end, version_2_with_negative=True)
    assert predictions.answers["q"] == ""
    assert predictions.null_odds["q"] == pytest.approx(2.0)
    predictions = postprocess_squad(
        examples, features, start, end, version_2_with_negative=True, null_score_diff_threshold=2.5
    )
    assert predictions.answers["q"] == "Rome"


def test_query_too_long_for_sequence(tokenizer):
    with pytest.raises(ValueError, match="max_query_length"):
        featurize_squad([example()], tokenizer, seq_length=8, doc_stride=4, max_query_length=5, training=False)


@pytest.mark.parametrize("version_2", [False, True])
def test_squad_learns_the_word_after_the_marker(tmp_path, version_2):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    fraction = 0.3 if version_2 else 0.0
    train_file = synthetic.write_json(str(tmp_path / "train.json"), synthetic.squad_data(400, 1, fraction))
    dev_file = synthetic.write_json(str(tmp_path / "dev.json"), synthetic.squad_data(60, 2, fraction))
    output_dir = str(tmp_path / "out")
    results = finetune(
        "squad",
        output_dir,
        train_file=train_file,
        eval_file=dev_file,
        predict_file=dev_file,
        model_dir=model_dir,
        max_seq_length=24,
        doc_stride=6,
        max_query_length=8,
        train_batch_size=32,
        learning_rate=1e-3,
        num_train_steps=100,
        warmup_proportion=0.1,
        do_train=True,
        do_eval=True,
        do_predict=True,
        version_2_with_negative=version_2,
        steps_per_loop=50,
        seed=1,
    )
    # A random span would almost never match; a correct pipeline gets (nearly) all of them.
    assert results["exact_match"] >= 85.0
    assert results["f1"] >= results["exact_match"]
    assert results["global_step"] == 100
    if version_2:
        assert results["HasAns_exact_match"] >= 80.0 and results["NoAns_exact_match"] >= 80.0
        assert results["NoAns_total"] > 0
        null_odds = json.load(open(os.path.join(output_dir, "null_odds.json")))
        assert len(null_odds) == 60
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["exact_match"] == results["exact_match"]
    with open(os.path.join(output_dir, "predictions.json")) as f:
        predictions = json.load(f)
    dev = json.load(open(dev_file))
    gold = {p["qas"][0]["id"]: p["qas"][0]["answers"] for p in dev["data"][0]["paragraphs"]}
    assert set(predictions) == set(gold)
    # Answers are exact substrings of the original contexts (original casing), or "" for no answer.
    contexts = {p["qas"][0]["id"]: p["context"] for p in dev["data"][0]["paragraphs"]}
    assert all(text in contexts[qid] for qid, text in predictions.items())
    nbest = json.load(open(os.path.join(output_dir, "nbest_predictions.json")))
    assert all(abs(sum(e["probability"] for e in entries) - 1) < 1e-4 for entries in nbest.values())
