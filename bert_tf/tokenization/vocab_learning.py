"""Learning a WordPiece vocabulary from text.

Words are counted after this package's own `BasicTokenizer`, so the learned
pieces are exactly the ones `BertTokenizer` will look for (tensorflow_text's
`bert_vocab_from_dataset` splits with its NFKC-folding BertTokenizer, whose
words differ). The piece selection is tensorflow_text's WordPiece learner.
"""

import collections
import os

import tensorflow as tf
from absl import logging
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from bert_tf import prefetching, progress
from bert_tf.errors import BadInputError
from bert_tf.tokenization import vocab as vocab_lib
from bert_tf.tokenization.basic_tokenizer import BasicTokenizer


def count_words(texts, lower_case=True, batch_size=1024):
    """Counts basic-tokenizer words.

    Args:
      texts: a `tf.data.Dataset` of scalar tf.string elements, or an iterable
        of Python strings.
      lower_case: as for `BertTokenizer`.
      batch_size: strings tokenized per graph call.

    Returns:
      collections.Counter word (str) -> count.
    """
    if not isinstance(texts, tf.data.Dataset):
        strings = texts
        texts = tf.data.Dataset.from_generator(lambda: iter(strings), output_signature=tf.TensorSpec([], tf.string))
    tokenizer = BasicTokenizer(lower_case=lower_case)
    words = prefetching.prefetched(
        texts.batch(batch_size).map(
            lambda t: tokenizer(t).flat_values, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
        )
    )
    counts = collections.Counter()
    tracker = progress.Progress("Counting words", unit=f"batches of {batch_size} lines")
    for batch in words.as_numpy_iterator():
        counts.update(batch.tolist())
        tracker.advance()
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})


def learn_vocab(
    word_counts,
    vocab_size,
    reserved_tokens=vocab_lib.SPECIAL_TOKENS,
    min_count=10,
    max_unique_chars=1000,
    max_word_length=50,
    num_iterations=4,
    max_input_words=5_000_000,
    slack_ratio=0.05,
):
    """Learns a WordPiece vocabulary of at most `vocab_size` tokens.

    Args:
      word_counts: mapping word -> count (see `count_words`).
      vocab_size: maximum size, reserved tokens included.
      reserved_tokens: tokens placed first, in order ([PAD] first gives it id 0).
      min_count: lowest piece frequency the threshold search may go down to.
      max_unique_chars: alphabet size; words with rarer characters are ignored.
      max_word_length: longer words are ignored.
      num_iterations: refinement passes of the learner.
      max_input_words: only the most frequent words are used.
      slack_ratio: accepted shortfall from `vocab_size`.

    Returns:
      list of tokens: reserved tokens, single characters and their "##"
      forms, then learned pieces by decreasing frequency.
    """
    reserved_tokens = list(reserved_tokens)
    if vocab_size <= len(reserved_tokens):
        raise ValueError(f"vocab_size={vocab_size} leaves no room after the {len(reserved_tokens)} reserved tokens")
    if not word_counts:
        raise ValueError("No words to learn a vocabulary from (empty input)")
    params = learner.Params(
        upper_thresh=int(1e7),
        lower_thresh=min_count,
        num_iterations=num_iterations,
        max_input_tokens=max_input_words,
        max_token_length=max_word_length,
        max_unique_chars=max_unique_chars,
        vocab_size=vocab_size,
        slack_ratio=slack_ratio,
        include_joiner_token=True,
        joiner=vocab_lib.SUFFIX_INDICATOR,
        reserved_tokens=reserved_tokens,
    )
    tokens = _learn_pieces(dict(word_counts), params)
    tokens = _with_whole_alphabet(list(tokens), word_counts, reserved_tokens, max_word_length, max_unique_chars)
    if len(tokens) <= vocab_size:
        return tokens

    # The learner can overshoot when its threshold search ends early. Every
    # character and its "##" form must stay (without them words become
    # [UNK]); drop the least frequent longer pieces, which come last.
    def is_char_level(token):
        body = token[len(vocab_lib.SUFFIX_INDICATOR) :] if token.startswith(vocab_lib.SUFFIX_INDICATOR) else token
        return len(body) == 1

    required = [t for t in tokens if t in reserved_tokens or is_char_level(t)]
    if len(required) > vocab_size:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for the {len(required)} reserved and "
            "single-character tokens; raise it or lower max_unique_chars"
        )
    required_set = set(required)
    optional = [t for t in tokens if t not in required_set]
    keep = required_set | set(optional[: vocab_size - len(required)])
    return [t for t in tokens if t in keep]


def _learn_pieces(word_counts: dict, params) -> list:
    """tensorflow_text's `learner.learn`, whose threshold search is run here to report its progress.

    The same steps and vocabulary: the input words are filtered as `learn` does, then each step of the binary
    search for the piece-count threshold learns a vocabulary (`learn_with_thresh`, the slow part) and halves
    the range, until a vocabulary is within `slack_ratio` of `vocab_size` or the range is empty.
    """
    items = list(word_counts.items())
    upper, lower = learner.get_search_threshs(items, params.upper_thresh, params.lower_thresh)
    all_counts = learner.get_input_words(items, params.reserved_tokens, params.max_token_length)
    allowed_chars = learner.get_allowed_chars(all_counts, params.max_unique_chars)
    filtered = learner.filter_input_words(all_counts, allowed_chars, params.max_input_tokens)
    # A binary search over [lower, upper] takes at most floor(log2(size)) + 1 steps.
    most_steps = max(upper - lower + 1, 1).bit_length()
    tracker = progress.Progress(
        f"Learning WordPiece pieces from {len(filtered)} words", total=most_steps, unit="threshold search steps"
    )
    slack = max(params.slack_ratio * params.vocab_size, 0)
    while True:
        thresh = (upper + lower) // 2
        vocab = learner.learn_with_thresh(filtered, thresh, params)
        tracker.advance()
        size = len(vocab)
        if (size <= params.vocab_size and params.vocab_size - size <= slack) or lower >= upper or thresh <= 1:
            tracker.finish()
            return vocab
        if size > params.vocab_size:
            lower = thresh + 1
        else:
            upper = thresh - 1


def _with_whole_alphabet(tokens, word_counts, reserved_tokens, max_word_length, max_unique_chars):
    """Adds the single characters (and "##" forms) the learner left out.

    The learner takes its characters from the `max_input_words` words it learns
    from; characters that occur only in rarer words must still be tokens, or
    those words become [UNK].
    """
    alphabet = learner.get_allowed_chars(
        [(w, c) for w, c in word_counts.items() if len(w) <= max_word_length], max_unique_chars
    )
    present = set(tokens)
    missing = []
    for char in sorted(alphabet):
        for token in (char, vocab_lib.SUFFIX_INDICATOR + char):
            if token not in present:
                missing.append(token)
    if not missing:
        return tokens
    # The learner lists the reserved tokens first; the characters go right after them.
    return tokens[: len(reserved_tokens)] + missing + tokens[len(reserved_tokens) :]


def _first_invalid_utf8_line(input_files):
    """(file, line number) of the first line that is not UTF-8, or None.

    Only called after counting failed, so a good corpus is read once.
    """
    for path in input_files:
        with open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return path, number
    return None


def make_vocab(
    input_files,
    output_file,
    vocab_size,
    *,
    do_lower_case=True,
    num_unused=0,
    min_count=10,
    max_unique_chars=1000,
    max_word_length=50,
    num_iterations=4,
    max_input_words=5_000_000,
    max_lines=0,
):
    """Learns a vocabulary from the text files `input_files` (one text per line) and writes it to `output_file`.

    The file starts with the special tokens, then `num_unused` placeholders
    [unused0].., then single characters, then the learned pieces (the program
    `bert_tf_make_vocab` documents each argument as a flag).

    Returns:
      The list of tokens written.

    Raises:
      BadInputError: naming the flag or the file (and line, for bad UTF-8).
    """
    reserved = list(vocab_lib.SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(num_unused)]
    if vocab_size <= len(reserved):
        raise BadInputError(
            f"--vocab_size={vocab_size} leaves no room after the {len(reserved)} reserved "
            "tokens (special tokens and --num_unused)"
        )
    for path in input_files:
        if not os.path.isfile(path):
            raise BadInputError(f"--input_file: {path!r} is not a file")
    if output_file and os.path.isdir(output_file):
        raise BadInputError(f"--output_file={output_file} is a directory")
    lines = tf.data.TextLineDataset(input_files)
    if max_lines:
        lines = lines.take(max_lines)
    # The tokenizer would quietly replace bytes that are not UTF-8; fail instead, then find the line.
    lines = lines.map(
        lambda line: tf.strings.unicode_transcode(line, "UTF-8", "UTF-8", errors="strict"),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    try:
        counts = count_words(lines, lower_case=do_lower_case)
    except (tf.errors.OpError, UnicodeDecodeError) as e:
        bad_line = _first_invalid_utf8_line(input_files)
        if bad_line:
            raise BadInputError(f"{bad_line[0]}:{bad_line[1]}: not valid UTF-8") from None
        message = e.message if isinstance(e, tf.errors.OpError) else e
        raise BadInputError(f"--input_file: cannot read {', '.join(input_files)}: {message}") from None
    logging.info("%d distinct words, %d in all", len(counts), sum(counts.values()))
    if not counts:
        raise BadInputError(f"--input_file: no words in {', '.join(input_files)}")
    try:
        tokens = learn_vocab(
            counts,
            vocab_size,
            reserved_tokens=reserved,
            min_count=min_count,
            max_unique_chars=max_unique_chars,
            max_word_length=max_word_length,
            num_iterations=num_iterations,
            max_input_words=max_input_words,
        )
    except ValueError as e:
        # The alphabet of the corpus does not fit: only the flags can fix it.
        raise BadInputError(f"--vocab_size={vocab_size}: {e}") from None
    vocab_lib.write_vocab(tokens, output_file)
    logging.info("Wrote %d tokens to %s", len(tokens), output_file)
    if len(tokens) < vocab_size:
        # The learner's threshold search stops at min_count: a small corpus runs out of frequent pieces.
        logging.warning(
            "%d tokens, fewer than --vocab_size=%d: the corpus has no more pieces seen at least --min_count=%d "
            "times (the learner's lowest threshold); lower --min_count or give more text for more pieces.",
            len(tokens),
            vocab_size,
            min_count,
        )
    return tokens
