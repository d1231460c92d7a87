"""`--help` of every console script: the program's description, its examples and every flag it defines."""

import ast
import importlib
import pathlib

import pytest
from absl import flags

from bert_tf import cli
from tests.helpers.absl_flags import run_help

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _console_scripts() -> list:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CONSOLE_SCRIPTS":
            specs = ast.literal_eval(node.value)
    return [tuple(part.strip() for part in spec.split("=")) for spec in specs]


def _help_of(module, command: str, capsys) -> tuple:
    """(exit status, stdout, the flags it defined) of `module.run([command, "--help"])` in this process."""
    before = set(flags.FLAGS)
    module.define_flags()
    new_flags = set(flags.FLAGS) - before
    defined = {name for name in new_flags if cli.is_project_flag(name)}
    for name in new_flags:
        delattr(flags.FLAGS, name)
    status = run_help(module, command)
    return status, capsys.readouterr().out, defined


@pytest.mark.parametrize("script,target", _console_scripts(), ids=lambda value: value.split(":")[0])
def test_help_of_a_console_script_is_the_programs_description_and_its_flags(script, target, capsys):
    module = importlib.import_module(target.split(":")[0])
    status, text, defined = _help_of(module, f"/venv/bin/{script}", capsys)
    assert status == 0
    description = module.__doc__.strip().splitlines()[0]
    assert text.startswith(description), text[:200]
    assert "USAGE:" not in text.splitlines()[0]
    assert defined, script
    for name in defined:
        assert f"--{name}:" in text or f"--[no]{name}:" in text, (script, name)
    # The same text as `python -m MODULE --help` (argv[0] is then the module's file).
    module_file = module.__file__
    assert _help_of(module, module_file, capsys)[1] == text


def test_only_help_arguments_before_the_end_of_flags_ask_for_help():
    assert cli.asks_for_help(["tool", "--output_dir=x", "--help"])
    assert cli.asks_for_help(["tool", "-h"])
    assert cli.asks_for_help(["tool", "-?"])
    assert not cli.asks_for_help(["tool", "--output_dir=--help"])
    assert not cli.asks_for_help(["tool", "--", "--help"])
    assert not cli.asks_for_help(["tool", "--helpfull"])
