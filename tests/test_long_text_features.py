"""extract_features with --long_text: a document's vector is the mean of its windows' (each computed alone),
per-token features come from the window where each piece has the most context (every piece once), windows
pack (short documents' windows share rows), and the cut report is logged and written beside the output
whatever --long_text is."""

import json
import os
import random

import numpy as np
import pytest

from bert_tf.checkpoints import load_encoder
from bert_tf.errors import JobArgumentError
from bert_tf.tasks.task_tokenizer import TaskTokenizer
from tests.fixtures.finetune import synthetic
from tests.helpers import jobs
from tests.helpers.absl_flags import listening_to_absl

SEQ = 12  # a window holds 10 pieces
STRIDE = 4
rng = random.Random(0)
# Empty, one piece, exactly the window, then documents of 3, 6 and 9 windows (the last two capped at 4).
LENGTHS = [0, 1, 10, 15, 27, 40]
DOCUMENTS = [" ".join(rng.choice(synthetic.FILLER) for _ in range(n)) for n in LENGTHS]
WINDOWS = dict(long_text="windows", window_stride=STRIDE, max_windows=4)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("long_features")
    model_dir = synthetic.make_model_dir(str(root / "model"), num_hidden_layers=2)
    input_file = root / "documents.txt"
    input_file.write_text("\n".join(DOCUMENTS) + "\n", encoding="utf-8")
    tokenizer = TaskTokenizer(os.path.join(model_dir, "vocab.txt"))
    pieces = tokenizer.tokenize(DOCUMENTS)
    assert [len(p) for p in pieces] == LENGTHS  # one word, one piece
    return model_dir, str(input_file), root, tokenizer, pieces, load_encoder(model_dir)


def extract(setup, name, **options):
    from bert_tf.tasks.long_text import LongTextConfig

    model_dir, input_file, root = setup[:3]
    long_text = {k: options.pop(k) for k in list(options) if k in ("long_text", "window_stride", "max_windows")}
    path = str(root / name)
    jobs.extract_features(
        input_file,
        path,
        model_dir=model_dir,
        max_seq_length=SEQ,
        batch_size=3,
        long_text_config=LongTextConfig(**long_text),
        **options,
    )
    with open(path + ".summary.json") as f:
        return path, json.load(f)


def expected_starts(n):
    """Window starts written out for LENGTHS (stride 4, the last window ends at the end, at most 4 kept)."""
    return {0: [0], 1: [0], 10: [0], 15: [0, 4, 5], 27: [0, 4, 8, 12, 16, 17], 40: [0, 4, 8, 12, 16, 20, 24, 28, 30]}[n]


def kept_starts(n):
    starts = expected_starts(n)
    return starts if len(starts) <= 4 else [starts[round(i)] for i in np.linspace(0, len(starts) - 1, 4)]


def window_outputs(encoder, tokenizer, pieces, start):
    """The last layer [tokens, hidden] and the mean over real tokens of one window, encoded alone."""
    ids = [tokenizer.cls_id, *pieces[start : start + SEQ - 2], tokenizer.sep_id]
    word_ids = np.array([ids], np.int32)
    outputs = encoder(
        {"input_word_ids": word_ids, "input_mask": np.ones_like(word_ids), "input_type_ids": 0 * word_ids}
    )
    tokens = np.asarray(outputs["encoder_outputs"][-1])[0]
    return tokens, tokens.mean(axis=0)


def max_context_window(starts, n, piece):
    """run_squad's `_check_is_max_context`, written out: the first window of the best score."""
    best, best_score = None, None
    for index, start in enumerate(starts):
        end = start + min(SEQ - 2, n - start) - 1
        if start <= piece <= end:
            score = min(piece - start, end - piece) + 0.01 * (end - start + 1)
            if best_score is None or score > best_score:
                best, best_score = index, score
    return best


@pytest.mark.parametrize("packing", [True, False])
def test_document_vector_is_the_mean_of_its_windows(setup, packing):
    """Packed rows plain, one window a row with --normalize (the mean of the windows, then unit length)."""
    encoder, tokenizer, pieces = setup[5], setup[3], setup[4]
    options = dict(layers=[-1], pooling="mean", packing=packing, normalize=not packing)
    path, summary = extract(setup, f"docs_{packing}.npy", **options, **WINDOWS)
    vectors = np.load(path)[:, 0]
    assert vectors.shape == (len(DOCUMENTS), 32)
    for document, n in enumerate(LENGTHS):
        windows = [window_outputs(encoder, tokenizer, pieces[document], s)[1] for s in kept_starts(n)]
        expected = np.mean(windows, axis=0)
        expected = expected if packing else expected / np.linalg.norm(expected)
        np.testing.assert_allclose(vectors[document], expected, atol=2e-5)
    assert summary["cut"] == {
        "texts": 6,
        "texts_longer_than_window": 3,
        # The 40-piece document's 4 windows (0, 12, 20, 30) read 0-9 and 12-39: pieces 10 and 11 are dropped.
        "dropped_piece_share_of_long_texts": round(2 / (15 + 27 + 40), 4),
        "empty_texts": 1,
        "one_piece_texts": 1,
        "texts_over_max_windows": 2,  # 27 pieces need 6 windows, 40 need 9
    }
    assert summary["long_text"]["long_text"] == "windows" and summary["packing"] is packing


def test_per_token_features_come_from_the_max_context_window(setup):
    encoder, tokenizer, pieces = setup[5], setup[3], setup[4]
    path, _ = extract(setup, "tokens.npz", layers=[-1], **WINDOWS)  # packed rows: short documents share them
    arrays = np.load(path)
    values, word_ids, mask = arrays["layer_-1"], arrays["input_word_ids"], arrays["input_mask"]
    assert values.shape == (len(DOCUMENTS), 40, 32)  # the longest document read: 38 pieces, [CLS] and [SEP]
    sources_used = set()
    for document, n in enumerate(LENGTHS):
        starts = kept_starts(n)
        read = sorted({p for s in starts for p in range(s, min(s + SEQ - 2, n))})
        # Every piece a window reads, once, in order, between [CLS] and [SEP].
        length = int(mask[document].sum())
        assert length == len(read) + 2
        expected_ids = [tokenizer.cls_id] + [pieces[document][p] for p in read] + [tokenizer.sep_id]
        assert word_ids[document, :length].tolist() == expected_ids
        windows = [window_outputs(encoder, tokenizer, pieces[document], s)[0] for s in starts]
        np.testing.assert_allclose(values[document, 0], windows[0][0], atol=2e-5)  # [CLS] of the first window
        np.testing.assert_allclose(values[document, length - 1], windows[-1][-1], atol=2e-5)  # the last [SEP]
        for token, piece in enumerate(read, start=1):
            best = max_context_window(starts, n, piece)
            sources_used.add((len(starts), best))
            np.testing.assert_allclose(values[document, token], windows[best][1 + piece - starts[best]], atol=2e-5)
        assert not values[document, length:].any()
    # The rule did pick middle windows, not only the first or last.
    assert {(3, 1), (4, 1), (4, 2)} <= sources_used
    # The empty and the one-piece documents' windows shared a packed row; one window a row gives the same.
    from bert_tf.data import packed_rows
    from bert_tf.features.document_windows import DocumentWindows
    from bert_tf.tasks.long_text import LongTextConfig

    rows, _ = DocumentWindows.plan(pieces, SEQ - 2, LongTextConfig(**WINDOWS)).rows(tokenizer, SEQ)
    tables = np.concatenate([t.numpy() for t in packed_rows.inference_row_batches(rows["input_mask"].sum(1), 3, SEQ)])
    assert ((tables >= 0).sum(axis=1) >= 2).any()
    jsonl, _ = extract(setup, "tokens.jsonl", layers=[-1], **WINDOWS)
    with open(jsonl, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    for document, record in enumerate(records):
        length = int(mask[document].sum())
        assert [t["token"] for t in record["features"]] == tokenizer.tokens(word_ids[document, :length])
        got = np.array([t["layers"][0]["values"] for t in record["features"]])
        np.testing.assert_allclose(got, values[document, :length], atol=2e-6)
    alone = np.load(extract(setup, "alone.npz", layers=[-1], packing=False, **WINDOWS)[0])
    np.testing.assert_array_equal(alone["input_word_ids"], word_ids)
    np.testing.assert_allclose(alone["layer_-1"], values, atol=2e-5)


@pytest.mark.parametrize("long_text", ["truncate", "head_tail"])
def test_truncate_and_head_tail_report_their_cut(setup, long_text, caplog):
    tokenizer, pieces = setup[3], setup[4]
    with listening_to_absl(caplog.handler):
        path, summary = extract(setup, f"{long_text}.npz", layers=[-1], pooling="cls", long_text=long_text)
    assert summary["cut"]["texts_longer_than_window"] == 3
    assert summary["cut"]["dropped_piece_share_of_long_texts"] == round((5 + 17 + 30) / (15 + 27 + 40), 4)
    assert "3 of 6 texts are longer than the window (10 pieces)" in caplog.text
    word_ids = np.load(path)["input_word_ids"]
    # head_tail keeps the first 2 and the last 8 pieces of the 40 (long_text.head_tail_split(10)).
    kept = pieces[5][:10] if long_text == "truncate" else pieces[5][:2] + pieces[5][-8:]
    assert word_ids[5].tolist() == [tokenizer.cls_id, *kept, tokenizer.sep_id]


def test_bad_long_text_input_is_refused_before_any_output(setup, tmp_path, capfd):
    from experiments import extract_features as tool
    from tests.helpers.absl_flags import run_main

    model_dir, input_file = setup[:2]
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("one text\nleft side ||| right side\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    common = [f"--model_dir={model_dir}", f"--output_file={out}", f"--max_seq_length={SEQ}", "--layers=-1"]
    for extra, named in [
        ([f"--input_file={pairs}", "--long_text=windows"], f"{pairs}:2 is a pair"),
        ([f"--input_file={pairs}", "--long_text=head_tail"], "--long_text=head_tail is for single texts"),
        ([f"--input_file={input_file}", "--long_text=windows", "--window_stride=11"], "--window_stride=11"),
        ([f"--input_file={input_file}", "--long_text=windows", "--window_stride=0"], "--window_stride"),
    ]:
        assert run_main(tool, common + extra) == 2
        assert named in capfd.readouterr().err
        assert not out.exists() and not os.path.exists(f"{out}.summary.json")
    with pytest.raises(JobArgumentError, match="--window_stride=11"):
        extract(setup, "x.npy", long_text="windows", window_stride=11)
