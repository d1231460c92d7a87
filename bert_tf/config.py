"""`BertConfig`: the hyperparameters of a BERT encoder.

The field names and JSON layout are those of google-research/bert's
`bert_config.json`, so configs move between that code base and this one
unchanged. HuggingFace `config.json` files for BERT can be read too.
"""

from __future__ import annotations

import dataclasses
import json

from bert_tf import file_io

ACTIVATIONS = ("gelu", "gelu_new", "relu")

# HuggingFace spells a few activations differently; all map onto ours.
_HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_new",
    "gelu_pytorch_tanh": "gelu_new",
    "gelu_fast": "gelu_new",
    "relu": "relu",
}


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyperparameters of a BERT encoder, as in `bert_config.json`.

    `hidden_act` is "gelu" (exact, erf-based, as the original BERT),
    "gelu_new" (tanh approximation) or "relu". Every field is checked at
    construction; an invalid value raises a ValueError that names the field.

    ALBERT's parameter reduction (Lan et al., 2020), off by default:
    `embedding_size` (E) factorises the embeddings: word, position and type
    embeddings of E dimensions, projected to `hidden_size` (None: E = H, BERT);
    the masked-LM head then maps H to E before its tied output projection.
    `share_layer_weights` uses one Transformer block's weights in every layer.
    With their defaults the fields are left out of `bert_config.json`, which
    stays the original's.
    """

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    embedding_size: int | None = None
    share_layer_weights: bool = False

    def __post_init__(self):
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}.")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {value!r}.")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive number, got {value!r}.")
        if self.embedding_size is not None and (
            isinstance(self.embedding_size, bool)
            or not isinstance(self.embedding_size, int)
            or self.embedding_size <= 0
        ):
            raise ValueError(
                f"BertConfig.embedding_size must be a positive integer or None, got {self.embedding_size!r}."
            )
        if not isinstance(self.share_layer_weights, bool):
            raise ValueError(f"BertConfig.share_layer_weights must be true or false, got {self.share_layer_weights!r}.")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"BertConfig.hidden_act must be one of {ACTIVATIONS}, got {self.hidden_act!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})."
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def factorized_embedding_size(self) -> int:
        """The width of the embeddings: `embedding_size`, or `hidden_size` when None."""
        return self.embedding_size or self.hidden_size

    @property
    def is_albert_style(self) -> bool:
        """Whether ALBERT's factorised embedding or layer sharing is on (layouts other formats lack)."""
        return self.embedding_size is not None or self.share_layer_weights

    # --- bert_config.json -------------------------------------------------

    def to_dict(self) -> dict:
        """The `bert_config.json` fields; ALBERT's two only when set, so a BERT's file is the original's."""
        values = dataclasses.asdict(self)
        for name, default in _ALBERT_DEFAULTS.items():
            if values[name] == default:
                del values[name]
        return values

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> BertConfig:
        """Builds a config from a `bert_config.json`-style dict.

        Unknown keys raise, so a typo in a hand-written config is not silently
        replaced by a default.
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ValueError(f"{source}: unknown BertConfig field(s) {unknown}; known fields are {sorted(fields)}.")
        if "vocab_size" not in values:
            raise ValueError(f"{source}: missing required field 'vocab_size'.")
        return cls(**values)

    @classmethod
    def from_json_file(cls, path: str) -> BertConfig:
        """Reads a google-research `bert_config.json`."""
        return cls.from_dict(_read_json(path), source=path)

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str) -> None:
        """Writes `bert_config.json` atomically (temporary file, then rename)."""
        file_io.write_text(path, self.to_json_string())

    # --- HuggingFace config.json --------------------------------------------

    @classmethod
    def from_hf_config(cls, values: dict, source: str = "config.json") -> BertConfig:
        """Builds a config from a HuggingFace BERT `config.json` dict."""
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(f"{source}: model_type is {model_type!r}, expected 'bert'.")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"{source}: only absolute position embeddings are supported, got {values['position_embedding_type']!r}."
            )
        activation = values.get("hidden_act", "gelu")
        if activation not in _HF_ACTIVATIONS:
            raise ValueError(f"{source}: unsupported hidden_act {activation!r}.")
        kwargs = {
            f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values and f.name != "hidden_act"
        }
        kwargs["hidden_act"] = _HF_ACTIVATIONS[activation]
        if "vocab_size" not in kwargs:
            raise ValueError(f"{source}: missing required field 'vocab_size'.")
        return cls(**kwargs)

    @classmethod
    def from_hf_json_file(cls, path: str) -> BertConfig:
        return cls.from_hf_config(_read_json(path), source=path)

    # --- presets --------------------------------------------------------------

    @classmethod
    def from_preset(cls, name: str, **overrides) -> BertConfig:
        """A named preset (see `PRESETS`), optionally with some fields replaced."""
        if name not in PRESETS:
            raise ValueError(f"Unknown BERT preset {name!r}; known presets: {', '.join(sorted(PRESETS))}.")
        return dataclasses.replace(PRESETS[name], **overrides)


_ALBERT_DEFAULTS = {"embedding_size": None, "share_layer_weights": False}


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"BERT config file not found: {path}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}).") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}.")
    return values


UNCASED_VOCAB_SIZE = 30522


def _sized(num_layers: int, hidden_size: int) -> BertConfig:
    # The 24 small BERTs (Turc et al., 2019): A = H / 64 heads, I = 4H.
    return BertConfig(
        vocab_size=UNCASED_VOCAB_SIZE,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,
        intermediate_size=4 * hidden_size,
    )


PRESETS = {
    f"bert_L{layers}_H{hidden}": _sized(layers, hidden)
    for layers in (2, 4, 6, 8, 10, 12)
    for hidden in (128, 256, 512, 768)
}
PRESETS.update(
    {
        "bert_tiny": PRESETS["bert_L2_H128"],
        "bert_mini": PRESETS["bert_L4_H256"],
        "bert_small": PRESETS["bert_L4_H512"],
        "bert_medium": PRESETS["bert_L8_H512"],
        "bert_base": PRESETS["bert_L12_H768"],
        # ALBERT-Base's shape (E=128, one shared block: 12M parameters against BERT-Base's 110M) with this
        # package's WordPiece vocabulary; ALBERT's own has 30,000 SentencePiece ids.
        "albert_base": dataclasses.replace(PRESETS["bert_L12_H768"], embedding_size=128, share_layer_weights=True),
        "bert_large": BertConfig(
            vocab_size=UNCASED_VOCAB_SIZE,
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
        ),
    }
)
