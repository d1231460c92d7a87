"""The one resolver of a model's files and the one compatibility rule (`bert_tf.checkpoints.model_source`)."""

import pytest

from bert_tf.checkpoints.model_source import (
    ModelSource,
    check_compatible,
    check_resumable,
    check_seq_length,
)
from bert_tf.config import BertConfig
from bert_tf.errors import JobArgumentError

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _config(**overrides):
    values = dict(
        vocab_size=8,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
    )
    return BertConfig(**dict(values, **overrides))


def _model_dir(path, num_tokens, **overrides):
    path.mkdir()
    _config(**overrides).to_json_file(str(path / "bert_config.json"))
    tokens = SPECIALS + [f"w{i}" for i in range(num_tokens - len(SPECIALS))]
    (path / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return str(path)


def test_a_vocabulary_smaller_than_the_padded_table_is_accepted_a_larger_one_refused(tmp_path):
    resolved = ModelSource(_model_dir(tmp_path / "padded", 6)).resolve(16, need_checkpoint=False)
    assert len(resolved.vocab) == 6 and resolved.config.vocab_size == 8
    assert resolved.vocab_file.endswith("vocab.txt") and resolved.checkpoint == str(tmp_path / "padded")
    with pytest.raises(JobArgumentError, match=r"--model_dir: .*vocab.txt has 9 tokens but .*bert_config.json has"):
        ModelSource(_model_dir(tmp_path / "big", 9)).resolve()


def test_sequence_length_is_checked_naming_the_flag():
    config = _config()
    check_compatible(config, 8, 16)
    with pytest.raises(JobArgumentError, match=r"--max_seq_length=17 exceeds the model's max_position_embeddings=16"):
        check_compatible(config, 8, 17)
    with pytest.raises(JobArgumentError, match=r"--max_seq_length must be an integer >= 2"):
        check_seq_length(1)


def test_missing_files_name_the_flag(tmp_path):
    with pytest.raises(JobArgumentError, match="--model_dir: directory not found: .*nowhere"):
        ModelSource(str(tmp_path / "nowhere")).resolve()
    with pytest.raises(JobArgumentError, match="Give --model_dir"):
        ModelSource().resolve()
    model_dir = _model_dir(tmp_path / "model", 8)
    with pytest.raises(JobArgumentError, match="--vocab_file: file not found: .*absent.txt"):
        ModelSource(model_dir, vocab_file=str(tmp_path / "absent.txt")).resolve()
    (tmp_path / "no_mask.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", encoding="utf-8")
    with pytest.raises(JobArgumentError, match=r"--vocab_file: .*no_mask.txt.*\[MASK\]"):
        ModelSource(model_dir, vocab_file=str(tmp_path / "no_mask.txt")).resolve()


def test_an_output_directory_of_another_model_or_vocabulary_is_not_resumed(tmp_path):
    run = _model_dir(tmp_path / "run", 8)
    check_resumable(run, _config(), str(tmp_path / "run" / "vocab.txt"))
    check_resumable(str(tmp_path / "new"), _config(num_hidden_layers=2), None)
    with pytest.raises(JobArgumentError, match="--output_dir=.*holds a run of another model"):
        check_resumable(run, _config(num_hidden_layers=2), None)
    other = tmp_path / "other.txt"
    other.write_text("".join(t + "\n" for t in SPECIALS + ["x", "y", "z"]), encoding="utf-8")
    with pytest.raises(JobArgumentError, match="--vocab_file=.*other.txt differs from"):
        check_resumable(run, _config(), str(other))
