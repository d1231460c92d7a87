"""Every command in docs/*.md names a real program and only flags it defines.

`python -m MODULE --flag ...` and `bert_tf_<program> --flag ...` (console scripts, from setup.py) are
collected from the guides (continuation lines joined); each module's flags are read in a subprocess (importing
some programs sets TensorFlow's environment) by calling its `define_flags`.
"""

import ast
import json
import re
import subprocess
import sys

from tests.helpers import training_data

ROOT = training_data.ROOT
COMMAND = re.compile(r"(?:python -m ([A-Za-z_][\w.]*)|\b(bert_tf_\w+))([^\n`#]*)")
FLAG = re.compile(r"(?<![\w-])--([A-Za-z_]\w*)")
ABSL_FLAGS = {"help", "helpfull", "helpshort", "flagfile"}

FLAGS_OF = r"""
import importlib, json, sys
from absl import flags
result = {}
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    before = set(flags.FLAGS)
    module.define_flags()
    defined = set(flags.FLAGS) - before
    result[name] = {flag: flags.FLAGS[flag].boolean for flag in defined}
    for flag in defined:
        delattr(flags.FLAGS, flag)
print(json.dumps(result))
"""


def _console_scripts() -> dict:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CONSOLE_SCRIPTS":
            specs = ast.literal_eval(node.value)
    return {name.strip(): target.split(":")[0].strip() for name, target in (spec.split("=") for spec in specs)}


def _commands() -> list:
    """(doc file, module, [flags]) for every command in docs/."""
    scripts = _console_scripts()
    commands = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text(encoding="utf-8").replace("\\\n", " ")
        for module, script, rest in COMMAND.findall(text):
            if script and script not in scripts:
                commands.append((path.name, script, []))  # an unknown program: fails below
                continue
            commands.append((path.name, module or scripts[script], FLAG.findall(rest)))
    return commands


def test_every_command_in_the_docs_names_a_real_program_and_its_flags():
    commands = _commands()
    assert commands, "no command found in docs/"
    modules = sorted({module for _, module, _ in commands})
    unknown = [module for module in modules if module.startswith("bert_tf_")]
    assert not unknown, f"docs name programs that setup.py does not install: {unknown}"
    result = subprocess.run(
        [sys.executable, "-c", FLAGS_OF, json.dumps(modules)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(ROOT),
        env=training_data.subprocess_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    defined = json.loads(result.stdout.strip().splitlines()[-1])
    wrong = []
    for doc, module, flags in commands:
        for flag in flags:
            boolean_off = flag.startswith("no") and defined[module].get(flag[2:]) is True
            if flag not in defined[module] and flag not in ABSL_FLAGS and not boolean_off:
                wrong.append(f"{doc}: python -m {module} --{flag}")
    assert not wrong, "flags the programs do not define:\n" + "\n".join(wrong)
