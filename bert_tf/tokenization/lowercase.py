"""In-graph lower-casing with Python `str.lower` semantics.

`tf.strings.lower(encoding="utf-8")` applies ICU's full lower-case mapping,
which agrees with Python on U+0130 'İ' -> 'i̇' but follows an older Unicode
version than Python 3.11 (Unicode 14):

* a few dozen recently encoded capitals are left unchanged. They are found
  once per process by comparing both on every character, and mapped to
  Python's lower case before ICU runs (ICU leaves those forms alone);
* Greek capital sigma lower-cases to final 'ς' or 'σ' depending on the
  cased / case-ignorable characters around it, and ICU does not know the
  newer case-ignorable marks. Sigma is therefore decided before ICU runs,
  with a regex over character classes read off Python's own `str.lower`.

The result equals `str.lower` of the running Python on every code point the
tokenizer does not delete beforehand (checked by the tests on all of them).
"""

import functools

import numpy as np
import tensorflow as tf

from bert_tf.tokenization import char_classes


@functools.cache
def lowercase_fixups():
    """Returns (code points, replacements) where ICU and Python disagree.

    Both are sorted int32 numpy arrays; only single-character mappings occur
    (checked). Characters the tokenizer deletes before lower-casing are not
    considered.
    """
    # CJK ideographs have no case; skipping them keeps the probe cheap.
    candidates = [chr(cp) for cp in char_classes.kept_code_points(include_cjk=False)]
    # init_scope: eager even if the first tokenizer is built while tracing.
    with tf.init_scope(), tf.device("/cpu:0"):
        icu = tf.strings.lower(tf.constant(candidates), encoding="utf-8").numpy()
    keys, values = [], []
    for char, lowered in zip(candidates, icu):
        expected = char.lower()
        if lowered.decode("utf-8") == expected:
            continue
        if len(expected) != 1:
            raise NotImplementedError(
                f"ICU and Python lower-case U+{ord(char):04X} differently and "
                f"Python maps it to several characters ({expected!r})"
            )
        keys.append(ord(char))
        values.append(ord(expected))
    if keys:
        # The fix is applied before ICU lower-cases, so ICU must leave the
        # replacements alone.
        with tf.init_scope(), tf.device("/cpu:0"):
            check = tf.strings.lower(tf.constant([chr(v) for v in values]), encoding="utf-8").numpy()
        unstable = [chr(v) for v, c in zip(values, check) if c.decode("utf-8") != chr(v)]
        if unstable:
            raise NotImplementedError(f"ICU changes the lower-case forms {unstable!r}")
    return np.asarray(keys, np.int32), np.asarray(values, np.int32)


_CAPITAL_SIGMA = "\u03a3"


@functools.cache
def sigma_context_classes():
    """(leading, ignorable): the code points that decide whether a capital sigma is final.

    Python's rule: skipping case-ignorable characters, the nearest character
    before the sigma is cased and the nearest one after it is not cased (or
    there is none). Read off `str.lower` on every kept code point:
      c + "Σ"       ends in "ς"  <=> c is cased and not case-ignorable (leading);
      "A" + c + "Σ" ends in "ς"  <=> c is cased or case-ignorable.
    Characters in neither list end the context. Sorted int lists.
    """
    leading, ignorable = [], []
    for cp in char_classes.kept_code_points():
        char = chr(cp)
        if (char + _CAPITAL_SIGMA).lower()[-1] == "ς":
            leading.append(cp)
        elif ("A" + char + _CAPITAL_SIGMA).lower()[-1] == "ς":
            ignorable.append(cp)
    return leading, ignorable


@functools.cache
def final_sigma_pattern():
    """RE2 pattern matching a capital sigma Python lower-cases to final 'ς'.

    Groups 1, 2, 3, 4 are the context around the sigma (`sigma_context_classes`).
    """
    leading, ignorable = sigma_context_classes()
    lead = char_classes.code_point_class(leading)
    ign = char_classes.code_point_class(ignorable)
    # Deleted characters never reach lower-casing, so "neither" may be the
    # plain complement.
    oth = char_classes.code_point_class(leading + ignorable, negate=True)
    return f"({lead})({ign}*){_CAPITAL_SIGMA}({ign}*)($|{oth})"


def lower(strings):
    """Lower-cases a 1-D tf.string tensor of valid UTF-8 without NUL bytes.

    (ICU stops at a NUL byte; the tokenizer deletes NUL before this step.)
    """
    keys, values = lowercase_fixups()
    special = char_classes.code_point_class([ord(_CAPITAL_SIGMA)] + keys.tolist())
    # Only the (rare) strings with a sigma or a fixed-up capital take the
    # slow path.
    where = tf.where(tf.strings.regex_full_match(strings, f"(?s).*{special}.*"))
    rare = tf.gather_nd(strings, where)
    if len(keys):
        code_points = tf.strings.unicode_decode(rare, "UTF-8")
        flat = code_points.flat_values
        keys_t = tf.constant(keys)
        position = tf.minimum(tf.searchsorted(keys_t, flat), len(keys) - 1)
        hit = tf.equal(tf.gather(keys_t, position), flat)
        flat = tf.where(hit, tf.gather(tf.constant(values), position), flat)
        rare = tf.strings.unicode_encode(code_points.with_flat_values(flat), "UTF-8")
    rare = tf.strings.regex_replace(rare, final_sigma_pattern(), "\\1\\2ς\\3\\4")
    rare = tf.strings.regex_replace(rare, _CAPITAL_SIGMA, "σ")
    strings = tf.tensor_scatter_nd_update(strings, where, rare)
    return tf.strings.lower(strings, encoding="utf-8")
