"""Which config, vocabulary and checkpoint a job uses, and the one rule that checks they fit together.

A job names its model by a model directory (`bert_config.json`, `vocab.txt`, checkpoint), by explicit files,
or both (explicit files override the directory's). `ModelSource` holds those flags; `resolve()` reads the
config and the vocabulary once and checks them: the vocabulary must have exactly `vocab_size` tokens (a
vocabulary of another size belongs to another model: ids would index the wrong rows), and a requested
sequence length must fit `max_position_embeddings`. Errors are `ValueError`s naming the flag and file.
"""

from __future__ import annotations

import dataclasses
import os

from bert_tf.config import BertConfig

CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """The model flags shared by fine-tuning, feature extraction, layer probing and export.

    Attributes:
      model_dir: a model directory.
      init_checkpoint: a TF2 checkpoint (prefix or directory); default: `model_dir`.
      bert_config_file, vocab_file: default: the ones in `model_dir`.
      do_lower_case: lower-case and strip accents (uncased models).
    """

    model_dir: str | None = None
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool = True

    def resolve(self, max_seq_length: int | None = None) -> "ResolvedModel":
        """Reads and checks the config and vocabulary; see the module docstring."""
        from bert_tf.tokenization.vocab import load_vocab

        config_file = self.bert_config_file or (self.model_dir and os.path.join(self.model_dir, CONFIG_NAME))
        vocab_file = self.vocab_file or (self.model_dir and os.path.join(self.model_dir, VOCAB_NAME))
        checkpoint = self.init_checkpoint or self.model_dir
        if not (config_file and vocab_file and checkpoint):
            raise ValueError("Give --model_dir, or --init_checkpoint with --bert_config_file and --vocab_file.")
        config_flag = "bert_config_file" if self.bert_config_file else "model_dir"
        if not os.path.isfile(config_file):
            raise ValueError(f"--{config_flag}: {config_file} not found.")
        try:
            config = BertConfig.from_json_file(config_file)
        except ValueError as e:
            raise ValueError(f"--{config_flag}: {config_file}: {e}") from None
        vocab_flag = "vocab_file" if self.vocab_file else "model_dir"
        try:
            vocab = load_vocab(vocab_file)
        except (FileNotFoundError, ValueError) as e:
            raise ValueError(f"--{vocab_flag}: {e}") from None
        check_compatible(config, len(vocab), max_seq_length, vocab_flag=vocab_flag, vocab_file=vocab_file)
        return ResolvedModel(config, vocab_file, vocab, checkpoint, self.do_lower_case)


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """A checked model: its `BertConfig`, vocabulary (file and tokens) and checkpoint path."""

    config: BertConfig
    vocab_file: str
    vocab: list
    checkpoint: str
    do_lower_case: bool


def check_compatible(
    config: BertConfig,
    vocab_size: int,
    max_seq_length: int | None = None,
    *,
    vocab_flag: str = "vocab_file",
    vocab_file: str = "",
) -> None:
    """The one compatibility rule of a config, a vocabulary and a sequence length (see the module docstring)."""
    if vocab_size != config.vocab_size:
        raise ValueError(
            f"--{vocab_flag}: {vocab_file} has {vocab_size} tokens but the model's vocab_size is {config.vocab_size}."
        )
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"--max_seq_length={max_seq_length} exceeds the model's max_position_embeddings "
            f"({config.max_position_embeddings})."
        )
