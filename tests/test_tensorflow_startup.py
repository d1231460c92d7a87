"""Command-line tools start without TensorFlow's CPU start-up notes, and keep real warnings."""

import os
import subprocess
import sys

from bert_tf import tensorflow_startup

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_HF = os.path.join(REPO_ROOT, "tests", "fixtures", "convert", "tiny_bert_for_pretraining")
# What TensorFlow 2.21 prints on a machine without a GPU when it loads and lists its devices.
CPU_STARTUP_LINES = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795460416.146351    2251 port.cc:153] oneDNN custom operations are on. You may see slightly",
    "I0000 00:00:1795460416.146351    2251 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will",
    "E0000 00:00:1795460421.088057    2251 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed",
    "I0000 00:00:1795460400.347212    2226 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI FMA, in other operations, rebuild TensorFlow "
    "with the appropriate compiler flags.",
]


def test_startup_filter_drops_the_cpu_notes_and_nothing_else():
    assert all(tensorflow_startup.STARTUP_NOISE.search(line) for line in CPU_STARTUP_LINES)
    for kept in (
        "W1123 12:00:00.000000 1 loop.py:10] Non-finite loss at step 3",
        "UserWarning: the vocabulary has no [MASK] token",
        "E0000 00:00:1795460421.088057 2251 op_kernel.cc:1] OOM when allocating tensor",
    ):
        assert not tensorflow_startup.STARTUP_NOISE.search(kept)


def test_a_command_line_tool_prints_no_startup_notes(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    command = [
        sys.executable,
        "-W",
        "always",
        "-c",
        "import warnings, sys; from bert_tf import convert; warnings.warn('a real warning'); "
        f"sys.argv = ['convert', '--from=hf', '--input={TINY_HF}', '--output_dir={tmp_path / 'out'}']; "
        "convert.run()",
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "bert_config.json").exists()
    assert "a real warning" in result.stderr
    for note in ("cuInit", "Could not find cuda drivers", "oneDNN custom operations", "absl::InitializeLog"):
        assert note not in result.stdout + result.stderr
