"""`experiments.export` of a fine-tuned tagger: a servable SavedModel, sentence in, words, tags and scores out."""

import os

import numpy as np
import tensorflow as tf

from experiments import export as export_cli
from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import temporary_flags
from tests.helpers.jobs import finetune

SEQ_LENGTH = 8  # 6 pieces a window: the longer test sentences are tagged in several windows


def _read_predictions(path):
    with open(path, encoding="utf-8") as f:
        blocks = [block.split("\n") for block in f.read().strip().split("\n\n")]
    return [[line.split("\t") for line in block] for block in blocks]


def test_tagger_servable_gives_finetunes_predictions(tmp_path, capsys):
    train = synthetic.write_conll(str(tmp_path / "train.conll"), synthetic.tagging_sentences(160, 1))
    sentences = synthetic.tagging_sentences(12, 3)
    sentences[0] = sentences[0] + [("playing", "O"), ("walker", "O")] * 3  # longer than one window
    predict = synthetic.write_conll(str(tmp_path / "test.conll"), sentences, with_tags=False)
    output_dir = str(tmp_path / "tagger")
    finetune(
        "token_classification",
        output_dir,
        train_file=train,
        predict_file=predict,
        model_dir=synthetic.make_model_dir(str(tmp_path / "model")),
        max_seq_length=SEQ_LENGTH,
        train_batch_size=32,
        learning_rate=1e-3,
        num_train_steps=30,
        do_train=True,
        do_predict=True,
        steps_per_loop=30,
        seed=1,
    )
    predictions = _read_predictions(os.path.join(output_dir, "predictions.txt"))
    assert len(predictions) == len(sentences)

    export_dir = tmp_path / "export"
    argv = ["export", f"--model_dir={output_dir}", f"--export_dir={export_dir}", f"--max_seq_length={SEQ_LENGTH}"]
    with temporary_flags(export_cli.define_flags, argv):
        export_cli.main(["export"])
    out = capsys.readouterr().out
    assert f"tagger:     {export_dir / 'tagger'}" in out and "tagger serving_default(text)" in out

    serve = tf.saved_model.load(str(export_dir / "tagger")).signatures["serving_default"]
    texts = [" ".join(word for word, _ in sentence) for sentence in sentences] + [""]
    got = {name: value.numpy() for name, value in serve(text=tf.constant(texts)).items()}
    assert got["num_words"].tolist() == [len(s) for s in sentences] + [0]
    for row, block in enumerate(predictions):
        count = len(block)
        assert [w.decode() for w in got["words"][row, :count]] == [word for word, _ in block]
        assert [t.decode() for t in got["tags"][row, :count]] == [tag for _, tag in block]
        assert set(got["tags"][row, count:].tolist()) <= {b""}
    scores = got["scores"][: len(sentences)]
    real = np.arange(scores.shape[1])[None, :] < got["num_words"][: len(sentences), None]
    # Each score is the chosen tag's probability: above chance among the tags, at most 1; 0 past the words.
    assert (scores[real] > 1 / 4).all() and (scores[real] <= 1).all() and (scores[~real] == 0).all()
    tags = {t.decode() for t in got["tags"][: len(sentences)][real]}
    assert len(tags) >= 2  # the check has teeth: the model does not give every word one tag
