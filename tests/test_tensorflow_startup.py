"""`import bert_tf` is light and leaves its importer's process alone; a tool loads TensorFlow without its CPU start-up
notes, and real warnings stay."""

import json
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


def _run_isolated(code, env=None, timeout=300):
    """`python -I -c code` with the repository first on sys.path (no current directory, no PYTHON* variables)."""
    command = [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {REPO_ROOT!r}); {code}"]
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


# The package and its numpy-only parts; the helper processes of create_pretraining_data import the package.
LIGHT_MODULES = ("bert_tf", "bert_tf.config", "bert_tf.errors", "bert_tf.file_io", "bert_tf.tokenization.vocab")


def test_import_bert_tf_loads_neither_tensorflow_nor_keras():
    # And every module of bert_tf.pretraining_data: TensorFlow loads only when the writer tokenizes and writes.
    code = (
        "import importlib, pkgutil, bert_tf, bert_tf.pretraining_data as data; "
        "[importlib.import_module(m.name) for m in pkgutil.iter_modules(data.__path__, 'bert_tf.pretraining_data.')]; "
        f"[importlib.import_module(m) for m in {LIGHT_MODULES!r}]; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras', 'jax')); "
        "print(heavy[:5])"
    )
    result = _run_isolated(code, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]", result.stdout


# Run as a script by the test below: records every os.dup2 and sys.meta_path around `import bert_tf` and
# `import bert_tf.models` (Keras, which loads TensorFlow: the default backend).
LEAVES_THE_PROCESS_ALONE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
dup2_targets = []
real_dup2 = os.dup2
def recording_dup2(fd, fd2, *args, **kwargs):
    dup2_targets.append(fd2)
    return real_dup2(fd, fd2, *args, **kwargs)
os.dup2 = recording_dup2
def stderr_file():
    status = os.fstat(2)
    return [status.st_dev, status.st_ino]
meta_path, stderr_before = list(sys.meta_path), stderr_file()
import bert_tf
unchanged_by_package = sys.meta_path == meta_path
import bert_tf.models
print(json.dumps({
    "unchanged_by_package": unchanged_by_package,
    "tensorflow_loaded": "tensorflow" in sys.modules,
    # TensorFlow and its dependencies (absl, six) add finders of their own; none may be the package's.
    "package_finders": [type(f).__module__ for f in sys.meta_path if type(f).__module__.startswith("bert_tf")],
    "dup2_targets": dup2_targets,
    "same_stderr": stderr_file() == stderr_before,
}))
"""


def test_import_bert_tf_changes_neither_the_import_system_nor_stderr():
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")}
    command = [sys.executable, "-I", "-c", LEAVES_THE_PROCESS_ALONE, REPO_ROOT]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {
        "unchanged_by_package": True,
        "tensorflow_loaded": True,
        "package_finders": [],
        "dup2_targets": [],
        "same_stderr": True,
    }


def test_after_quiet_first_import_the_first_import_of_tensorflow_is_quiet_and_plain():
    # What bert_tf.cli.run does for every tool, and what a notebook may ask for.
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")}
    code = (
        "import importlib.util, bert_tf; "
        "from bert_tf import tensorflow_startup; "
        "tensorflow_startup.quiet_first_import(); "
        # A look-up (as model_dir does to ask whether TensorFlow is installed) keeps the hook in place.
        "assert importlib.util.find_spec('tensorflow') is not None; "
        "from bert_tf import BertConfig, BertEncoder; "  # Keras, which loads TensorFlow (the default backend)
        "import tensorflow as tf; "
        "assert not any(isinstance(f, tensorflow_startup._QuietTensorFlowFinder) for f in sys.meta_path); "
        "assert type(tf.__spec__.loader).__name__ == 'SourceFileLoader', tf.__spec__; "
        "assert tf.constant(2).numpy() == 2 and BertEncoder.__module__.startswith('bert_tf.models'); "
        "print('ok')"
    )
    result = _run_isolated(code, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"
    for note in ("cuInit", "Could not find cuda drivers", "oneDNN custom operations", "absl::InitializeLog"):
        assert note not in result.stderr, result.stderr


def test_lean_load_skips_the_optional_packages_tensorflow_would_import():
    # A plain `import tensorflow` imports jax (tf.lite), scikit-learn and matplotlib (Keras) when installed.
    # The lean hook (create_pretraining_data's) loads TensorFlow through load_tensorflow_lean (the workers').
    code = (
        "import importlib.util, json; "
        "from bert_tf.tensorflow_startup import OPTIONAL_PACKAGES, quiet_first_import; "
        "installed = [p for p in OPTIONAL_PACKAGES if importlib.util.find_spec(p)]; "
        "quiet_first_import(lean=True); import tensorflow as tf, keras; "
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & set(OPTIONAL_PACKAGES)); "
        "assert tf.constant(2).numpy() == 2; "
        "import sklearn; "  # importable afterwards
        "print(json.dumps([installed, loaded]))"
    )
    result = _run_isolated(code)
    assert result.returncode == 0, result.stderr[-3000:]
    installed, loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"jax", "sklearn"} <= set(installed)  # there was something to skip
    assert loaded == []


def test_every_tool_quiets_tensorflow_and_create_pretraining_data_loads_it_lean(monkeypatch):
    from bert_tf import cli
    from experiments import convert
    from tfrecords_tools import create_pretraining_data

    # What `run` hands over, recorded instead of done (no flags defined, no TensorFlow loaded).
    calls = []
    monkeypatch.setattr(tensorflow_startup, "quiet_first_import", lambda lean=False: calls.append(("quiet", lean)))
    monkeypatch.setattr(cli.app, "run", lambda main, argv, flags_parser: calls.append(("main", main.prog)))
    for tool in (create_pretraining_data, convert):
        monkeypatch.setattr(tool, "define_flags", lambda: None)
    create_pretraining_data.run(["create_pretraining_data"])
    convert.run(["convert"])
    assert calls == [("quiet", True), ("main", "create_pretraining_data"), ("quiet", False), ("main", "convert")]


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
        "import warnings, sys; from experiments import convert; warnings.warn('a real warning'); "
        f"sys.argv = ['convert', '--from=hf', '--input={TINY_HF}', '--output_dir={tmp_path / 'out'}']; "
        "convert.run()",
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "bert_config.json").exists()
    assert "a real warning" in result.stderr
    for note in ("cuInit", "Could not find cuda drivers", "oneDNN custom operations", "absl::InitializeLog"):
        assert note not in result.stdout + result.stderr


# What TensorFlow 2.21 prints on a machine with an NVIDIA GPU it cannot use (no CUDA libraries installed).
GPU_UNUSABLE_LINES = [
    "W0000 00:00:1795460416.146351    2251 gpu_device.cc:2365] Cannot dlopen some GPU libraries. Please make sure "
    "the missing libraries mentioned above are installed properly. Skipping registering GPU devices...",
    "E0000 00:00:1795460421.088057    2251 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: CUDA_ERROR_NO_DEVICE",
]


def test_cuda_lines_are_hidden_only_without_a_gpu_or_when_the_cpu_was_asked_for(monkeypatch):
    captured = "".join(line + "\n" for line in CPU_STARTUP_LINES + GPU_UNUSABLE_LINES + ["a real warning"])
    monkeypatch.setattr(tensorflow_startup, "nvidia_gpu_nodes", lambda: [])
    assert tensorflow_startup.hide_cuda_notes({})
    assert tensorflow_startup.kept_lines(captured, hide_cuda=True) == [GPU_UNUSABLE_LINES[0] + "\n", "a real warning\n"]

    monkeypatch.setattr(tensorflow_startup, "nvidia_gpu_nodes", lambda: ["/dev/nvidia0"])
    assert not tensorflow_startup.hide_cuda_notes({})
    assert not tensorflow_startup.hide_cuda_notes({"CUDA_VISIBLE_DEVICES": "0"})
    assert tensorflow_startup.hide_cuda_notes({"CUDA_VISIBLE_DEVICES": "-1"})
    assert tensorflow_startup.hide_cuda_notes({"CUDA_VISIBLE_DEVICES": ""})
    kept = tensorflow_startup.kept_lines(captured, hide_cuda=False)
    # With a GPU, every CUDA line is passed on; only the notes that are noise on any machine are dropped.
    assert [line.rstrip("\n") for line in kept] == [
        CPU_STARTUP_LINES[2],
        CPU_STARTUP_LINES[3],
        *GPU_UNUSABLE_LINES,
        "a real warning",
    ]


def test_one_line_says_when_tensorflow_cannot_use_the_gpu():
    message = tensorflow_startup.unused_gpu_message(["/dev/nvidia0"], 0, built_with_cuda=True)
    assert message.startswith("bert_tf: warning: this machine has an NVIDIA GPU (/dev/nvidia0) but TensorFlow")
    assert "\n" not in message and "runs on the CPU" in message
    assert "built without CUDA" in tensorflow_startup.unused_gpu_message(["/dev/nvidia0"], 0, built_with_cuda=False)
    assert tensorflow_startup.unused_gpu_message(["/dev/nvidia0"], 1, built_with_cuda=True) is None
    assert tensorflow_startup.unused_gpu_message([], 0, built_with_cuda=True) is None


# Loads tensorflow_startup by its path (apart from the package and its import hook), pretends the
# machine has an NVIDIA GPU, and loads TensorFlow through it.
PRETEND_A_GPU = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tensorflow_startup", sys.argv[1])
startup = importlib.util.module_from_spec(spec)
spec.loader.exec_module(startup)
startup.nvidia_gpu_nodes = lambda: ["/dev/nvidia0"]
startup.load_tensorflow_quietly()
"""


def _load_with_a_pretended_gpu(**env):
    environ = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES")}
    path = os.path.join(REPO_ROOT, "bert_tf", "tensorflow_startup.py")
    result = subprocess.run(
        [sys.executable, "-c", PRETEND_A_GPU, path],
        cwd=REPO_ROOT,
        env=dict(environ, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def test_a_gpu_tensorflow_cannot_use_is_reported_in_one_line():
    # A device that does not exist: TensorFlow finds no GPU, on this machine as on one with a GPU,
    # like a broken driver would leave it. The CUDA lines are passed on, with one line that says so.
    stderr = _load_with_a_pretended_gpu(CUDA_VISIBLE_DEVICES="99")
    warnings = [line for line in stderr.splitlines() if line.startswith("bert_tf: warning:")]
    assert len(warnings) == 1 and "NVIDIA GPU (/dev/nvidia0) but TensorFlow cannot use it" in warnings[0], stderr
    assert "cuInit" in stderr or "GPU" in stderr.replace(warnings[0], "")
    assert "oneDNN custom operations" not in stderr


def test_asking_for_the_cpu_on_a_gpu_machine_stays_quiet():
    stderr = _load_with_a_pretended_gpu(CUDA_VISIBLE_DEVICES="-1")
    assert "bert_tf: warning" not in stderr and "cuInit" not in stderr and "cuda" not in stderr.lower(), stderr
