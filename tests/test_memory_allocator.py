"""bert_tf.memory_allocator: which jemalloc a child preloads, and that a child started with it runs on it."""

import os

import pytest

from bert_tf import memory_allocator
from bert_tf.child_process import run_in_child_process
from bert_tf.errors import BadInputError


def _mapped_libraries() -> str:
    with open("/proc/self/maps", encoding="utf-8") as f:
        return f.read()


def test_the_environment_variable_names_the_library_or_turns_it_off(tmp_path, monkeypatch):
    library = tmp_path / "libjemalloc.so.2"
    library.write_bytes(b"")
    monkeypatch.setenv(memory_allocator.ENVIRONMENT_VARIABLE, str(library))
    monkeypatch.setenv("LD_PRELOAD", "/opt/other.so")
    assert memory_allocator.find_jemalloc() == str(library)
    assert memory_allocator.releasing_allocator_environment() == {
        "LD_PRELOAD": f"{library} /opt/other.so",  # what the parent preloads stays preloaded
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1",
        "MALLOC_CONF": memory_allocator.MALLOC_CONF,
    }
    monkeypatch.setenv(memory_allocator.ENVIRONMENT_VARIABLE, "none")
    assert memory_allocator.find_jemalloc() is None
    assert memory_allocator.releasing_allocator_environment() == {}
    monkeypatch.setenv(memory_allocator.ENVIRONMENT_VARIABLE, str(tmp_path / "missing.so"))
    with pytest.raises(BadInputError, match="BERT_TF_JEMALLOC=.*missing.so: no such file"):
        memory_allocator.find_jemalloc()


def test_a_child_started_with_the_environment_runs_on_the_library_found(monkeypatch):
    monkeypatch.delenv(memory_allocator.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    library = memory_allocator.find_jemalloc()
    environment = memory_allocator.releasing_allocator_environment()
    maps = run_in_child_process(_mapped_libraries, description="maps", environment=environment)
    if library is None:  # scripts/setup.sh found none to install on this machine
        assert environment == {} and "jemalloc" not in maps
    else:
        assert os.path.realpath(library) in maps or library in maps
        assert "jemalloc" not in _mapped_libraries()  # the parent is left as it is
