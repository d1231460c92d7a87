"""`experiments.export` of a tagger fine-tuned with --long_text=windows: the servable tagger reads a sentence in
fine-tuning's overlapping windows and tags each word from its max-context window, as `--do_predict` does."""

import json
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.examples import TaggingExample
from bert_tf.tasks import long_text, long_text_ops
from bert_tf.tasks.tagging import TaggingTask
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from experiments import export as export_cli
from tests.fixtures.finetune import synthetic
from tests.helpers.absl_flags import run_main
from tests.helpers.jobs import finetune

SEQ_LENGTH = 8  # a window holds 6 pieces
WINDOWS = long_text.LongTextConfig("windows", window_stride=3)
# Sentences of 1 to 25 words; a split word ("playing") is two pieces: shorter than, as long as and longer than
# the window.
WORD_COUNTS = (1, 3, 6, 5, 7, 11, 25)


def _sentences() -> list:
    rng = random.Random(5)
    words = synthetic.FILLER + synthetic.PLACES + [p.capitalize() for p in synthetic.PLACES]
    sentences = [[rng.choice(words) for _ in range(count)] for count in WORD_COUNTS]
    sentences[3][2] = "playing"  # 5 words, 6 pieces
    sentences[-1][4] = "playing"
    return sentences


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(fine-tuned directory, export directory, the export's stdout)."""
    root = tmp_path_factory.mktemp("tagger_windows")
    rng = random.Random(1)
    pieces = synthetic.tagging_sentences(96, 1)
    train = [pieces[i] + pieces[i + 1] + pieces[i + 2] for i in range(0, 96, 3)]  # most longer than a window
    rng.shuffle(train)
    output_dir = str(root / "tagger")
    finetune(
        "token_classification",
        output_dir,
        train_file=synthetic.write_conll(str(root / "train.conll"), train),
        predict_file=synthetic.write_conll(str(root / "test.conll"), [[(w, "O") for w in s] for s in _sentences()]),
        # Weights drawn wide: a word's scores differ by its place in the window, so a cut otherwise than
        # fine-tuning's shows in the tags.
        model_dir=synthetic.make_model_dir(str(root / "model"), initializer_range=0.5),
        long_text_config=WINDOWS,
        max_seq_length=SEQ_LENGTH,
        train_batch_size=16,
        learning_rate=1e-5,  # a few small steps: the wide weights' position-dependent tags stay
        num_train_steps=4,
        steps_per_loop=4,
        do_train=True,
        do_predict=True,
        seed=1,
    )
    export_dir = root / "export"
    argv = [f"--model_dir={output_dir}", f"--export_dir={export_dir}", f"--max_seq_length={SEQ_LENGTH}"]
    return output_dir, export_dir, argv


def _predicted_tags(output_dir) -> list:
    with open(os.path.join(output_dir, "predictions.txt"), encoding="utf-8") as f:
        blocks = [block.split("\n") for block in f.read().strip().split("\n\n")]
    return [[line.split("\t")[-1] for line in block] for block in blocks]


def _keras_tagger(output_dir, num_tags):
    from bert_tf.checkpoints import find_checkpoint, restore
    from bert_tf.checkpoints.model_dir import load_config
    from bert_tf.models import BertEncoder, BertTokenClassifier

    tagger = BertTokenClassifier(BertEncoder(load_config(output_dir)), num_labels=num_tags)
    restore(tagger, find_checkpoint(output_dir))
    return tagger


def _reference_scores(task, tagger, sentences) -> list:
    """Each word's tag probability as `--do_predict` reads it: the softmax at the word's row and place in
    `TaggingTask.featurize`'s windows."""
    examples = [TaggingExample(str(i), tuple(s), None) for i, s in enumerate(sentences)]
    features = task.featurize(examples, training=False)
    inputs = {k: features.inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    probabilities = tf.nn.softmax(tagger(inputs), axis=-1).numpy()
    scores = [np.zeros(len(s)) for s in sentences]
    for row, position in zip(*np.nonzero(features.word_index >= 0)):
        sentence_scores = scores[features.example_index[row]]
        sentence_scores[features.word_index[row, position]] = probabilities[row, position].max()
    return scores


def test_servable_tags_each_word_from_its_max_context_window_as_do_predict(exported, capsys):
    output_dir, export_dir, argv = exported
    assert run_main(export_cli, argv) == 0
    verified = [line for line in capsys.readouterr().out.splitlines() if line.startswith("verified:")]
    assert "tagger serving_default(text), --long_text=windows (--window_stride=3) on 4 texts" in verified[0]

    sentences = _sentences()
    tokenizer = TaskTokenizer(os.path.join(output_dir, "vocab.txt"))
    num_pieces = [sum(len(tokenizer.flat_pieces(p)) for p in tokenizer.word_pieces(s)) for s in sentences]
    window = SEQ_LENGTH - 2
    assert min(num_pieces) < window and window in num_pieces and max(num_pieces) > 3 * window

    serve = tf.saved_model.load(str(export_dir / "tagger")).signatures["serving_default"]
    got = {k: v.numpy() for k, v in serve(text=tf.constant([" ".join(s) for s in sentences] + [""])).items()}
    assert got["num_words"].tolist() == [len(s) for s in sentences] + [0]
    predicted = _predicted_tags(output_dir)
    served = [[t.decode() for t in got["tags"][i, : len(s)]] for i, s in enumerate(sentences)]
    assert served == predicted

    with open(os.path.join(output_dir, "task_config.json"), encoding="utf-8") as f:
        tag_list = json.load(f)["label_list"]
    tagger = _keras_tagger(output_dir, len(tag_list))
    task = TaggingTask(tokenizer, seq_length=SEQ_LENGTH, tag_list=tag_list, long_text=WINDOWS)
    for i, expected in enumerate(_reference_scores(task, tagger, sentences)):
        np.testing.assert_allclose(got["scores"][i, : len(expected)], expected, atol=1e-5, rtol=0)
    # A sentence's tags do not depend on its batch.
    alone = serve(text=tf.constant([" ".join(sentences[-1])]))["tags"].numpy()[0]
    assert alone.tolist() == got["tags"][len(sentences) - 1].tolist()[: alone.shape[0]]

    # The check has teeth: the same weights reading the sentences split at word boundaries (a truncate-trained
    # tagger's servable) tag some word otherwise.
    from bert_tf.export.tagger_module import TaggerModule
    from bert_tf.tokenization import BertTokenizer

    split = TaggerModule(tagger, BertTokenizer(os.path.join(output_dir, "vocab.txt")), tag_list, SEQ_LENGTH)
    split_out = split.tag(tf.constant([" ".join(s) for s in sentences]))
    split_tags = [[t.decode() for t in split_out["tags"].numpy()[i, : len(s)]] for i, s in enumerate(sentences)]
    assert split_tags != predicted
    assert np.abs(split_out["scores"].numpy() - got["scores"][: len(sentences)]).max() > 0.01
    assert len({t for tags in predicted for t in tags}) >= 2


def test_a_recorded_long_text_no_tagger_was_fine_tuned_with_exits_2_naming_the_file(exported, tmp_path, capfd):
    output_dir = exported[0]
    for bad, named in [
        ({"long_text": "head_tail"}, "--long_text=head_tail"),
        ({"window_stride": 7}, "--window_stride=7"),
    ]:
        broken = tmp_path / "broken"
        shutil.copytree(output_dir, broken, dirs_exist_ok=True)
        path = broken / "task_config.json"
        task_config = json.loads(path.read_text("utf-8"))
        task_config["long_text"].update(bad)
        path.write_text(json.dumps(task_config), "utf-8")
        export_dir = tmp_path / "export"
        argv = [f"--model_dir={broken}", f"--export_dir={export_dir}", f"--max_seq_length={SEQ_LENGTH}"]
        assert run_main(export_cli, argv) == 2
        err = capfd.readouterr().err.strip().splitlines()[-1]
        assert str(path) in err and named in err, err
        assert not export_dir.exists()


def test_max_context_window_in_the_graph_is_the_python_rule():
    lengths = np.arange(0, 40)
    for window, stride in [(6, 3), (6, 6), (5, 2), (4, 1)]:
        starts = long_text_ops.window_starts(tf.constant(lengths), window, stride, None)
        assert starts.to_list() == [long_text.window_starts(int(n), window, stride) for n in lengths]
        document = np.repeat(lengths, np.maximum(lengths, 1))  # an empty document: one query, at 0
        position = np.concatenate([np.arange(n) if n else [0] for n in lengths])
        got = long_text_ops.max_context_window(starts, lengths, document, position, window).numpy()
        expected = [
            long_text.max_context_windows(long_text.window_starts(int(n), window, stride), window, int(n))
            for n in lengths
        ]
        assert got.tolist() == np.concatenate([e if len(e) else [0] for e in expected]).tolist(), (window, stride)
