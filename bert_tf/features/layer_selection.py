"""Naming an encoder's layers: `embeddings`, Transformer layer indices, `all`.

`all_layers(outputs)` is the list [embedding output, Transformer layer 1, ..., layer L]; position 0 is the
embeddings ("layer 0" of the probing literature and of `experiments.probe_layers`). `extract_features`'
`--layers` keeps the original script's numbering of the Transformer layers (0 the first, -1 the last) and
adds the name `embeddings`; `select_layers` turns either into positions in `all_layers`.
"""

from __future__ import annotations

from collections.abc import Sequence

from bert_tf.errors import JobArgumentError

EMBEDDINGS = "embeddings"
ALL = "all"

LayerName = int | str


def all_layers(encoder_outputs: dict) -> list:
    """[embedding_output, encoder_outputs...]: L + 1 tensors of [batch, seq, hidden]."""
    return [encoder_outputs["embedding_output"], *encoder_outputs["encoder_outputs"]]


def check_layer_specs(specs: Sequence[str | int]) -> tuple[str | int, ...]:
    """`--layers` values as a tuple, each an integer, `embeddings` or `all`; raises `JobArgumentError` otherwise.

    The check that needs no model; `parse_layers` checks the indices against the model's depth.
    """
    values = []
    for spec in specs:
        text = str(spec).strip()
        if text in (ALL, EMBEDDINGS):
            values.append(text)
            continue
        try:
            values.append(int(text))
        except ValueError:
            raise JobArgumentError(
                f"--layers must be integers, '{EMBEDDINGS}' or '{ALL}', got {list(specs)}."
            ) from None
    if not values:
        raise JobArgumentError(f"--layers names no layer (integers, '{EMBEDDINGS}' or '{ALL}').")
    return tuple(values)


def parse_layers(specs: Sequence[str | int], num_layers: int) -> list[LayerName]:
    """Layer names from `--layers` values: integers (Transformer layers, -1 the last), `embeddings`, `all`.

    `all` stands for the embeddings and every Transformer layer, 0 to L-1. Raises `JobArgumentError` naming the
    flag for a value that is neither, or an index out of range.
    """
    names: list[LayerName] = []
    for value in check_layer_specs(specs):
        if value == ALL:
            names.extend([EMBEDDINGS, *range(num_layers)])
        else:
            names.append(value)
    bad = [name for name in names if isinstance(name, int) and not -num_layers <= name < num_layers]
    if bad:
        raise JobArgumentError(
            f"--layers {bad} out of range: the model has {num_layers} layers "
            f"(use -{num_layers}..{num_layers - 1}; -1 is the last; or '{EMBEDDINGS}')."
        )
    return names


def select_layers(names: Sequence[LayerName], num_layers: int) -> list[int]:
    """Positions in `all_layers` of the layers `names` (from `parse_layers`)."""
    return [0 if name == EMBEDDINGS else name % num_layers + 1 for name in names]
