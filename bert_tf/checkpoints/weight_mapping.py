"""The table that maps every weight of our models to its name in other checkpoints.

One row per weight: where it lives in a `BertEncoder` / `BertPretrainer`, its
name in a google-research TF1 checkpoint, its name in a HuggingFace
`BertForPreTraining` state dict, and how each source array is reshaped into
ours. Both readers (`tf1.py`, `huggingface.py`) hand their tensors to
`convert_weights`, which checks the whole checkpoint against the table before
assigning anything, so every missing, unexpected or misshapen variable is
reported at once and nothing is skipped silently.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from absl import logging

from bert_tf.config import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer

# Weight groups. The pooler and the two pretraining heads may be absent from a
# checkpoint; the encoder body never is.
ENCODER = "encoder"
POOLER = "pooler"
MASKED_LM = "masked_lm"
NEXT_SENTENCE = "next_sentence"
GROUPS = (ENCODER, POOLER, MASKED_LM, NEXT_SENTENCE)

HEADS_CHOICES = ("auto", "pretraining", "none")

_FORMAT_NAMES = {"tf1": "google-research TF1 BERT checkpoint", "hf": "HuggingFace BERT model"}


def identity(array: np.ndarray) -> np.ndarray:
    return array


def transpose(array: np.ndarray) -> np.ndarray:
    """[out, in] (torch Linear, TF1 `output_weights`) -> [in, out] (Keras Dense kernel)."""
    return array.T


@dataclasses.dataclass(frozen=True)
class WeightSpec:
    """One of our weights and its names in the source formats.

    Attributes:
      target: attribute path from the model's parts, e.g.
        "encoder.transformer_layers.0.attention.query.kernel".
      group: one of `GROUPS`.
      tf1_name: variable name in a google-research TF1 checkpoint.
      hf_name: tensor name in a HuggingFace state dict, without the "bert."
        prefix that models with heads put in front of encoder and pooler weights.
      tf1_transform, hf_transform: source array -> our layout.
    """

    target: str
    group: str
    tf1_name: str
    hf_name: str
    tf1_transform: Callable[[np.ndarray], np.ndarray] = identity
    hf_transform: Callable[[np.ndarray], np.ndarray] = identity

    def source_name(self, source_format: str) -> str:
        return self.tf1_name if source_format == "tf1" else self.hf_name

    def transform(self, source_format: str) -> Callable[[np.ndarray], np.ndarray]:
        return self.tf1_transform if source_format == "tf1" else self.hf_transform


def _dense(target, group, tf1_scope, hf_scope):
    """Kernel and bias of a dense layer: TF1 kernels are [in, out] like ours; torch's are [out, in]."""
    return [
        WeightSpec(f"{target}.kernel", group, f"{tf1_scope}/kernel", f"{hf_scope}.weight", identity, transpose),
        WeightSpec(f"{target}.bias", group, f"{tf1_scope}/bias", f"{hf_scope}.bias"),
    ]


def _layer_norm(target, group, tf1_scope, hf_scope):
    return [
        WeightSpec(f"{target}.gamma", group, f"{tf1_scope}/gamma", f"{hf_scope}.weight"),
        WeightSpec(f"{target}.beta", group, f"{tf1_scope}/beta", f"{hf_scope}.bias"),
    ]


def weight_specs(num_hidden_layers: int) -> list[WeightSpec]:
    """Every weight of a `BertPretrainer` with `num_hidden_layers` blocks, in a stable order."""
    specs = [
        WeightSpec(
            "encoder.embeddings.token_embedding.embeddings",
            ENCODER,
            "bert/embeddings/word_embeddings",
            "embeddings.word_embeddings.weight",
        ),
        WeightSpec(
            "encoder.embeddings.type_embedding.embeddings",
            ENCODER,
            "bert/embeddings/token_type_embeddings",
            "embeddings.token_type_embeddings.weight",
        ),
        WeightSpec(
            "encoder.embeddings.position_embeddings",
            ENCODER,
            "bert/embeddings/position_embeddings",
            "embeddings.position_embeddings.weight",
        ),
        *_layer_norm("encoder.embeddings.layer_norm", ENCODER, "bert/embeddings/LayerNorm", "embeddings.LayerNorm"),
    ]
    for i in range(num_hidden_layers):
        ours, tf1, hf = f"encoder.transformer_layers.{i}", f"bert/encoder/layer_{i}", f"encoder.layer.{i}"
        for projection in ("query", "key", "value"):
            specs += _dense(
                f"{ours}.attention.{projection}",
                ENCODER,
                f"{tf1}/attention/self/{projection}",
                f"{hf}.attention.self.{projection}",
            )
        specs += _dense(
            f"{ours}.attention.output_dense", ENCODER, f"{tf1}/attention/output/dense", f"{hf}.attention.output.dense"
        )
        specs += _layer_norm(
            f"{ours}.attention_layer_norm",
            ENCODER,
            f"{tf1}/attention/output/LayerNorm",
            f"{hf}.attention.output.LayerNorm",
        )
        specs += _dense(f"{ours}.intermediate_dense", ENCODER, f"{tf1}/intermediate/dense", f"{hf}.intermediate.dense")
        specs += _dense(f"{ours}.output_dense", ENCODER, f"{tf1}/output/dense", f"{hf}.output.dense")
        specs += _layer_norm(f"{ours}.output_layer_norm", ENCODER, f"{tf1}/output/LayerNorm", f"{hf}.output.LayerNorm")
    specs += _dense("encoder.pooler", POOLER, "bert/pooler/dense", "pooler.dense")
    specs += _dense(
        "masked_lm.transform", MASKED_LM, "cls/predictions/transform/dense", "cls.predictions.transform.dense"
    )
    specs += _layer_norm(
        "masked_lm.layer_norm", MASKED_LM, "cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm"
    )
    # The MLM output projection is tied to the word embeddings, so only its bias is a weight of its own.
    specs.append(WeightSpec("masked_lm.output_bias", MASKED_LM, "cls/predictions/output_bias", "cls.predictions.bias"))
    # TF1 stores the NSP matrix as [2, hidden] (`output_weights`), like a torch Linear.
    specs += [
        WeightSpec(
            "next_sentence.dense.kernel",
            NEXT_SENTENCE,
            "cls/seq_relationship/output_weights",
            "cls.seq_relationship.weight",
            transpose,
            transpose,
        ),
        WeightSpec(
            "next_sentence.dense.bias", NEXT_SENTENCE, "cls/seq_relationship/output_bias", "cls.seq_relationship.bias"
        ),
    ]
    return specs


def transformed_shape(spec: WeightSpec, source_format: str, shape: Sequence[int]) -> tuple:
    """The shape `spec`'s transform gives a source tensor of `shape`, without reading it."""
    placeholder = np.broadcast_to(np.zeros((), dtype=np.uint8), tuple(shape))  # no memory of its own
    return tuple(spec.transform(source_format)(placeholder).shape)


def resolve_target(parts: Mapping[str, object], target: str):
    """The variable at `target`, e.g. "encoder.transformer_layers.0.attention.query.kernel"."""
    head, *path = target.split(".")
    obj = parts[head]
    for attr in path:
        obj = obj[int(attr)] if attr.isdigit() else getattr(obj, attr)
    return obj


class CheckpointMismatchError(ValueError):
    """A checkpoint does not match the model: lists every problem by variable name."""


class SourceTensors:
    """Read access to a checkpoint's tensors by name, shapes first, arrays on demand.

    Args:
      shapes: every tensor name in the checkpoint -> its shape.
      read: name -> numpy array.
      description: what the checkpoint is (its path), for messages.
      display_names: our normalised name -> the name as spelt in the file,
        where they differ (HuggingFace prefixes, old gamma/beta names).
      spell_absent: how the file would spell a name it lacks, for messages
        about missing weights.
      ignored: names that are not model weights and are skipped on purpose
        (optimizer slots, buffers); logged, never reported as unexpected.
    """

    def __init__(
        self,
        shapes: Mapping[str, Sequence[int]],
        read: Callable[[str], np.ndarray],
        description: str,
        display_names: Mapping[str, str] | None = None,
        ignored: Sequence[str] = (),
        spell_absent: Callable[[str], str] | None = None,
    ):
        self.shapes = {name: tuple(int(d) for d in shape) for name, shape in shapes.items()}
        self.read = read
        self.description = description
        self.display_names = dict(display_names or {})
        self.ignored = sorted(ignored)
        self.spell_absent = spell_absent

    def display(self, name: str) -> str:
        if name in self.display_names:
            return self.display_names[name]
        if name not in self.shapes and self.spell_absent is not None:
            return self.spell_absent(name)
        return name

    def __contains__(self, name: str) -> bool:
        return name in self.shapes


def _listing(source: SourceTensors, names: Sequence[str]) -> str:
    return ", ".join(source.display(n) for n in names)


def select_groups(
    source: SourceTensors, specs: Sequence[WeightSpec], source_format: str, heads: str, allow_missing_pooler: bool
) -> tuple[set, list[str]]:
    """Decides which weight groups to convert; returns them and the source names left out on purpose."""
    if heads not in HEADS_CHOICES:
        raise ValueError(f"heads must be one of {HEADS_CHOICES}, got {heads!r}.")
    present = {
        group: [
            s.source_name(source_format) for s in specs if s.group == group and s.source_name(source_format) in source
        ]
        for group in GROUPS
    }
    expected = {group: [s.source_name(source_format) for s in specs if s.group == group] for group in GROUPS}
    groups = {ENCODER}
    left_out = []

    if not present[ENCODER]:
        # Not a BERT checkpoint of this format at all: report everything as missing rather than guess.
        return {ENCODER, POOLER}, left_out
    if present[POOLER]:
        groups.add(POOLER)
    elif allow_missing_pooler:
        message = (
            f"{source.description} has NO POOLER weights ({_listing(source, expected[POOLER])}): "
            "the pooler keeps its RANDOM initial values, so pooled_output is meaningless until "
            "it is fine-tuned."
        )
        logging.warning(message)
        warnings.warn(message, stacklevel=3)
    else:
        raise CheckpointMismatchError(
            f"{source.description} has no pooler weights (missing: {_listing(source, expected[POOLER])}). "
            "pooled_output would come from randomly initialised weights; pass allow_missing_pooler=True "
            "(--allow_missing_pooler) to convert anyway and keep them."
        )

    has_mlm, has_nsp = bool(present[MASKED_LM]), bool(present[NEXT_SENTENCE])
    if heads == "pretraining" or (heads == "auto" and has_mlm and has_nsp):
        groups.update({MASKED_LM, NEXT_SENTENCE})
    elif heads == "auto" and has_mlm != has_nsp:
        found, lacking = (MASKED_LM, NEXT_SENTENCE) if has_mlm else (NEXT_SENTENCE, MASKED_LM)
        raise CheckpointMismatchError(
            f"{source.description} has {found} weights ({_listing(source, present[found])}) but no {lacking} "
            f"weights (missing: {_listing(source, expected[lacking])}); a BertPretrainer needs both heads. "
            "Pass heads='none' (--heads=none) to convert the encoder alone and leave the head weights out."
        )
    else:
        left_out = [name for group in (MASKED_LM, NEXT_SENTENCE) for name in present[group]]
        if left_out:
            logging.warning(
                "heads=%r: not converting the pretraining-head weights of %s: %s",
                heads,
                source.description,
                _listing(source, left_out),
            )
    return groups, left_out


def _layer_indices(names, pattern):
    return sorted({int(m.group(1)) for m in map(re.compile(pattern).match, names) if m})


def config_disagreements(
    config: BertConfig, source: SourceTensors, source_format: str, specs: Sequence[WeightSpec]
) -> list[str]:
    """Plain-language differences between the config and the checkpoint's shapes."""
    problems = []
    by_target = {s.target: s for s in specs}

    def shape_of(target):
        spec = by_target[target]
        name = spec.source_name(source_format)
        if name not in source:
            return None, name
        return transformed_shape(spec, source_format, source.shapes[name]), name

    checks = [
        ("encoder.embeddings.token_embedding.embeddings", 0, "vocab_size", "rows"),
        ("encoder.embeddings.token_embedding.embeddings", 1, "hidden_size", "columns"),
        ("encoder.embeddings.position_embeddings", 0, "max_position_embeddings", "rows"),
        ("encoder.embeddings.type_embedding.embeddings", 0, "type_vocab_size", "rows"),
        ("encoder.transformer_layers.0.intermediate_dense.kernel", 1, "intermediate_size", "columns"),
    ]
    for target, axis, field, what in checks:
        shape, name = shape_of(target)
        if shape is not None and len(shape) > axis and shape[axis] != getattr(config, field):
            problems.append(
                f"config {field}={getattr(config, field)} but {source.display(name)} has {shape[axis]} {what}"
            )
    pattern = r"bert/encoder/layer_(\d+)/" if source_format == "tf1" else r"encoder\.layer\.(\d+)\."
    layers = _layer_indices(source.shapes, pattern)
    if layers and len(layers) != config.num_hidden_layers:
        problems.append(
            f"config num_hidden_layers={config.num_hidden_layers} but the checkpoint has {len(layers)} layers"
        )
    return problems


def convert_weights(
    config: BertConfig,
    source: SourceTensors,
    source_format: str,
    heads: str = "auto",
    allow_missing_pooler: bool = False,
    config_description: str = "config",
) -> BertEncoder | BertPretrainer:
    """Builds our model for `config` and fills it from `source`.

    Args:
      config: the model's `BertConfig`.
      source: the checkpoint's tensors, named as in `source_format` ("tf1" or "hf").
      heads: "auto" (a `BertPretrainer` when the checkpoint holds both the
        masked-LM and the next-sentence weights, a `BertEncoder` when it holds
        neither), "pretraining" (require both) or "none" (encoder only; head
        weights in the checkpoint are left out, with a log message).
      allow_missing_pooler: keep the pooler's initial values when the
        checkpoint has none (with a warning) instead of failing.

    Raises:
      CheckpointMismatchError: listing every missing, unexpected and
        misshapen variable, and any config field the checkpoint contradicts.
    """
    if source_format not in ("tf1", "hf"):
        raise ValueError(f"source_format must be 'tf1' or 'hf', got {source_format!r}.")
    if config.is_albert_style:
        # google-research/albert and HF AlbertModel name and group these weights their own way (one
        # "transformer/group_0" block, an "embedding_hidden_mapping_in" projection); not mapped here.
        raise ValueError(
            f"{config_description} has ALBERT's embedding_size={config.embedding_size} / share_layer_weights="
            f"{config.share_layer_weights}: converting {_FORMAT_NAMES[source_format]}s of that shape is not "
            "supported (only BERT's layout is); train and save such models with this package."
        )
    all_specs = weight_specs(config.num_hidden_layers)
    groups, left_out = select_groups(source, all_specs, source_format, heads, allow_missing_pooler)
    specs = [s for s in all_specs if s.group in groups]

    encoder = BertEncoder(config)
    model = BertPretrainer(encoder) if MASKED_LM in groups else encoder
    parts = {"encoder": encoder}
    if isinstance(model, BertPretrainer):
        parts.update(masked_lm=model.masked_lm, next_sentence=model.next_sentence)

    used = {s.source_name(source_format) for s in specs}
    missing = [s.source_name(source_format) for s in specs if s.source_name(source_format) not in source]
    unexpected = sorted(set(source.shapes) - used - set(left_out))
    mismatched = []
    for spec in specs:
        name = spec.source_name(source_format)
        if name not in source:
            continue
        variable = resolve_target(parts, spec.target)
        converted_shape = transformed_shape(spec, source_format, source.shapes[name])
        if converted_shape != tuple(variable.shape):
            mismatched.append(
                f"{source.display(name)}: checkpoint shape {list(source.shapes[name])}, "
                f"model weight {spec.target} expects {list(variable.shape)}"
                f"{' (after transposing)' if spec.transform(source_format) is transpose else ''}"
            )

    if missing or unexpected or mismatched:
        lines = [f"{source.description} does not match the BERT model of {config_description}:"]
        if not any(s.source_name(source_format) in source for s in specs if s.group == ENCODER):
            lines.append(f"  It holds none of the encoder weights; is it a {_FORMAT_NAMES[source_format]}?")
        disagreements = config_disagreements(config, source, source_format, all_specs)
        if disagreements:
            lines.append(f"  The config disagrees with the checkpoint ({config_description}):")
            lines += [f"    {p}" for p in disagreements]
        if missing:
            lines.append(f"  Missing from the checkpoint ({len(missing)}):")
            lines += [f"    {source.display(n)}" for n in missing]
        if unexpected:
            lines.append(f"  Unexpected in the checkpoint, not used by the model ({len(unexpected)}):")
            lines += [f"    {source.display(n)}" for n in unexpected]
        if mismatched:
            lines.append(f"  Shape mismatches ({len(mismatched)}):")
            lines += [f"    {m}" for m in mismatched]
        raise CheckpointMismatchError("\n".join(lines))

    for spec in specs:
        name = spec.source_name(source_format)
        array = source.read(name)
        if not np.issubdtype(array.dtype, np.floating):
            raise CheckpointMismatchError(
                f"{source.description}: {source.display(name)} has dtype {array.dtype}, "
                "expected a floating-point weight."
            )
        variable = resolve_target(parts, spec.target)
        variable.assign(np.asarray(spec.transform(source_format)(array), dtype=variable.dtype))
    if source.ignored:
        logging.info(
            "Skipped %d non-weight variables of %s (optimizer slots, buffers): %s",
            len(source.ignored),
            source.description,
            _listing(source, source.ignored),
        )
    logging.info("Converted %d weights from %s into a %s.", len(specs), source.description, type(model).__name__)
    return model
