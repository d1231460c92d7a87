"""Learning a WordPiece vocabulary from text.

Words are counted after this package's own `BasicTokenizer`, so the learned
pieces are exactly the ones `BertTokenizer` will look for (tensorflow_text's
`bert_vocab_from_dataset` splits with its NFKC-folding BertTokenizer, whose
words differ). The piece selection is tensorflow_text's WordPiece learner.
"""

import collections

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

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
    words = (
        texts.batch(batch_size)
        .map(lambda t: tokenizer(t).flat_values, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    counts = collections.Counter()
    for batch in words.as_numpy_iterator():
        counts.update(batch.tolist())
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
    tokens = learner.learn(
        dict(word_counts),
        vocab_size,
        reserved_tokens,
        upper_thresh=int(1e7),
        lower_thresh=min_count,
        num_iterations=num_iterations,
        max_input_tokens=max_input_words,
        max_token_length=max_word_length,
        max_unique_chars=max_unique_chars,
        slack_ratio=slack_ratio,
        include_joiner_token=True,
        joiner=vocab_lib.SUFFIX_INDICATOR,
    )
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
