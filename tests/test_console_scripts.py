"""The console scripts: one `bert_tf_` prefix, each pointing at an importable `run`; the old names are aliases."""

import ast
import json
import os
import pathlib
import subprocess
import sys

from bert_tf import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _setup_lists() -> dict:
    """setup.py's module-level list assignments (CONSOLE_SCRIPTS, DEPRECATED_ALIASES, ...), read without running it."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    lists = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List) and len(node.targets) == 1:
            lists[node.targets[0].id] = ast.literal_eval(node.value)
    return lists


def _entry_points(specs) -> dict:
    """["name=module:function", ...] -> {name: (module, function)}."""
    points = {}
    for spec in specs:
        name, target = (part.strip() for part in spec.split("="))
        module, function = target.split(":")
        points[name] = (module, function)
    return points


def test_every_command_has_the_prefix_and_each_old_name_is_a_documented_alias():
    lists = _setup_lists()
    scripts, aliases = _entry_points(lists["CONSOLE_SCRIPTS"]), _entry_points(lists["DEPRECATED_ALIASES"])
    assert scripts and all(name.startswith("bert_tf_") for name in scripts), sorted(scripts)
    # An alias runs the same `run` as the command that replaces it, and the tool knows the new name to suggest.
    assert {old: scripts[new] for old, new in cli.DEPRECATED_COMMANDS.items()} == aliases
    documented = (ROOT / "README.md").read_text(encoding="utf-8") + (ROOT / "BUILD.md").read_text(encoding="utf-8")
    for name in scripts:  # the documents name the current commands only, not the old names
        assert name in documented, f"{name} is not mentioned in README.md or BUILD.md"


def test_every_entry_point_is_an_importable_run():
    # In a subprocess: importing a program may set TensorFlow's environment (classify_with_hub's tf_keras).
    targets = sorted(set(_entry_points(_setup_lists()["CONSOLE_SCRIPTS"]).values()))
    code = (
        f"import importlib, json, sys; sys.path.insert(0, {str(ROOT)!r}); "
        f"print(json.dumps([callable(getattr(importlib.import_module(m), f, None)) for m, f in {targets!r}]))"
    )
    result = subprocess.run([sys.executable, "-I", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [True] * len(targets), targets


def test_a_deprecated_name_warns_in_one_line_and_the_new_name_does_not(capsys):
    cli.warn_if_deprecated_command(os.path.join("venv", "bin", "make_vocab"))
    cli.warn_if_deprecated_command(os.path.join("venv", "bin", "bert_tf_make_vocab"))
    cli.warn_if_deprecated_command("tfrecords_tools/make_vocab.py")  # python -m tfrecords_tools.make_vocab
    assert capsys.readouterr().err.splitlines() == [
        "make_vocab: warning: this command name is deprecated and will be removed; use bert_tf_make_vocab (same flags)"
    ]
