"""`--help` of every program, as a console script and as `python -m MODULE`: its description and flags."""

import ast
import importlib
import pathlib
import runpy
import subprocess
import sys
import warnings

import pytest
from absl import app, flags

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


def _programs() -> list:
    """Every program's module: each module of experiments/ and tfrecords_tools/ with a `python -m` main."""
    names = ["experiments.demo", "experiments.demo.serve"]
    for package in ("experiments", "tfrecords_tools"):
        for path in sorted((ROOT / package).glob("*.py")):
            if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8"):
                names.append(f"{package}.{path.stem}")
    return names


def _defined_flags(module) -> set:
    """The project flags `module.define_flags()` defines (removed again)."""
    before = set(flags.FLAGS)
    module.define_flags()
    new_flags = set(flags.FLAGS) - before
    defined = {name for name in new_flags if cli.is_project_flag(name)}
    for name in new_flags:
        delattr(flags.FLAGS, name)
    return defined


def _run_as_main(module_name: str, argument: str, monkeypatch) -> int:
    """Runs `python -m module_name argument` in this process, as the interpreter does; returns the exit status.

    runpy runs a fresh copy of the module as `__main__` with `sys.argv[0]` set to its file, which is how absl
    names the flags that copy defines.
    """
    monkeypatch.setattr(sys, "argv", ["-m", argument])
    app.define_help_flags()  # absl defines them once a process: kept
    before = set(flags.FLAGS)
    try:
        with warnings.catch_warnings():
            # "found in sys.modules ... prior to execution": the test process imported it; runpy runs a copy.
            warnings.simplefilter("ignore", RuntimeWarning)
            runpy.run_module(module_name, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        return exit_.code
    finally:
        flags.FLAGS.unparse_flags()
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)
    return 0


def test_every_program_module_is_checked():
    programs = set(_programs())
    scripts = {target.split(":")[0] for _, target in _console_scripts()}
    assert scripts <= programs, scripts - programs
    assert "experiments.classify_with_hub" in programs


@pytest.mark.parametrize("module_name", _programs())
def test_help_of_python_dash_m_lists_the_programs_own_flags(module_name, capsys, monkeypatch):
    module = importlib.import_module(module_name)
    defined = _defined_flags(module)
    assert defined, module_name
    assert _run_as_main(module_name, "--help", monkeypatch) == 0
    text = capsys.readouterr().out
    assert text.startswith(module.__doc__.strip().splitlines()[0]), text[:200]
    for name in defined:
        assert f"--{name}:" in text or f"--[no]{name}:" in text, (module_name, name)


@pytest.mark.parametrize("module_name", ["experiments.export", "tfrecords_tools.make_vocab"])
def test_helpfull_of_python_dash_m_still_lists_every_flag(module_name, capsys, monkeypatch):
    module = importlib.import_module(module_name)
    defined = _defined_flags(module)
    _run_as_main(module_name, "--helpfull", monkeypatch)
    text = capsys.readouterr().out
    for name in defined:
        assert f"--{name}:" in text or f"--[no]{name}:" in text, (module_name, name)
    assert "--[no]helpfull:" in text  # absl's own flags too


def test_help_of_python_dash_m_in_its_own_process():
    result = subprocess.run(
        [sys.executable, "-m", "experiments.export", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--export_dir:" in result.stdout
    assert "--model_dir:" in result.stdout


def test_ctrl_c_is_one_line_and_status_130(capsys):
    @cli.main_function("tool")
    def main(argv):
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exit_:
        main(["tool"])
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "tool: error: interrupted\n"
