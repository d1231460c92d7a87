"""The fine-tuning task registry: `--task` names to the `FinetuningTask` plug-ins that run them.

    from bert_tf.tasks.registry import register_task, task_class, task_names

    @register_task
    class MyTask(FinetuningTask):
        names = ("my_task",)
        ...

    task_names()                     # ("classification", ..., "squad", "my_task")
    task_class("squad").config_class  # SquadConfig

A plug-in registers itself when its module is imported. The built-in plug-ins' modules load Keras, so the
registry knows their names and modules and imports one only when its class is asked for: listing the names
(`experiments.finetune --task`'s choices) loads nothing.
"""

from __future__ import annotations

import importlib

from bert_tf.errors import JobArgumentError

# The built-in plug-ins: name -> the module that registers it (imported on first use).
_BUILT_IN = {
    "classification": "bert_tf.tasks.classification",
    "sentence_pair_classification": "bert_tf.tasks.classification",
    "regression": "bert_tf.tasks.classification",
    "token_classification": "bert_tf.tasks.tagging",
    "squad": "bert_tf.tasks.squad",
}
_REGISTERED: dict = {}


def register_task(cls):
    """Class decorator: registers a `FinetuningTask` subclass under each of its `names`; returns it.

    Raises:
      ValueError: a name already registered to another class (two plug-ins cannot share a `--task`).
    """
    if not cls.names:
        raise ValueError(f"{cls.__name__} declares no names.")
    for name in cls.names:
        known = _REGISTERED.get(name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise ValueError(f"--task={name} is already registered to {known.__module__}.{known.__qualname__}.")
        _REGISTERED[name] = cls
    return cls


def task_names() -> tuple:
    """Every task name: the built-in ones, then the registered plug-ins', in registration order."""
    return tuple(dict.fromkeys([*_BUILT_IN, *_REGISTERED]))


def task_class(name: str):
    """The plug-in class that runs `--task=name` (importing a built-in one's module on first use).

    Raises:
      JobArgumentError: an unknown name, listing the known ones.
    """
    if name not in _REGISTERED and name in _BUILT_IN:
        importlib.import_module(_BUILT_IN[name])
    if name not in _REGISTERED:
        raise JobArgumentError(f"--task must be one of {', '.join(task_names())}, got {name!r}.")
    return _REGISTERED[name]
