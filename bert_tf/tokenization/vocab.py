"""WordPiece vocabulary files: reading, validating, writing, special tokens.

A vocabulary file has one token per line; a token's id is its 0-based line
number. Special tokens are found by name, never assumed at fixed ids.
"""

import os

from bert_tf import file_io

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"

# The order `make_vocab` writes them in, so [PAD] gets id 0.
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

# Prefix of WordPiece continuation pieces ("##ing").
SUFFIX_INDICATOR = "##"


def load_vocab(vocab_file):
    """Reads a vocabulary file into a list of tokens (index = id).

    Lines are split on "\\n" only and the trailing newline of the file is not
    a token; every other line is one, a blank line included (the empty token,
    which no text produces). So a token's id is its line number and the
    vocabulary size is the number of lines, as the original BERT code,
    HuggingFace and TensorFlow's text-file lookup tables read vocabularies.
    This is the package's one vocabulary reader: size every vocabulary with it.

    Raises:
      FileNotFoundError: if `vocab_file` does not exist.
      ValueError: if the file is empty, not UTF-8, has Windows line endings
        or repeats a token (the ids of the repeated token would be ambiguous).
    """
    vocab_file = os.fspath(vocab_file)
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"Vocabulary file not found: {vocab_file!r}")
    with open(vocab_file, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"Vocabulary file {vocab_file!r} is not valid UTF-8 (byte {e.start})") from e
    if not text:
        raise ValueError(f"Vocabulary file {vocab_file!r} is empty")
    if "\r" in text:
        line = text[: text.index("\r")].count("\n") + 1
        raise ValueError(
            f"Vocabulary file {vocab_file!r} contains a carriage return on line {line}; "
            "vocabulary files must use '\\n' line endings"
        )
    tokens = text.split("\n")
    if tokens[-1] == "":
        tokens.pop()
    seen = {}
    for index, token in enumerate(tokens):
        if token in seen:
            raise ValueError(
                f"Vocabulary file {vocab_file!r} repeats token {token!r} on lines {seen[token] + 1} and {index + 1}"
            )
        seen[token] = index
    return tokens


def special_token_ids(vocab, vocab_file="<vocab>", required=SPECIAL_TOKENS):
    """Looks the special tokens up in `vocab` by name.

    Args:
      vocab: list of tokens, as returned by `load_vocab`.
      vocab_file: file name used in error messages.
      required: tokens that must be present.

    Returns:
      dict token -> id for every token of `SPECIAL_TOKENS` in the vocab.

    Raises:
      ValueError: naming the file and the missing tokens.
    """
    index = {token: i for i, token in enumerate(vocab)}
    missing = [t for t in required if t not in index]
    if missing:
        raise ValueError(
            f"Vocabulary file {vocab_file!r} lacks the special token(s) "
            f"{', '.join(missing)}; BERT needs {', '.join(required)}"
        )
    return {t: index[t] for t in SPECIAL_TOKENS if t in index}


def continuation_mask(vocab):
    """Returns a list of bools, True where the token is a `##` continuation piece.

    Whole-word masking uses it to group a word's pieces.
    """
    return [t.startswith(SUFFIX_INDICATOR) and len(t) > len(SUFFIX_INDICATOR) for t in vocab]


def write_vocab(tokens, vocab_file):
    """Writes `tokens` one per line, atomically (temp file + rename)."""
    tokens = list(tokens)
    for i, token in enumerate(tokens):
        if "\n" in token or "\r" in token:
            raise ValueError(f"Token {i} ({token!r}) contains a line break")
    if len(set(tokens)) != len(tokens):
        raise ValueError("Vocabulary has repeated tokens")
    file_io.write_text(os.fspath(vocab_file), "".join(t + "\n" for t in tokens))


def load_vocab_for_flag(vocab_file, flag: str) -> list:
    """`load_vocab`, with every error a `BadInputError` naming the flag, the file and (for bad UTF-8) the line."""
    from bert_tf.errors import BadInputError

    try:
        return load_vocab(vocab_file)
    except FileNotFoundError as e:
        raise BadInputError(f"--{flag}: {e}") from None
    except ValueError as e:
        cause = e.__cause__
        if isinstance(cause, UnicodeDecodeError):
            line = cause.object[: cause.start].count(b"\n") + 1
            raise BadInputError(f"--{flag}: {vocab_file}:{line}: not valid UTF-8 (byte {cause.start})") from None
        raise BadInputError(f"--{flag}: {e}") from None
