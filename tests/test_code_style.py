"""The tree keeps the project's one code style (`ruff format` and `ruff check` with ruff.toml) and its layering.

Fix a style failure with `.venv/bin/ruff format . && .venv/bin/ruff check --fix .`.

Layering: the library (`bert_tf/`) sits below the programs. Only programs (`experiments/`, `tfrecords_tools/`)
import the command-line helpers `bert_tf/cli.py`; the library's error types are in `bert_tf/errors.py` and its
vocabulary helpers in `bert_tf/tokenization/vocab.py`. Nothing in `bert_tf/` imports the programs, the tests or the
benchmarks. Inside the library the rooms keep their order: `data/` sits below `tasks/` (the examples and readers
are in `data/`) and below `pretraining_data/` (the writer), `tokenization/` below `data/`, and `jobs/` is the top
floor, which nothing else in the package imports. No two library modules import each other, directly or round a
longer circle, at module level or inside a function. No function in `bert_tf/jobs/` runs over a screen (60 lines).
"""

import ast
import os
import pathlib
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUFF = os.path.join(os.path.dirname(sys.executable), "ruff")


def _ruff(*args):
    return subprocess.run([RUFF, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_tree_is_formatted():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_passes_the_linter():
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def _imported_modules(path: pathlib.Path, package: str):
    """(line, dotted name) of every module `path` imports, anywhere in it (inside functions too).

    `from a.b import c` yields both `a.b` and `a.b.c` (c may be a module); relative imports are resolved
    against `package`, the dotted package holding `path`.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def _library_imports():
    """(file relative to the root, line, imported module) for every module under bert_tf/."""
    root = pathlib.Path(ROOT)
    for path in sorted((root / "bert_tf").rglob("*.py")):
        relative = path.relative_to(root)
        package = ".".join(relative.parent.parts)
        for line, module in _imported_modules(path, package):
            yield relative.as_posix(), line, module


def _is_within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_only_the_programs_import_the_command_line_helpers():
    # Every program is in experiments/ or tfrecords_tools/; inside the package only cli.py itself.
    allowed = ("bert_tf/cli.py",)
    offenders = [
        f"{path}:{line}: {module}"
        for path, line, module in _library_imports()
        if _is_within(module, "bert_tf.cli") and path not in allowed
    ]
    assert not offenders, "library modules import bert_tf.cli (use bert_tf.errors):\n" + "\n".join(offenders)


def test_the_library_imports_no_program_test_or_benchmark():
    above = ("experiments", "tfrecords_tools", "tests", "benchmarks")
    offenders = [
        f"{path}:{line}: {module}"
        for path, line, module in _library_imports()
        if any(_is_within(module, top) for top in above)
    ]
    assert not offenders, "bert_tf/ imports a program, a test or a benchmark:\n" + "\n".join(offenders)


# (room, the rooms it must not import, why): the rooms of the library in their order, checked by parsing imports.
ROOM_ORDER = [
    ("bert_tf/data/", ("bert_tf.tasks",), "data/ sits below tasks/: move what both need into data/"),
    (
        "bert_tf/data/",
        ("bert_tf.pretraining_data",),
        "data/ (the readers) sits below pretraining_data/ (the writer): shared names go in data/pretraining_schema.py",
    ),
    ("bert_tf/tokenization/", ("bert_tf.data",), "tokenization/ sits below data/: move what both need below both"),
    (
        "bert_tf/",
        ("bert_tf.jobs",),
        "jobs/ is the top floor: move what a lower room needs out of bert_tf/jobs/ into that room (or below it)",
    ),
]


def test_the_rooms_import_only_downwards():
    offenders = {}  # (path, line) -> message: one per import statement
    for room, forbidden, why in ROOM_ORDER:
        for path, line, module in _library_imports():
            if not path.startswith(room) or path.startswith("bert_tf/jobs/"):
                continue
            if any(_is_within(module, above) for above in forbidden):
                offenders.setdefault((path, line), f"{path}:{line}: imports {module} ({why})")
    assert not offenders, "imports against the room order:\n" + "\n".join(offenders[key] for key in sorted(offenders))


def _library_import_graph() -> dict:
    """bert_tf module -> the bert_tf modules it imports (module-level and function-level imports alike).

    `from a.b import c` is an edge to the module `a.b.c` when c is one, else to `a.b` (its `__init__`).
    """
    root = pathlib.Path(ROOT)
    files = {}
    for path in sorted((root / "bert_tf").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = {module for _, module in _imported_modules(path, package) if module in files}
        # `from a.b import c` yields a.b and a.b.c: keep only the most specific module.
        graph[name] = {m for m in imported if m != name and not any(o.startswith(m + ".") for o in imported)}
    return graph


def _import_circles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is not None:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circles_in_the_library():
    # A circle means neither module is below the other: move the shared piece into the lower one (or below both).
    # Imports inside functions count too: they hide a circle from Python's loader, not from a reader.
    circles = _import_circles(_library_import_graph())
    assert not circles, "bert_tf modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _import_circles(graph) == [["a", "b", "c"]]
    assert _import_circles({"a": {"b"}, "b": set()}) == []


def test_the_import_walk_sees_every_form_of_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import bert_tf.cli\nfrom bert_tf import cli\nfrom . import cli as c\n"
        "def f():\n    from ..cli import BadInputError\n    import experiments.finetune\n",
        encoding="utf-8",
    )
    found = {name for _, name in _imported_modules(module, "bert_tf.jobs")}
    assert {"bert_tf.cli", "bert_tf.jobs.cli", "bert_tf.cli.BadInputError", "experiments.finetune"} <= found


def _flag_definitions(paths, root):
    """{flag name: [file, ...]}: one entry per definition: a `DEFINE_*("name", ...)` call, or a key of
    `SHARED_FLAGS` (experiments/job_flags.py's table, which its `define` turns into DEFINE_ calls). A
    DEFINE_ call whose name is not a string literal is listed under "<not a literal>"."""
    found = {}
    for path in paths:
        relative = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SHARED_FLAGS" for t in node.targets):
                for key in node.value.keys:
                    found.setdefault(key.value, []).append(relative)
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "").startswith("DEFINE_"):
                name = node.args[0] if node.args else None
                literal = isinstance(name, ast.Constant) and isinstance(name.value, str)
                found.setdefault(name.value if literal else "<not a literal>", []).append(relative)
    return found


def _program_files():
    root = pathlib.Path(ROOT)
    return [path for top in ("experiments", "tfrecords_tools") for path in sorted((root / top).rglob("*.py"))], root


def test_each_flag_is_defined_once():
    found = _flag_definitions(*_program_files())
    dynamic = [path for path in found.pop("<not a literal>", []) if path != "experiments/job_flags.py"]
    assert not dynamic, f"DEFINE_ calls whose flag name is not a literal (only job_flags.define may): {dynamic}"
    twice = {name: paths for name, paths in found.items() if len(paths) > 1}
    assert not twice, (
        "flags defined in more than one place; define each once, in experiments/job_flags.py's SHARED_FLAGS, and "
        f"have the programs take it with job_flags.define: {twice}"
    )


def test_the_flag_walk_sees_literal_table_and_computed_definitions(tmp_path):
    (tmp_path / "a.py").write_text(
        'from absl import flags\nSHARED_FLAGS = {"seed": None}\n'
        'def define():\n    flags.DEFINE_integer("seed", 1, "")\n    flags.DEFINE_bool(name, 0, "")\n',
        encoding="utf-8",
    )
    (tmp_path / "b.py").write_text('def f():\n    flags.DEFINE_string("output_dir", None, "")\n', encoding="utf-8")
    found = _flag_definitions(sorted(tmp_path.glob("*.py")), tmp_path)
    assert found == {"seed": ["a.py", "a.py"], "<not a literal>": ["a.py"], "output_dir": ["b.py"]}


#: The jobs' functions read top to bottom as named steps, each under a screen.
JOB_FUNCTION_MAX_LINES = 60


def _long_functions(paths, root, max_lines: int) -> list:
    """["file:line name (N lines)"] of every function (methods and nested ones too) longer than `max_lines`,
    docstring and signature included."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > max_lines:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({lines} lines)")
    return sorted(found, key=lambda row: (row.split(":")[0], int(row.split(":")[1].split()[0])))


def test_no_job_function_is_longer_than_a_screen():
    root = pathlib.Path(ROOT)
    long = _long_functions(sorted((root / "bert_tf" / "jobs").rglob("*.py")), root, JOB_FUNCTION_MAX_LINES)
    assert not long, (
        f"functions in bert_tf/jobs over {JOB_FUNCTION_MAX_LINES} lines: split them into named steps that read "
        f"top to bottom: {long}"
    )


def test_the_length_walk_counts_every_function(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(4))
    (tmp_path / "a.py").write_text(
        f"def short():\n    pass\n\nclass C:\n    def long(self):\n{body.replace('    ', '        ')}\n"
        f"def outer():\n    def inner():\n{body.replace('    ', '        ')}",
        encoding="utf-8",
    )
    found = _long_functions([tmp_path / "a.py"], tmp_path, 3)
    assert found == ["a.py:5 long (5 lines)", "a.py:11 outer (6 lines)", "a.py:12 inner (5 lines)"]
