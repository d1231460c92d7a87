"""Character classes of BERT's basic tokenizer, as RE2 regex classes.

The original tokenizer decides per character with Python's `unicodedata`
(categories) and `str.split` (whitespace). RE2's own `\\p{..}` tables follow
another Unicode version and lack `Cn` (unassigned), so the classes here are
enumerated from the running Python's `unicodedata` once per process and
written out as explicit code-point ranges. A tokenizer therefore matches the
reference implementation run under the same Python; the classes are baked
into a traced graph, so an exported SavedModel keeps them.
"""

import functools
import unicodedata

import numpy as np

# The ranges the original `_is_chinese_char` treats as CJK ideographs.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

_NUM_CODE_POINTS = 0x110000
_SURROGATES = (0xD800, 0xE000)


def is_cjk(char):
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def is_removed(char):
    """True for characters the cleaning step deletes.

    NUL, U+FFFD and every category-C character (Cc, Cf, Cn, Co, Cs) except
    tab, newline and carriage return, as HuggingFace's BertTokenizer does.
    (google-research/bert deletes only Cc and Cf.)
    """
    if char in "\t\n\r":
        return False
    return char in "\x00\ufffd" or unicodedata.category(char).startswith("C")


def is_nonspacing_mark(char):
    """Category Mn: what accent stripping deletes after NFD."""
    return unicodedata.category(char) == "Mn"


_CATEGORIES = (
    "Cc",
    "Cf",
    "Cn",
    "Co",
    "Cs",
    "Ll",
    "Lm",
    "Lo",
    "Lt",
    "Lu",
    "Mc",
    "Me",
    "Mn",
    "Nd",
    "Nl",
    "No",
    "Pc",
    "Pd",
    "Pe",
    "Pf",
    "Pi",
    "Po",
    "Ps",
    "Sc",
    "Sk",
    "Sm",
    "So",
    "Zl",
    "Zp",
    "Zs",
)


@functools.cache
def _masks():
    index = {name: i for i, name in enumerate(_CATEGORIES)}
    category = unicodedata.category
    codes = np.asarray(list(map(index.__getitem__, map(category, map(chr, range(_NUM_CODE_POINTS))))), dtype=np.int8)
    names = np.asarray(_CATEGORIES)
    cats = names[codes]
    major = names.astype("<U1")[codes]
    cps = np.arange(_NUM_CODE_POINTS)
    surrogate = (cps >= _SURROGATES[0]) & (cps < _SURROGATES[1])
    controls_kept = np.isin(cps, [9, 10, 13])
    removed = ((major == "C") & ~controls_kept) | np.isin(cps, [0, 0xFFFD])
    # str.isspace() is true for only a few dozen code points, all below U+3001.
    space = np.zeros(_NUM_CODE_POINTS, bool)
    space[:0x3001] = [chr(cp).isspace() for cp in range(0x3001)]
    # What the tokenizer splits words on: the original maps tab/newline/CR and category Zs to a space, then
    # splits with `str.split()`, which also breaks on the few other characters Python considers space
    # (U+2028, U+2029) that survive cleaning.
    whitespace = np.isin(cps, [32, 9, 10, 13]) | (cats == "Zs") | (space & ~removed)
    # Punctuation: ASCII non-alphanumeric symbols plus Unicode category P*.
    ascii_punct = (
        ((cps >= 33) & (cps <= 47))
        | ((cps >= 58) & (cps <= 64))
        | ((cps >= 91) & (cps <= 96))
        | ((cps >= 123) & (cps <= 126))
    )
    masks = {
        "removed": removed,
        "whitespace": whitespace,
        "whitespace_non_ascii": whitespace & (cps > 127),
        "punctuation": ascii_punct | (major == "P"),
        "nonspacing_mark": cats == "Mn",
    }
    return {name: mask & ~surrogate for name, mask in masks.items()}


def kept_code_points(include_cjk=True):
    """Code points that survive cleaning (not removed, not surrogates), as ints."""
    cps = np.arange(_NUM_CODE_POINTS)
    keep = ~_masks()["removed"] & ~((cps >= _SURROGATES[0]) & (cps < _SURROGATES[1]))
    if not include_cjk:
        for lo, hi in CJK_RANGES:
            keep[lo : hi + 1] = False
    return cps[keep].tolist()


def code_point_class(code_points, negate=False):
    """RE2 class of the given code points (any order)."""
    mask = np.zeros(_NUM_CODE_POINTS, bool)
    mask[np.asarray(list(code_points), dtype=np.int64)] = True
    return _regex_class(_mask_ranges(mask), negate)


def _mask_ranges(mask):
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return list(zip(starts.tolist(), ends.tolist()))


def _regex_class(ranges, negate=False):
    parts = []
    for lo, hi in ranges:
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return ("[^" if negate else "[") + "".join(parts) + "]"


@functools.cache
def char_class(name):
    """Returns the RE2 character class for `name`.

    Names: "removed", "whitespace", "whitespace_non_ascii", "punctuation",
    "cjk", "nonspacing_mark".
    """
    if name == "cjk":
        return _regex_class(CJK_RANGES)
    masks = _masks()
    if name not in masks:
        raise KeyError(f"Unknown character class {name!r}")
    return _regex_class(_mask_ranges(masks[name]))
