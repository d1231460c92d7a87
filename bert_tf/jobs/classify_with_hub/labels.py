"""The binary classifier's two classes, from the training data's labels."""

from __future__ import annotations

import numpy as np


def binary_labels(train_labels, test_labels, label_names, test_file):
    """(names of the two classes in id order, train targets 0/1, test targets 0/1).

    The training data has exactly two labels, named as written and sorted (the second is the positive class,
    whose probability is the score), or, for labels written as 0/1, named by `label_names` in id order. Raises
    ValueError naming the flag or `test_file`.
    """
    written = sorted(set(train_labels))
    if len(written) != 2:
        raise ValueError(
            f"--train_file: this binary classifier needs exactly two labels, got {len(written)}: {written[:5]}; "
            "use experiments.finetune for more classes."
        )
    if label_names:
        if len(label_names) != 2 or written != ["0", "1"]:
            raise ValueError(
                f"--label_names={','.join(label_names)}: needs two names and labels written as 0 and 1 (got {written})."
            )
        names = list(label_names)
    else:
        names = written
    for number, label in enumerate(test_labels):
        if label not in written:
            raise ValueError(f"{test_file}: example {number + 1} has the label {label!r}, not one of {written}.")
    positive = written[1]
    return (
        names,
        np.array([label == positive for label in train_labels], "float32"),
        np.array([label == positive for label in test_labels], "float32"),
    )
