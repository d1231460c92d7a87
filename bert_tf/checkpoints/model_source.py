"""Which config, vocabulary and checkpoint a job uses, and the one rule that checks they fit together.

A job names its model by a model directory (`bert_config.json`, `vocab.txt`, checkpoint), by explicit files,
or both (explicit files override the directory's). `ModelSource` holds those flags: fine-tuning, feature
extraction, layer probing and export build it from the same ones. `resolve()` reads the config and the
vocabulary once and checks them with `check_compatible`, the one rule every job, the exporter and the
converter apply:

* The vocabulary may have fewer tokens than the config's `vocab_size`, never more. A token id past
  `vocab_size - 1` would index no row of the embedding table; a shorter vocabulary only leaves rows that no
  text reaches, which is how checkpoints whose table was padded (to a multiple of 8 or 128, say) come, and
  how a converted model with such a table is fine-tuned or exported.
* A sequence length (`--max_seq_length`) is an integer of at least 2 ([CLS]
  and [SEP]) and at most `max_position_embeddings`.

A model pretrained from scratch has no checkpoint whose table it must match, so its config's `vocab_size`
is held to the vocabulary (`check_new_model_table`): at least its size and at most that size padded to a
multiple of `PADDED_TABLE_MULTIPLE` (128). More rows are trained that no token reaches (the output softmax
of the masked LM spans them all, which is slow).

`check_resumable` is the one guard of an output directory that a job resumes in: its `bert_config.json` and
`vocab.txt`, when there, must be those of the model being trained, so a checkpoint is never continued with
another model's files. Every error is a `JobArgumentError` (a `ValueError`) naming the flag and the file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from bert_tf.config import BertConfig
from bert_tf.errors import JobArgumentError, check_int

CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
#: A fine-tuned model directory's record of its task (`bert_tf.jobs.finetuning.job`): labels, lengths, data columns.
TASK_CONFIG_NAME = "task_config.json"
#: Where a job's encoder weights come from (`ModelSource.init_from`).
INIT_FROM = ("checkpoint", "random")


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """The model flags shared by fine-tuning, feature extraction, layer probing and export.

    Attributes:
      model_dir: a model directory.
      init_checkpoint: a TF2 checkpoint (prefix or directory); default: `model_dir`.
      bert_config_file, vocab_file: default: the ones in `model_dir`.
      do_lower_case: lower-case and strip accents (uncased models).
      init_from: "checkpoint" (the pretrained weights) or "random": the config's architecture, randomly
        initialised, no checkpoint read: the baseline a pretrained encoder is measured against. Only a job
        that trains the encoder takes "random" (`resolve(need_checkpoint=False)`).
    """

    model_dir: str | None = None
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool = True
    init_from: str = "checkpoint"

    def __post_init__(self):
        if self.init_from not in INIT_FROM:
            raise JobArgumentError(f"--init_from must be one of {', '.join(INIT_FROM)}, got {self.init_from!r}.")
        if self.init_from == "random" and self.init_checkpoint:
            raise JobArgumentError("--init_from=random reads no checkpoint: drop --init_checkpoint.")

    def resolve(
        self,
        max_seq_length: int | None = None,
        *,
        need_checkpoint: bool = True,
        required_tokens: Sequence[str] | None = None,
    ) -> ResolvedModel:
        """Reads and checks the config and vocabulary; see the module docstring.

        Args:
          max_seq_length: the job's sequence length, checked against the config; None: not checked.
          need_checkpoint: refuse a source without a checkpoint (a job that trains from it or reads it).
          required_tokens: special tokens the vocabulary must hold; None: `SPECIAL_TOKENS`.
        """
        if self.model_dir and not os.path.isdir(self.model_dir):
            raise JobArgumentError(f"--model_dir: directory not found: {self.model_dir}")
        config_file = self.bert_config_file or (self.model_dir and os.path.join(self.model_dir, CONFIG_NAME))
        vocab_file = self.vocab_file or (self.model_dir and os.path.join(self.model_dir, VOCAB_NAME))
        random = self.init_from == "random"
        if random and need_checkpoint:
            raise JobArgumentError("--init_from=random is for fine-tuning; this job reads trained weights.")
        if random and not (config_file and vocab_file):
            raise JobArgumentError("--init_from=random needs --bert_config_file and --vocab_file (or --model_dir).")
        checkpoint = None if random else self.init_checkpoint or self.model_dir
        if not (config_file and vocab_file and (checkpoint or not need_checkpoint)):
            raise JobArgumentError("Give --model_dir, or --init_checkpoint with --bert_config_file and --vocab_file.")
        config_flag = "bert_config_file" if self.bert_config_file else "model_dir"
        vocab_flag = "vocab_file" if self.vocab_file else "model_dir"
        config = read_config(config_file, config_flag)
        vocab = read_vocab(vocab_file, vocab_flag, required_tokens)
        check_compatible(
            config,
            len(vocab),
            max_seq_length,
            vocab_flag=vocab_flag,
            vocab_file=vocab_file,
            config_file=config_file,
        )
        return ResolvedModel(config, vocab_file, vocab, checkpoint, self.do_lower_case)


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """A checked model: its `BertConfig`, vocabulary (file and tokens) and checkpoint path (None: none given)."""

    config: BertConfig
    vocab_file: str
    vocab: list
    checkpoint: str | None
    do_lower_case: bool


def read_config(config_file: str, flag: str = "bert_config_file") -> BertConfig:
    """The `BertConfig` of `config_file`; errors name `--flag` and the file."""
    if not os.path.isfile(config_file):
        raise JobArgumentError(f"--{flag}: file not found: {config_file}")
    try:
        return BertConfig.from_json_file(config_file)
    except ValueError as e:
        raise JobArgumentError(f"--{flag}: {config_file}: {e}") from None


def read_vocab(vocab_file: str, flag: str = "vocab_file", required_tokens: Sequence[str] | None = None) -> list:
    """The tokens of `vocab_file`, which holds `required_tokens` (None: every special token).

    Errors name `--flag`, the file and, for bad UTF-8, the line.
    """
    from bert_tf.tokenization.vocab import SPECIAL_TOKENS, load_vocab_for_flag, special_token_ids

    if not os.path.isfile(vocab_file):
        raise JobArgumentError(f"--{flag}: file not found: {vocab_file}")
    try:
        vocab = load_vocab_for_flag(vocab_file, flag)
    except ValueError as e:
        raise JobArgumentError(str(e)) from None
    try:
        special_token_ids(vocab, vocab_file, required=SPECIAL_TOKENS if required_tokens is None else required_tokens)
    except ValueError as e:
        raise JobArgumentError(f"--{flag}: {e}") from None
    return vocab


def check_compatible(
    config: BertConfig,
    vocab_size: int | None,
    max_seq_length: int | None = None,
    *,
    vocab_flag: str = "vocab_file",
    vocab_file: str = "",
    config_file: str | None = None,
) -> None:
    """The one compatibility rule of a config, a vocabulary and a sequence length (see the module docstring).

    Args:
      config: the model's config; `config_file` names it in the messages (None: "the model's config").
      vocab_size: the vocabulary's number of tokens; None: not checked.
      max_seq_length: the sequence length; None: not checked.
      vocab_flag, vocab_file: for the messages.
    """
    if vocab_size is not None and vocab_size > config.vocab_size:
        where = config_file or "the model's config"
        raise JobArgumentError(
            f"--{vocab_flag}: {vocab_file} has {vocab_size} tokens but {where} has vocab_size={config.vocab_size}: "
            f"token ids past {config.vocab_size - 1} would have no embedding."
        )
    if max_seq_length is not None:
        check_seq_length(max_seq_length, config)


# A from-scratch model's embedding table may be padded up to the next multiple of this (for the MXU and
# tensor cores); see `check_new_model_table`.
PADDED_TABLE_MULTIPLE = 128


def padded_vocab_size(num_tokens: int, multiple: int = PADDED_TABLE_MULTIPLE) -> int:
    """`num_tokens` rounded up to a multiple of `multiple`: the largest table a new model may have for them."""
    return -(-num_tokens // multiple) * multiple


def check_new_model_table(config: BertConfig, vocab_size: int, *, vocab_file: str = "", config_file: str | None = None):
    """A model trained from scratch: `config.vocab_size` lies in [vocab_size, padded_vocab_size(vocab_size)].

    Raises a `JobArgumentError` naming both numbers otherwise (fewer rows than tokens is `check_compatible`'s).
    """
    check_compatible(config, vocab_size, vocab_file=vocab_file, config_file=config_file)
    limit = padded_vocab_size(vocab_size)
    if config.vocab_size > limit:
        where = config_file or "the model's config"
        raise JobArgumentError(
            f"--vocab_file: {vocab_file} has {vocab_size} tokens but {where} has vocab_size={config.vocab_size}: "
            f"a model pretrained from scratch would train {config.vocab_size - vocab_size} embedding rows that no "
            f"token reaches. Set vocab_size to {vocab_size} (or pad it to at most {limit}, a multiple of "
            f"{PADDED_TABLE_MULTIPLE}), or give --preset, which takes it from --vocab_file."
        )


def check_seq_length(max_seq_length, config: BertConfig | None = None) -> None:
    """`--max_seq_length` is an integer >= 2 and, with a `config`, at most its `max_position_embeddings`."""
    check_int("max_seq_length", max_seq_length, minimum=2)  # [CLS] and [SEP]
    if config is not None and max_seq_length > config.max_position_embeddings:
        raise JobArgumentError(
            f"--max_seq_length={max_seq_length} exceeds the model's "
            f"max_position_embeddings={config.max_position_embeddings}."
        )


def check_resumable(output_dir: str, config: BertConfig, vocab_file: str | None) -> None:
    """Refuses an `output_dir` whose `bert_config.json` or `vocab.txt` is another model's; writes nothing.

    A directory without them (a new run) passes. A job calls it before it writes its model files, so a
    refused run leaves the directory's files describing the checkpoint that is there.
    """
    config_path = os.path.join(output_dir, CONFIG_NAME)
    if os.path.exists(config_path):
        try:
            existing = BertConfig.from_json_file(config_path)
        except ValueError as e:
            raise JobArgumentError(f"--output_dir: {config_path}: {e}") from None
        if existing != config:
            raise JobArgumentError(
                f"--output_dir={output_dir} holds a run of another model ({config_path} differs from the "
                "requested config); use another --output_dir, or the same config to resume."
            )
    vocab_path = os.path.join(output_dir, VOCAB_NAME)
    if (
        vocab_file
        and os.path.exists(vocab_path)
        and os.path.abspath(vocab_file) != os.path.abspath(vocab_path)
        and not _same_bytes(vocab_file, vocab_path)
    ):
        raise JobArgumentError(
            f"--vocab_file={vocab_file} differs from {vocab_path} of the run in --output_dir; use another "
            "--output_dir, or the same vocabulary to resume."
        )


def _same_bytes(path_a: str, path_b: str) -> bool:
    with open(path_a, "rb") as a, open(path_b, "rb") as b:
        return a.read() == b.read()


def read_task_config(model_dir: str) -> dict | None:
    """The `task_config.json` of a fine-tuned model directory (None: there is none).

    It records the task (`task`, `label_list`, `max_seq_length`, ...), `do_lower_case` and, under `data`,
    the columns and format of the training files, so a later evaluation, prediction or export needs only the
    directory (and its data files). An unreadable one is a `JobArgumentError` naming the file.
    """
    import json

    path = os.path.join(model_dir, TASK_CONFIG_NAME)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise JobArgumentError(f"{path}: unreadable task config ({e}).") from None
