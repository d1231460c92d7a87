"""One lazy package namespace (PEP 562): a package's public names, imported from their modules on first use.

Every package of bert_tf that re-exports names uses it, so that importing the package loads no TensorFlow or
Keras until a name that needs them is touched.

    # in a package's __init__.py
    from bert_tf.lazy_namespace import lazy_names
    __getattr__, __dir__ = lazy_names(__name__, {"BertEncoder": "bert_tf.models.bert_encoder"})
"""

from __future__ import annotations

import importlib
import pkgutil
import sys


def lazy_names(package: str, module_of: dict):
    """`(__getattr__, __dir__)` for `package`, whose public names `module_of` maps to the modules defining them.

    A name is imported on first access and then set on the package, so later accesses are plain lookups.

    Raises:
      ImportError: a name is also one of the package's submodules: importing that submodule sets the same
        attribute, so the name would mean whichever of the two was imported last.
    """
    submodules = {module.name for module in pkgutil.iter_modules(sys.modules[package].__path__)}
    clashes = sorted(submodules & set(module_of))
    if clashes:
        raise ImportError(f"{package}: {', '.join(clashes)} names both an exported object and a submodule.")

    def __getattr__(name):
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_of[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(module_of))

    return __getattr__, __dir__
