"""Readers of fine-tuning data: local TSV/CSV/JSONL, CoNLL columns, SQuAD JSON, and TFDS.

Every reader returns a list of examples (`bert_tf.data.examples`) and
raises `DataError` naming the file and line (or record) of bad input: a
missing column, a short row, an invalid JSON line, a SQuAD record without its
`question`. TFDS datasets are read with `download=False` from a given
`data_dir`, never fetched.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from collections.abc import Sequence

from absl import logging

from bert_tf.data.examples import SquadAnswer, SquadExample, TaggingExample, TextExample
from bert_tf.errors import DataError

Column = str | int | None

TEXT_FORMATS = ("tsv", "csv", "jsonl")


# --- sentence (pair) classification and regression files --------------------


def infer_text_format(path: str, file_format: str | None = None) -> str:
    if file_format:
        if file_format not in TEXT_FORMATS:
            raise DataError(f"Unknown file format {file_format!r} for {path}; expected one of {TEXT_FORMATS}.")
        return file_format
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    extension = {"txt": "tsv", "json": "jsonl", "ndjson": "jsonl"}.get(extension, extension)
    if extension not in TEXT_FORMATS:
        raise DataError(
            f"Cannot tell the format of {path} from its extension; name it .tsv, .csv or .jsonl "
            "or give the format explicitly."
        )
    return extension


def _open_text(path: str):
    try:
        # utf-8-sig: a byte-order mark (as spreadsheet exports write) is not part of the first header.
        return open(path, encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise DataError(f"Data file not found: {path}") from None
    except IsADirectoryError:
        raise DataError(f"Expected a data file, got a directory: {path}") from None


def _rows(path: str, file_format: str):
    """Yields (line_number, row) where row is a list (TSV/CSV) or a dict (JSONL)."""
    with _open_text(path) as f:
        try:
            if file_format == "jsonl":
                for line_number, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise DataError(f"{path}:{line_number}: not a valid JSON line ({e.msg}).") from None
                    if not isinstance(record, dict):
                        raise DataError(f"{path}:{line_number}: expected a JSON object, got {type(record).__name__}.")
                    yield line_number, record
            else:
                # GLUE's TSVs contain unbalanced quotes; TSV is read without quoting.
                reader = (
                    csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if file_format == "tsv" else csv.reader(f)
                )
                for row in reader:
                    if not any(cell.strip() for cell in row):
                        continue
                    yield reader.line_num, row
        except UnicodeDecodeError as e:
            raise DataError(f"{path}: not UTF-8 text ({e}).") from None
        except csv.Error as e:
            raise DataError(f"{path}: malformed {file_format.upper()} ({e}).") from None


def _column_index(path, column, header, role):
    """Resolves a column name (needs a header) or 0-based index to an index."""
    if isinstance(column, int) or (isinstance(column, str) and column.lstrip("-").isdigit()):
        return int(column)
    if header is None:
        raise DataError(
            f"{path}: {role} column {column!r} is a name but the file has no header; "
            "give a 0-based column index instead."
        )
    if column not in header:
        raise DataError(f"{path}: no {role} column {column!r}; the header has {header}.")
    return header.index(column)


def read_text_examples(
    path: str,
    text_a_column: Column,
    text_b_column: Column = None,
    label_column: Column = None,
    file_format: str | None = None,
    has_header: bool = True,
    regression: bool = False,
    require_labels: bool = True,
) -> list[TextExample]:
    """Reads sentence (pair) examples from a TSV, CSV or JSONL file.

    Args:
      path: the file; its format comes from the extension unless `file_format`
        ("tsv", "csv" or "jsonl") is given.
      text_a_column, text_b_column, label_column: header names or 0-based
        indices (TSV/CSV), keys (JSONL). `text_b_column` None for single
        sentences; `label_column` None for unlabelled data.
      has_header: whether the first TSV/CSV row names the columns.
      regression: parse labels as floats.
      require_labels: if False, a file without the label column is read as
        unlabelled (for prediction) instead of raising.

    Returns:
      `TextExample`s with `guid` "path:line".
    """
    file_format = infer_text_format(path, file_format)
    name = os.path.basename(path)
    examples = []
    header = None
    indices = None
    labelled = label_column is not None
    for line_number, row in _rows(path, file_format):
        if file_format == "jsonl":
            values = {}
            for role, column in (("text_a", text_a_column), ("text_b", text_b_column), ("label", label_column)):
                if column is None or (role == "label" and not labelled):
                    continue
                if column not in row:
                    if role == "label" and not require_labels and not examples:
                        labelled = False
                        continue
                    raise DataError(f"{path}:{line_number}: no {role} key {column!r}; the record has {sorted(row)}.")
                values[role] = row[column]
        else:
            if indices is None:
                if has_header:
                    header = [cell.strip() for cell in row]
                if labelled and not require_labels:
                    # A prediction file may lack the label column: read it as unlabelled.
                    if _is_index(label_column):
                        labelled = -len(row) <= int(label_column) < len(row)
                    else:
                        labelled = header is not None and label_column in header
                indices = {
                    role: _column_index(path, column, header, role)
                    for role, column in (
                        ("text_a", text_a_column),
                        ("text_b", text_b_column),
                        ("label", label_column if labelled else None),
                    )
                    if column is not None
                }
                if has_header:
                    continue
            values = {}
            for role, index in indices.items():
                if not -len(row) <= index < len(row):
                    raise DataError(
                        f"{path}:{line_number}: row has {len(row)} fields, no {role} column "
                        f"{index} (check the delimiter and the column flags)."
                    )
                values[role] = row[index]
        for role in ("text_a", "text_b"):
            if role in values and not isinstance(values[role], str):
                raise DataError(f"{path}:{line_number}: {role} must be a string, got {values[role]!r}.")
        label = values.get("label")
        if label is not None:
            label = _parse_label(path, line_number, label, regression)
        examples.append(
            TextExample(guid=f"{name}:{line_number}", text_a=values["text_a"], text_b=values.get("text_b"), label=label)
        )
    if not examples:
        raise DataError(f"{path}: no examples.")
    return examples


def read_labeled_texts(
    path: str, text_column: Column = "text", label_column: Column = "label", limit: int = 0, file_format: str = "tsv"
) -> tuple[list[str], list[str]]:
    """(texts, labels as written) of a labelled single-text file with a header: the `fit` programs' reader.

    Read as `read_text_examples` reads it for `experiments.finetune`; `limit` > 0 keeps the first `limit`.
    """
    examples = read_text_examples(path, text_column, None, label_column, file_format=file_format)
    examples = examples[:limit] if limit else examples
    return [e.text_a for e in examples], [e.label for e in examples]


def _is_index(column) -> bool:
    return isinstance(column, int) or (isinstance(column, str) and column.lstrip("-").isdigit())


def _parse_label(path, line_number, label, regression):
    if regression:
        try:
            return float(label)
        except (TypeError, ValueError):
            raise DataError(f"{path}:{line_number}: regression label {label!r} is not a number.") from None
    if isinstance(label, bool) or label is None or isinstance(label, (dict, list)):
        raise DataError(f"{path}:{line_number}: label {label!r} is not a class name.")
    return str(label).strip()


def label_list_from_examples(examples: Sequence[TextExample]) -> list[str]:
    """The sorted distinct labels (numeric order when every label is an integer)."""
    return sorted_labels(e.label for e in examples if e.label is not None)


def sorted_labels(labels) -> list[str]:
    """The distinct `labels` sorted (numeric order when every label is an integer)."""
    labels = set(labels)
    if all(label.lstrip("-").isdigit() for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


# --- CoNLL-style tagging files ----------------------------------------------


def count_unseen_labels(labels, known) -> dict:
    """{label: count} of the `labels` that are not in `known`, most frequent first."""
    return dict(Counter(label for label in labels if label not in known).most_common())


def warn_unseen_labels(unseen: dict, items: str, split: str = "evaluation") -> None:
    """Logs, once per data set, the rule for labels that the training data never had (`count_unseen_labels`).

    No model can predict a class it never saw, so evaluation or test data carrying such a label is kept and
    those `items` (examples, words) count as errors; the metrics and reports say how many there were.
    """
    if unseen:
        shown = ", ".join(f"{label!r}: {count}" for label, count in list(unseen.items())[:10])
        logging.warning(
            "%d %s %s carry labels that the training data never had (%s%s); they count as errors.",
            sum(unseen.values()),
            split,
            items,
            shown,
            ", ..." if len(unseen) > 10 else "",
        )


def read_conll(
    path: str,
    word_column: int = 0,
    label_column: int | None = -1,
    delimiter: str | None = None,
    require_labels: bool = True,
) -> list[TaggingExample]:
    """Reads one word per line with its tag in a column; blank lines end sentences.

    `-DOCSTART-` lines are skipped. With `label_column=None` (or
    `require_labels=False` and a one-column file) the sentences are unlabelled.
    `delimiter` None splits on any whitespace.
    """
    name = os.path.basename(path)
    examples = []
    words, labels, start_line = [], [], None
    labelled = label_column is not None

    def finish():
        if words:
            examples.append(
                TaggingExample(
                    guid=f"{name}:{start_line}", words=tuple(words), labels=tuple(labels) if labelled else None
                )
            )
        words.clear()
        labels.clear()

    with _open_text(path) as f:
        try:
            for line_number, line in enumerate(f, start=1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    finish()
                    continue
                fields = line.split(delimiter) if delimiter else line.split()
                if fields[0] == "-DOCSTART-":
                    finish()
                    continue
                if labelled and len(fields) == 1 and not require_labels and not examples and not words:
                    labelled = False
                if not words:
                    start_line = line_number
                needed = [word_column] + ([label_column] if labelled else [])
                for index in needed:
                    if not -len(fields) <= index < len(fields):
                        raise DataError(
                            f"{path}:{line_number}: line has {len(fields)} column(s), no column "
                            f"{index} (expected word and tag columns)."
                        )
                if labelled and len(fields) < 2:
                    raise DataError(f"{path}:{line_number}: line has no tag column.")
                words.append(fields[word_column])
                if labelled:
                    labels.append(fields[label_column])
        except UnicodeDecodeError as e:
            raise DataError(f"{path}: not UTF-8 text ({e}).") from None
    finish()
    if not examples:
        raise DataError(f"{path}: no sentences.")
    return examples


def tag_list_from_examples(examples: Sequence[TaggingExample]) -> list[str]:
    """ "O" first, then the other tags sorted by entity type and prefix."""
    tags = {t for e in examples for t in (e.labels or ())}
    rest = sorted(tags - {"O"}, key=lambda t: (t[2:] if t[1:2] == "-" else t, t))
    return (["O"] if "O" in tags else []) + rest


# --- SQuAD JSON ---------------------------------------------------------------


def read_squad(path: str, training: bool = False, version_2_with_negative: bool = False) -> list[SquadExample]:
    """Reads a SQuAD v1.1/v2.0 JSON file.

    For training, examples whose answer text does not appear at its
    `answer_start` are skipped with a warning (a few exist in SQuAD itself),
    and each question must have an answer unless it `is_impossible` (v2.0).
    Structural errors raise naming the record.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise DataError(f"SQuAD file not found: {path}") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e}).") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{path}: expected a SQuAD JSON object with a 'data' list.")

    examples, skipped = [], 0
    for article_index, article in enumerate(data["data"]):
        where = f"{path}: data[{article_index}]"
        paragraphs = _field(article, "paragraphs", list, where)
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"{path}: data[{article_index}].paragraphs[{paragraph_index}]"
            context = _field(paragraph, "context", str, where)
            for qa_index, qa in enumerate(_field(paragraph, "qas", list, where)):
                qa_where = f"{where}.qas[{qa_index}]"
                qas_id = str(_field(qa, "id", (str, int), qa_where))
                qa_where = f"{qa_where} (id {qas_id})"
                question = _field(qa, "question", str, qa_where)
                is_impossible = bool(qa.get("is_impossible", False)) if version_2_with_negative else False
                answers = []
                for answer_index, answer in enumerate(qa.get("answers", []) if not is_impossible else []):
                    answer_where = f"{qa_where}.answers[{answer_index}]"
                    text = _field(answer, "text", str, answer_where)
                    start = _field(answer, "answer_start", int, answer_where)
                    if not 0 <= start <= len(context):
                        raise DataError(
                            f"{answer_where}: answer_start {start} is outside the context ({len(context)} characters)."
                        )
                    answers.append(SquadAnswer(text=text, start_char=start))
                if training and not is_impossible:
                    if not answers:
                        raise DataError(
                            f"{qa_where}: a training question needs an answer"
                            + ("" if version_2_with_negative else " (pass version_2_with_negative for SQuAD v2.0 data)")
                            + "."
                        )
                    first = answers[0]
                    found = context[first.start_char : first.start_char + len(first.text)]
                    if " ".join(found.split()) != " ".join(first.text.split()):
                        logging.warning(
                            "%s: answer %r not found at character %d; skipping.", qa_where, first.text, first.start_char
                        )
                        skipped += 1
                        continue
                examples.append(
                    SquadExample(
                        qas_id=qas_id,
                        question=question,
                        context=context,
                        answers=tuple(answers),
                        is_impossible=is_impossible,
                    )
                )
    if skipped:
        logging.warning("%s: skipped %d training question(s) with misplaced answers.", path, skipped)
    if not examples:
        raise DataError(f"{path}: no questions.")
    return examples


def _field(record, key, types, where):
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}.")
    if key not in record:
        raise DataError(f"{where}: missing {key!r}.")
    value = record[key]
    if not isinstance(value, types) or isinstance(value, bool):
        raise DataError(f"{where}: {key!r} has type {type(value).__name__}.")
    return value


# --- TFDS -------------------------------------------------------------------

# Text features, label feature and evaluation split of the TFDS text datasets BERT is usually tuned on.
TFDS_TEXT_DATASETS = {
    "glue/cola": ("sentence", None, "validation"),
    "glue/sst2": ("sentence", None, "validation"),
    "glue/mrpc": ("sentence1", "sentence2", "validation"),
    "glue/qqp": ("question1", "question2", "validation"),
    "glue/stsb": ("sentence1", "sentence2", "validation"),
    "glue/mnli": ("premise", "hypothesis", "validation_matched"),
    "glue/mnli_matched": ("premise", "hypothesis", "validation"),
    "glue/mnli_mismatched": ("premise", "hypothesis", "validation"),
    "glue/qnli": ("question", "sentence", "validation"),
    "glue/rte": ("sentence1", "sentence2", "validation"),
    "glue/wnli": ("sentence1", "sentence2", "validation"),
    "glue/ax": ("premise", "hypothesis", "test"),
    "imdb_reviews": ("text", None, "test"),
    "imdb_reviews/plain_text": ("text", None, "test"),
}


def tfds_defaults(name: str) -> tuple:
    """(text_a feature, text_b feature, evaluation split) of a known TFDS text dataset."""
    base = name.split(":")[0]
    if base not in TFDS_TEXT_DATASETS:
        raise DataError(
            f"No default text features for TFDS dataset {name!r}; known: "
            f"{sorted(TFDS_TEXT_DATASETS)}. Give the text columns explicitly."
        )
    return TFDS_TEXT_DATASETS[base]


def read_tfds_text_examples(
    name: str,
    split: str,
    data_dir: str | None,
    text_a_key: str | None = None,
    text_b_key: str | None = None,
    label_key: str = "label",
) -> tuple:
    """Reads a TFDS text classification/regression split that is already on disk.

    Args:
      name: e.g. "glue/mrpc", "glue/stsb", "imdb_reviews".
      split: e.g. "train", "validation", "test[:10%]".
      data_dir: where `tfds build` / `download_and_prepare` put the data;
        nothing is downloaded.
      text_a_key, text_b_key: the text features; default from
        `TFDS_TEXT_DATASETS` for known datasets.

    Returns:
      (examples, label_names): label_names is the ClassLabel's names, or None
      for a float (regression) label. GLUE test labels (-1) become None.
    """
    import tensorflow_datasets as tfds

    if text_a_key is None:
        text_a_key, default_b, _ = tfds_defaults(name)
        text_b_key = text_b_key or default_b
    try:
        dataset, info = tfds.load(
            name, split=split, data_dir=data_dir, with_info=True, download=False, shuffle_files=False
        )
    except Exception as e:  # tfds raises AssertionError/ValueError/DatasetNotFoundError variously
        raise DataError(
            f"Cannot load TFDS dataset {name!r} split {split!r} from data_dir={data_dir!r} "
            f"(nothing is downloaded; prepare it with `tfds build {name} --data_dir=...`): "
            f"{type(e).__name__}: {e}"
        ) from None
    features = info.features
    for role, key in (("text_a", text_a_key), ("text_b", text_b_key), ("label", label_key)):
        if key is not None and key not in features:
            raise DataError(
                f"TFDS dataset {name!r} has no {role} feature {key!r}; its features are {sorted(features.keys())}."
            )
    label_feature = features[label_key]
    label_names = list(label_feature.names) if hasattr(label_feature, "names") else None

    examples = []
    for index, record in enumerate(tfds.as_numpy(dataset)):
        label = record[label_key]
        if label_names is None:
            label = float(label)
        else:
            label = None if int(label) < 0 else label_names[int(label)]
        examples.append(
            TextExample(
                guid=f"{name}:{split}:{index}",
                text_a=_decode(record[text_a_key]),
                text_b=_decode(record[text_b_key]) if text_b_key else None,
                label=label,
            )
        )
    if not examples:
        raise DataError(f"TFDS dataset {name!r} split {split!r} is empty.")
    return examples, label_names


def _decode(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def read_tfds_label_names(name: str, data_dir: str | None, label_key: str = "label") -> list | None:
    """The class names of a prepared TFDS dataset's label (None for a float label), from its metadata."""
    import tensorflow_datasets as tfds

    try:
        features = tfds.builder(name, data_dir=data_dir).info.features
    except Exception as e:  # unknown name, missing metadata
        raise DataError(
            f"Cannot read the metadata of TFDS dataset {name!r} from data_dir={data_dir!r}: {type(e).__name__}: {e}"
        ) from None
    if label_key not in features:
        raise DataError(
            f"TFDS dataset {name!r} has no label feature {label_key!r}; its features are {sorted(features.keys())}."
        )
    feature = features[label_key]
    return list(feature.names) if hasattr(feature, "names") else None
