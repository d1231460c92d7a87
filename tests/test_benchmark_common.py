"""The benchmarks' machine headers state what the machine has, not an assumption."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import _common  # noqa: E402


def _machine_line(lines):
    (machine,) = [line for line in lines if line.startswith("- Machine: ")]
    return machine


def test_the_gpu_note_follows_the_machine(monkeypatch):
    monkeypatch.setattr(_common.glob, "glob", lambda pattern: [])
    assert _common.gpu_note() == "no GPU"
    assert "no GPU" in _machine_line(_common.header_lines("cmd", "1", "1", {}, commit="abc1234"))

    monkeypatch.setattr(_common.glob, "glob", lambda pattern: ["/dev/nvidia0"] if "nvidia" in pattern else [])
    smi = types.SimpleNamespace(stdout="NVIDIA H100 80GB HBM3\n")
    monkeypatch.setattr(_common.subprocess, "run", lambda *args, **kwargs: smi)
    assert _common.gpu_note() == "1 NVIDIA GPU(s) (NVIDIA H100 80GB HBM3) present"
    machine = _machine_line(_common.header_lines("cmd", "1", "1", {"device": "cpu"}, commit="abc1234"))
    assert "NVIDIA H100" in machine and "no GPU" not in machine

    def no_smi(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(_common.subprocess, "run", no_smi)
    assert _common.gpu_note() == "1 NVIDIA GPU(s) present"


def test_the_header_names_the_commit_once(monkeypatch):
    monkeypatch.setattr(_common, "git_commit", lambda: "abc1234")
    lines = _common.header_lines("cmd", "1", "1", {"tensorflow": "2.21.0"})
    assert "- Commit: abc1234" in lines and "- Versions: tensorflow 2.21.0" in lines
    # A script that found its commit itself passes it as a version: one Commit line, no empty Versions line.
    lines = _common.header_lines("cmd", "1", "1", {"commit": "def5678"})
    assert [line for line in lines if line.startswith(("- Commit", "- Versions"))] == ["- Commit: def5678"]
    assert lines[-1] == "- Command: `cmd`"


def test_git_commit_is_this_checkouts_head():
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=_common.ROOT, timeout=30
    ).stdout.strip()
    assert _common.git_commit().split("+")[0] == (head or "unknown")


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


RESULTS_TEXT = (
    "# Benchmark results\n\nIntro, with a trailing space \n\n"
    "<!-- alpha:start -->\n## Alpha\n\nold alpha\n<!-- alpha:end -->\n\n"
    "<!-- beta:start -->\n## Beta\n\nold beta\n<!-- beta:end -->\n\nclosing notes\n"
)


def _results(tmp_path, text=RESULTS_TEXT):
    path = tmp_path / "RESULTS.md"
    path.write_bytes(text.encode("utf-8"))
    return path


def test_write_section_replaces_its_section_and_leaves_every_other_byte(tmp_path):
    path = _results(tmp_path)
    _common.write_section("alpha", "Alpha, again", ["new line 1", "new line 2"], path=str(path))
    new_block = "<!-- alpha:start -->\n## Alpha, again\n\nnew line 1\nnew line 2\n<!-- alpha:end -->\n"
    old_block = "<!-- alpha:start -->\n## Alpha\n\nold alpha\n<!-- alpha:end -->\n"
    assert path.read_bytes() == RESULTS_TEXT.replace(old_block, new_block).encode("utf-8")
    # Writing the same section again changes nothing; the other section is untouched.
    before = path.read_bytes()
    _common.write_section("alpha", "Alpha, again", ["new line 1", "new line 2"], path=str(path))
    assert path.read_bytes() == before and b"old beta" in before
    assert [p.name for p in tmp_path.iterdir()] == ["RESULTS.md"]  # no temporary file left behind


def test_write_section_appends_a_new_section_after_the_rest(tmp_path):
    path = _results(tmp_path)
    _common.write_section("gamma", "Gamma", ["| a | b |"], path=str(path))
    assert path.read_bytes() == (
        RESULTS_TEXT + "\n<!-- gamma:start -->\n## Gamma\n\n| a | b |\n<!-- gamma:end -->\n"
    ).encode("utf-8")


def test_write_section_creates_a_missing_file(tmp_path):
    path = tmp_path / "RESULTS.md"
    _common.write_section("alpha", "Alpha", ["x"], path=str(path))
    assert path.read_text(encoding="utf-8") == (
        "# Benchmark results\n\n<!-- alpha:start -->\n## Alpha\n\nx\n<!-- alpha:end -->\n"
    )


def test_write_section_keeps_windows_line_endings_elsewhere(tmp_path):
    text = "# R\r\n\r\n<!-- alpha:start -->\r\nold\r\n<!-- alpha:end -->\r\ntail\r\n"
    path = _results(tmp_path, text)
    _common.write_section("alpha", "A", ["new"], path=str(path))
    assert path.read_bytes() == b"# R\r\n\r\n<!-- alpha:start -->\n## A\n\nnew\n<!-- alpha:end -->\ntail\r\n"


def test_a_failing_write_leaves_the_file_intact(tmp_path, monkeypatch):
    path = _results(tmp_path)

    def no_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(_common.os, "replace", no_rename)
    with pytest.raises(OSError, match="disk full"):
        _common.write_section("alpha", "Alpha", ["half-written"], path=str(path))
    assert path.read_bytes() == RESULTS_TEXT.encode("utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["RESULTS.md"]


def test_the_section_writer_and_cpu_name_live_in_one_place():
    benchmarks = os.path.join(_common.ROOT, "benchmarks")
    for name in sorted(os.listdir(benchmarks)):
        if name.endswith(".py") and name != "_common.py":
            text = open(os.path.join(benchmarks, name), encoding="utf-8").read()
            assert "os.replace(" not in text and "def cpu_name" not in text and "def _cpu_name" not in text, name
    from bert_tf import cpu_features

    # Every speed figure names the CPU's instruction-set level beside its model name.
    assert _common.cpu_name().endswith(", " + cpu_features.instruction_set_level())


def test_measure_command_sees_a_childs_memory_and_fails_on_a_bad_exit():
    pytest.importorskip("psutil")  # the benchmarks' extra (ipykernel, a test dependency, brings it too)
    allocate = "import time; block = bytearray(300 * 2**20); block[::4096] = b'x' * len(block[::4096]); time.sleep(1.5)"
    result = _common.measure_command([sys.executable, "-c", allocate + "; print('done')"], timeout=60, interval=0.05)
    assert result["output"] == "done\n"
    assert result["peak_pss"] >= 300 * 2**20 and result["peak_process_rss"] >= 300 * 2**20
    with pytest.raises(RuntimeError, match="failed \\(3\\)"):
        _common.measure_command([sys.executable, "-c", "raise SystemExit(3)"], timeout=60)


def test_step_rows_summarize_each_contender_and_each_round():
    results = {
        "ours": {"step_s": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "first_step_s": [2.0, 4.0]},
        "peer": {"step_s": [], "first_step_s": []},  # failed in every round: no row
    }
    rows = _common.step_rows(results, batch_size=8, timed_steps=3)
    assert list(rows) == ["ours"]
    row = rows["ours"]
    assert row["median_step_s"] == pytest.approx(0.35) and row["sequences_per_s"] == pytest.approx(8 / 0.35)
    assert row["first_step_s"] == 3.0
    assert row["per_round"] == pytest.approx([8 / 0.2, 8 / 0.5])


def test_the_table_the_failures_and_the_comparison_lines():
    columns = [("contender", "<"), ("sequences/s", ">"), ("per round", "<")]
    assert _common.table_lines(columns, [["ours", "12.5", _common.per_round_cell([12.0, 13.04])]]) == [
        "| contender | sequences/s | per round |",
        "|---|---:|---|",
        "| ours | 12.5 | 12.0, 13.0 |",
    ]
    errors = {"ours": None, "peer": ["first\n", "Traceback ...\nValueError: boom\n"]}
    ours, peers = _common.ours_and_peers({"ours_tf": 30.0, "ours_jax": 40.0, "hf": 20.0, "keras_hub": 25.0})
    assert (ours, peers) == ({"ours_tf": 30.0, "ours_jax": 40.0}, {"hf": 20.0, "keras_hub": 25.0})
    assert _common.closing_lines(errors, ours, peers, target=1.25) == [
        "\npeer failed: `ValueError: boom`",
        "",
        "Best of ours: ours_jax, 40.0 sequences/s; fastest peer: keras_hub, 25.0; ratio 1.60x (target 1.25x).",
    ]
    assert _common.closing_lines({}, ours, {}, target=1.25) == []


def test_publish_prints_the_section_and_writes_it_only_when_asked(tmp_path, capsys):
    path = _results(tmp_path)
    _common.publish("alpha", "Alpha", ["| a |", "|---|"], write=False, path=str(path))
    assert capsys.readouterr().out == "| a |\n|---|\n" and path.read_text(encoding="utf-8") == RESULTS_TEXT
    _common.publish("alpha", "Alpha", ["| a |", "|---|"], write=True, path=str(path))
    assert capsys.readouterr().out == f"| a |\n|---|\nUpdated {path}\n"
    assert "<!-- alpha:start -->\n## Alpha\n\n| a |\n|---|\n<!-- alpha:end -->" in path.read_text(encoding="utf-8")


def test_encoder_forward_flops_counts_the_encoders_products():
    """The FLOP count behind the benchmarks' "model GFLOP/s" against the products of a real `BertEncoder`:
    2 x in x out for every dense kernel of the layers at each position, the pooler's once, and the two
    attention products (scores and context, 2 x seq x hidden each per position)."""
    import train_throughput

    from bert_tf import BertConfig, BertEncoder

    shape, seq_length = dict(L=2, H=32, A=2, I=48), 16
    config = BertConfig(
        vocab_size=50,
        hidden_size=shape["H"],
        num_hidden_layers=shape["L"],
        num_attention_heads=shape["A"],
        intermediate_size=shape["I"],
        max_position_embeddings=seq_length,
    )
    encoder = BertEncoder(config)
    encoder({k: np.ones((1, seq_length), "int32") for k in ("input_word_ids", "input_mask", "input_type_ids")})
    kernels = [v for v in encoder.weights if v.path.endswith("kernel")]
    per_position = sum(2 * v.shape[0] * v.shape[1] for v in kernels if "pooler" not in v.path)
    (pooler,) = [v for v in kernels if "pooler" in v.path]
    attention = shape["L"] * 2 * (2 * seq_length * shape["H"])
    expected = seq_length * (per_position + attention) + 2 * pooler.shape[0] * pooler.shape[1]
    assert len(kernels) == shape["L"] * 6 + 1
    assert train_throughput.encoder_forward_flops(shape, seq_length) == expected
    # BERT-Large's training step with 20 masked positions, the figure RESULTS.md's GPU tables divide by.
    assert (
        round(train_throughput.training_flops_per_sequence(train_throughput.SHAPES["bert_large"], 128, 20) / 1e9, 1)
        == 240.6
    )
