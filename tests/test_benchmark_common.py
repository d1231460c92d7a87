"""The benchmarks' machine headers state what the machine has, not an assumption."""

import os
import subprocess
import sys
import types

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import _common  # noqa: E402


def test_the_gpu_note_follows_the_machine(monkeypatch):
    monkeypatch.setattr(_common.glob, "glob", lambda pattern: [])
    assert _common.gpu_note() == "no GPU"
    assert "no GPU" in _common.header_lines("cmd", "1", "1", {})[1]

    monkeypatch.setattr(_common.glob, "glob", lambda pattern: ["/dev/nvidia0"] if "nvidia" in pattern else [])
    smi = types.SimpleNamespace(stdout="NVIDIA H100 80GB HBM3\n")
    monkeypatch.setattr(_common.subprocess, "run", lambda *args, **kwargs: smi)
    assert _common.gpu_note() == "1 NVIDIA GPU(s) (NVIDIA H100 80GB HBM3) present"
    machine = _common.header_lines("cmd", "1", "1", {"device": "cpu"})[1]
    assert "NVIDIA H100" in machine and "no GPU" not in machine

    def no_smi(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(_common.subprocess, "run", no_smi)
    assert _common.gpu_note() == "1 NVIDIA GPU(s) present"


def test_model_garden_version_comes_from_the_installed_package(monkeypatch):
    from importlib import metadata

    versions = {"tf-models-official": "2.19.1"}

    def version(name):
        if name not in versions:
            raise metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(metadata, "version", version)
    assert _common.tensorflow_models_version(types.SimpleNamespace()) == "2.19.1"
    versions.clear()
    assert _common.tensorflow_models_version(types.SimpleNamespace()) == "unknown"


@pytest.mark.parametrize("script", ["create_pretraining_data_speed.py", "tokenizer_throughput.py"])
def test_no_benchmark_writes_a_fixed_gpu_claim(script):
    path = os.path.join(_common.ROOT, "benchmarks", script)
    text = open(path, encoding="utf-8").read()
    assert "no GPU" not in text and "gpu_note()" in text
    assert subprocess.run([sys.executable, path, "--help"], capture_output=True, timeout=120).returncode == 0
