"""bert_tf.lazy_namespace: names load on first use, and a name cannot also be a submodule's."""

import importlib
import sys

import pytest


def _package(root, name, init, **modules):
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text(init)
    for module, text in modules.items():
        (package / f"{module}.py").write_text(text)
    return package


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("lazy_fixture")]:
        del sys.modules[name]


def test_a_name_loads_its_module_on_first_use(on_path):
    _package(
        on_path,
        "lazy_fixture_ok",
        "from bert_tf.lazy_namespace import lazy_names\n"
        "__getattr__, __dir__ = lazy_names(__name__, {'answer': 'lazy_fixture_ok.numbers'})\n",
        numbers="answer = 42\n",
    )
    package = importlib.import_module("lazy_fixture_ok")
    assert "lazy_fixture_ok.numbers" not in sys.modules and "answer" in dir(package)
    assert package.answer == 42 and "lazy_fixture_ok.numbers" in sys.modules
    with pytest.raises(AttributeError, match="no attribute 'other'"):
        package.other  # noqa: B018


def test_a_name_that_is_also_a_submodule_is_refused(on_path):
    # `import pkg.helper` would set pkg.helper to the module, so `pkg.helper` would depend on import order.
    _package(
        on_path,
        "lazy_fixture_clash",
        "from bert_tf.lazy_namespace import lazy_names\n"
        "__getattr__, __dir__ = lazy_names(__name__, {'helper': 'lazy_fixture_clash.helper'})\n",
        helper="def helper():\n    return 1\n",
    )
    with pytest.raises(ImportError, match="lazy_fixture_clash: helper names both an exported object and a submodule"):
        importlib.import_module("lazy_fixture_clash")


def test_no_package_of_bert_tf_exports_a_submodule_name():
    import pkgutil

    import bert_tf

    packages = [m.name for m in pkgutil.walk_packages(bert_tf.__path__, "bert_tf.") if m.ispkg]
    assert "bert_tf.jobs" in packages
    for name in packages:
        importlib.import_module(name)  # lazy_names raises ImportError on a clash
