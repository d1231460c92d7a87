"""The documents' commands name programs and flags that exist, and their links point at files that exist.

Every shell command in a fenced code block of README.md, BUILD.md and docs/*.md (every file there, whoever adds
it) is checked without running it: `python -m MODULE`, `.venv/bin/python -m MODULE` and `bert_tf_*` (setup.py's
console scripts) must name a module of this repository, and each `--flag` must be one the program defines
(its `define_flags()`, run in this process), `--noFLAG` only for a boolean, and a flag's value must parse (a
number, one of an enum's values);
`python PATH.py` and `bash PATH` must name a file. A renamed or removed flag therefore fails here, with the
document, the line and the flag in the message.
"""

import ast
import functools
import importlib
import importlib.util
import pathlib
import re
import shlex

import pytest
from absl import flags

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = {"bert_tf", "experiments", "tfrecords_tools", "benchmarks"}
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console"}
# A value that stands for the user's own (`--model_dir=<converted>`, `--tpu=$TPU_NAME`) is not parsed.
PLACEHOLDER = re.compile(r"[<>$…{}]|\.\.\.|^[A-Z_]+$")


def documents() -> list:
    return [ROOT / "README.md", ROOT / "BUILD.md", *sorted((ROOT / "docs").glob("*.md"))]


def shell_commands(text: str) -> list:
    """[(line number, command words)] of the fenced shell blocks: continuation lines joined, comments dropped,
    split at `&&`, `||`, `;` and `|`, leading `VAR=value` assignments and `$ ` prompts removed."""
    commands, block, fence = [], None, None
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if block is None:
            match = re.match(r"^(```+|~~~+)\s*([\w-]*)", stripped)
            if match:
                fence, block = match.group(1), [] if match.group(2).lower() in SHELL_LANGUAGES else "skip"
            continue
        if stripped.startswith(fence):
            block, fence = None, None
            continue
        if block == "skip":
            continue
        if block and block[-1][1].endswith("\\"):
            block[-1] = (block[-1][0], block[-1][1][:-1] + " " + stripped)
        else:
            block.append((number, stripped))
        if not block[-1][1].endswith("\\"):
            commands.extend(_split(*block.pop()))
    return commands


def _split(number: int, line: str) -> list:
    if line.startswith("$ "):
        line = line[2:]
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: not a command this test can read
        return []
    commands, current = [], []
    for word in words + [";"]:
        if word and set(word) <= set(";&|"):
            while current and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", current[0]):
                current.pop(0)
            if current:
                commands.append((number, current))
            current = []
        else:
            current.append(word)
    return commands


@functools.cache
def console_scripts() -> dict:
    """setup.py's CONSOLE_SCRIPTS as {command: module}, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CONSOLE_SCRIPTS":
            specs = ast.literal_eval(node.value)
            return {spec.split("=")[0].strip(): spec.split("=")[1].split(":")[0].strip() for spec in specs}
    raise AssertionError("setup.py has no CONSOLE_SCRIPTS list")


def program_of(words: list):
    """('module', name, arguments), ('file', path, arguments) or None for a program this test does not check."""
    program, rest = words[0].rsplit("/", 1)[-1] if "bert_tf_" in words[0] else words[0], words[1:]
    if program in console_scripts():
        return "module", console_scripts()[program], rest
    if program.startswith("bert_tf_"):
        return "module", None, [program]  # a console script that setup.py does not define
    if re.fullmatch(r"(\S*/)?python(3(\.\d+)?)?", program):
        if rest[:1] == ["-m"] and len(rest) > 1:
            return "module", rest[1], rest[2:]
        if rest and rest[0].endswith(".py"):
            return "file", rest[0], rest[1:]
        return None
    if program in ("bash", "sh") and rest and not rest[0].startswith("-"):
        return "file", rest[0], []
    return None


def _module_file(name: str):
    """The module's source file in this repository, or None for a module from elsewhere (pytest, pip)."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ModuleNotFoundError(name)
    origin = pathlib.Path(spec.origin or "")
    if spec.submodule_search_locations:  # a package runs its __main__; its flags live in __init__
        origin = pathlib.Path(list(spec.submodule_search_locations)[0]) / "__init__.py"
    try:
        top = origin.relative_to(ROOT).parts[0]
    except ValueError:
        return None
    return origin if top in PROJECT_PACKAGES else None


@functools.cache
def defined_flags(module_name: str):
    """{flag name: absl flag} of a program of this repository; None when it defines no flags."""
    path = _module_file(module_name)
    if path is None:
        return None
    source = path.read_text(encoding="utf-8")
    if "def define_flags" in source:
        module = importlib.import_module(module_name)
        before = set(flags.FLAGS)
        module.define_flags()
        try:
            # absl's own flags (--verbosity, --helpfull, ...) are accepted by every absl program.
            return {name: flags.FLAGS[name] for name in flags.FLAGS}
        finally:
            for name in set(flags.FLAGS) - before:
                delattr(flags.FLAGS, name)
    return None


def check_arguments(program: str, known: dict, arguments: list) -> list:
    """The problems with `arguments` for a program whose flags are `known`."""
    problems = []
    for argument in arguments:
        if not argument.startswith("--") or argument == "--":
            continue
        name, has_value, value = argument[2:].partition("=")
        flag = known.get(name, "missing")
        if flag == "missing" and name.startswith("no") and known.get(name[2:], "missing") not in ("missing", None):
            if known[name[2:]].boolean and not has_value:
                continue
            problems.append(f"--{name} is not a boolean's negation ({program} has --{name[2:]}, not a boolean)")
            continue
        if flag == "missing":
            problems.append(f"{program} defines no flag --{name}")
        elif flag is not None and has_value and not PLACEHOLDER.search(value):
            try:
                flag.parser.parse(value)
            except (ValueError, flags.Error) as e:
                problems.append(f"--{name}={value}: {e}")
    return problems


def command_problems(words: list) -> list:
    program = program_of(words)
    if program is None:
        return []
    kind, name, arguments = program
    if kind == "file":
        return [] if (ROOT / name).is_file() or PLACEHOLDER.search(name) else [f"no file {name}"]
    if name is None:
        return [f"{arguments[0]} is not one of setup.py's console scripts"]
    try:
        known = defined_flags(name)
    except ModuleNotFoundError:
        return [f"no module {name}"]
    return [] if known is None else check_arguments(name, known, arguments)


def test_the_reader_splits_joins_and_strips():
    text = "\n".join(
        [
            "```sh",
            "bash scripts/setup.sh && KERAS_BACKEND=jax .venv/bin/python -m experiments.keras_fit \\",
            "    --model_dir=m  # a comment",
            "```",
            "```python",
            "python -m not_a_shell_block --x",
            "```",
            "    python -m an_indented_line_is_prose --x",
        ]
    )
    assert shell_commands(text) == [
        (2, ["bash", "scripts/setup.sh"]),
        (2, [".venv/bin/python", "-m", "experiments.keras_fit", "--model_dir=m"]),
    ]


def test_a_renamed_flag_an_unknown_module_and_a_bad_negation_are_caught():
    text = "\n".join(
        [
            "```",
            "python -m experiments.extract_features --input_file=a.txt --pooling=mean --nonormalize",
            "python -m experiments.extract_features --input_fle=a.txt --pooling=avg --batch_size=big --nobatch_size",
            "bert_tf_no_such_tool --x",
            "python -m experiments.no_such_module",
            "python benchmarks/no_such_benchmark.py",
            "python -m experiments.keras_fit --model_dir=m --nodo_lower_case --no_such_argument",
            "```",
        ]
    )
    problems = [(number, problem) for number, words in shell_commands(text) for problem in command_problems(words)]
    assert problems == [
        (3, "experiments.extract_features defines no flag --input_fle"),
        (3, "--pooling=avg: value should be one of <cls|mean|max|pooled>"),
        (3, "--batch_size=big: invalid literal for int() with base 10: 'big'"),
        (
            3,
            "--nobatch_size is not a boolean's negation (experiments.extract_features has --batch_size, not a boolean)",
        ),
        (4, "bert_tf_no_such_tool is not one of setup.py's console scripts"),
        (5, "no module experiments.no_such_module"),
        (6, "no file benchmarks/no_such_benchmark.py"),
        (7, "experiments.keras_fit defines no flag --no_such_argument"),
    ]


@pytest.mark.parametrize("document", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_documented_command_exists_with_its_flags(document):
    commands = shell_commands(document.read_text(encoding="utf-8"))
    problems = [
        f"{document.relative_to(ROOT)}:{number}: {problem}"
        for number, words in commands
        for problem in command_problems(words)
    ]
    assert not problems, "documented commands that would fail:\n" + "\n".join(problems)


@pytest.mark.parametrize("document", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file(document):
    text = document.read_text(encoding="utf-8")
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            path = target.split("#")[0]
            if not path or re.match(r"^[a-z]+:", path):
                continue
            if not (document.parent / path).exists():
                problems.append(f"{document.relative_to(ROOT)}:{number}: the link {target} points at nothing")
    assert not problems, "\n".join(problems)


def test_the_readme_starts_with_the_two_commands_that_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```", 2)[1].strip().splitlines()
    assert first_block[:2] == [
        "bash scripts/setup.sh && .venv/bin/python -m experiments.demo --output_dir=runs/demo",
        ".venv/bin/python -m pytest -q",
    ]
    assert ".venv/bin/python -m pytest -q" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200, "README.md is the front door: keep it to 200 lines, the rest in docs/"
