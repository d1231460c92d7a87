"""Collocations learned from a corpus, the phrases of ERNIE-style phrase masking (`--masking=phrase`).

Mikolov et al.'s word2phrase, with pointwise mutual information as the score:
adjacent words `a b` inside one line form a phrase when the pair occurs at
least `min_count` times and `PMI(a, b) = log2(N * count(a b) / (count(a) * count(b)))`
(N: words in the corpus) is at least `min_pmi` bits. A second pass joins the
phrases found and scores pairs of a phrase and a word the same way, which gives
phrases of three words. Punctuation never belongs to a phrase. Words are the
basic tokenizer's (`BertTokenizer`'s splitting and lower-casing), so the
phrases match the corpus's WordPieces whole.

    >>> lines = [["new", "york", "is", "big"], ["i", "saw", "new", "york"], ["new", "york", "times"]]
    >>> [p for p, _, _ in learn_phrases(lines, min_count=2, min_pmi=1.0)]
    [('new', 'york')]
"""

import collections
import math

PHRASE_SEPARATOR = " "


def _is_word(word: str) -> bool:
    return any(c.isalnum() for c in word)


def _count(lines):
    units, pairs = collections.Counter(), collections.Counter()
    for line in lines:
        units.update(line)
        pairs.update((a, b) for a, b in zip(line, line[1:]) if _is_word(a[-1]) and _is_word(b[0]))
    return units, pairs


def _score(units, pairs, num_words, min_count, min_pmi, max_words):
    """{pair: (count, pmi)} of the pairs that pass both thresholds and stay within `max_words`."""
    found = {}
    for (a, b), count in pairs.items():
        if count < min_count or len(a) + len(b) > max_words:
            continue
        pmi = math.log2(num_words * count / (units[a] * units[b]))
        if pmi >= min_pmi:
            found[(a, b)] = (count, pmi)
    return found


def _join(line, found):
    """Joins found pairs left to right (each unit joins at most once a pass)."""
    joined, i = [], 0
    while i < len(line):
        if i + 1 < len(line) and (line[i], line[i + 1]) in found:
            joined.append(line[i] + line[i + 1])
            i += 2
        else:
            joined.append(line[i])
            i += 1
    return joined


def learn_phrases(lines, min_count: int = 5, min_pmi: float = 8.0, max_words: int = 3):
    """Collocations of 2..`max_words` words (at most 3: two passes).

    Args:
        lines: a re-iterable of lists of words (one list per line; phrases never cross lines).
        min_count: the fewest occurrences of a phrase.
        min_pmi: the lowest PMI in bits of its two parts.
        max_words: 2 for pairs only, 3 for triples too.

    Returns:
        [(words tuple, count, pmi)], most frequent first (then by PMI, then alphabetically).
    """
    if not 2 <= max_words <= 3:
        raise ValueError(f"max_words={max_words} must be 2 or 3")
    lines = [tuple((w,) for w in line) for line in lines]
    num_words = sum(len(line) for line in lines)
    phrases = {}
    for _ in range(max_words - 1):
        units, pairs = _count(lines)
        found = _score(units, pairs, num_words, min_count, min_pmi, max_words)
        if not found:
            break
        for (a, b), (count, pmi) in found.items():
            phrases[a + b] = (count, pmi)
        lines = [_join(line, found) for line in lines]
    return sorted(((p, c, s) for p, (c, s) in phrases.items()), key=lambda x: (-x[1], -x[2], x[0]))


def write_phrases(phrases, path: str) -> None:
    """One phrase a line, its words separated by spaces: the format `--phrase_file` reads."""
    with open(path, "w", encoding="utf-8") as f:
        for words, _, _ in phrases:
            f.write(PHRASE_SEPARATOR.join(words) + "\n")


def corpus_lines(input_files, do_lower_case: bool = True, max_lines: int = 0, batch_size: int = 1024):
    """The basic tokenizer's words of each non-blank line of `input_files` (TensorFlow).

    Raises:
        tf.errors.OpError: a line is not UTF-8 (the caller names it).
    """
    import tensorflow as tf

    from bert_tf.tokenization.basic_tokenizer import BasicTokenizer

    tokenizer = BasicTokenizer(lower_case=do_lower_case)
    lines = tf.data.TextLineDataset(list(input_files))
    if max_lines:
        lines = lines.take(max_lines)
    lines = lines.map(lambda line: tf.strings.unicode_transcode(line, "UTF-8", "UTF-8", errors="strict"))
    batches = lines.batch(batch_size).map(lambda texts: _flat(tokenizer(texts)))
    words = []
    for flat, lengths in batches.as_numpy_iterator():
        flat = [w.decode("utf-8") for w in flat.tolist()]
        start = 0
        for length in lengths.tolist():
            if length:
                words.append(flat[start : start + length])
            start += length
    return words


def _flat(ragged):
    return ragged.flat_values, ragged.row_lengths()
