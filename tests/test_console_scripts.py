"""The console scripts: one `bert_tf_` prefix, each pointing at an importable `run`, each documented."""

import ast
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _setup_lists() -> dict:
    """setup.py's module-level list assignments (CONSOLE_SCRIPTS, ...), read without running it."""
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


def test_every_command_has_the_prefix_and_is_documented():
    scripts = _entry_points(_setup_lists()["CONSOLE_SCRIPTS"])
    assert scripts and all(name.startswith("bert_tf_") for name in scripts), sorted(scripts)
    documented = (ROOT / "README.md").read_text(encoding="utf-8") + (ROOT / "BUILD.md").read_text(encoding="utf-8")
    for name in scripts:
        assert name in documented, f"{name} is not mentioned in README.md or BUILD.md"


def test_every_entry_point_is_an_importable_run_that_loads_no_tensorflow_at_import():
    # In a subprocess: importing a program may set TensorFlow's environment (classify_with_hub's tf_keras).
    # No program loads TensorFlow at import: its `run` (bert_tf.cli.run) quiets TensorFlow's start-up first.
    targets = sorted(set(_entry_points(_setup_lists()["CONSOLE_SCRIPTS"]).values()))
    code = (
        f"import importlib, json, sys; sys.path.insert(0, {str(ROOT)!r}); "
        f"runs = [callable(getattr(importlib.import_module(m), f, None)) for m, f in {targets!r}]; "
        "print(json.dumps([runs, sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'keras'})]))"
    )
    result = subprocess.run([sys.executable, "-I", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    runs, heavy = json.loads(result.stdout.strip().splitlines()[-1])
    assert runs == [True] * len(targets), targets
    assert heavy == [], f"importing the programs loaded {heavy}"
