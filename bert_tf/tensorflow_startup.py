"""Loads TensorFlow without its C++ start-up notes on stderr, except where they matter.

On a machine without a GPU, TensorFlow 2.21 prints "Could not find cuda
drivers", "failed call to cuInit: ... UNKNOWN ERROR (303)" and oneDNN notes
while it loads and enumerates devices. They read like failures, and
`TF_CPP_MIN_LOG_LEVEL` cannot hide them: they are logged before TensorFlow
initialises absl logging, which then ignores thresholds. So a program loads
TensorFlow once with stderr captured at the file-descriptor level and passes
on every captured line except these known notes.

Only a program that owns its process does this: every command-line tool, through
`bert_tf.cli.run`, calls `quiet_first_import()` before it loads anything else,
and the worker processes the package starts call `load_tensorflow_lean`.
`import bert_tf` changes nothing in its importer's process. `quiet_first_import()`
puts a one-shot import hook on `sys.meta_path`: whatever imports TensorFlow first
afterwards (Keras with its TensorFlow backend, `tf.data` code, tensorflow_text, a
user's own `import tensorflow`) loads it through `load_tensorflow_quietly`; the
hook then removes itself, and the `tensorflow` module is the one a plain import
would have made. So every module that needs TensorFlow may simply `import
tensorflow`, in any import order, and the package stays importable where
TensorFlow is not installed.

The CUDA lines are hidden only where they are noise: on a machine with no
NVIDIA GPU (no `/dev/nvidia<N>` device node, no `/proc/driver/nvidia/gpus/*`),
or where the user asked for the CPU (`CUDA_VISIBLE_DEVICES` empty or `-1`).
On a machine with a GPU they are passed on, and if TensorFlow then sees no GPU
(a broken driver, missing CUDA libraries, a CPU-only TensorFlow), one line
says so: the run would otherwise train on the CPU without a word. Standard
library only.
"""

import glob
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import tempfile
import threading

# The notes TensorFlow prints on every CPU-only start; anything else is passed on.
STARTUP_NOISE = re.compile(
    r"All log messages before absl::InitializeLog|oneDNN custom operations|cudart_stub|cuda_platform|cuInit|"
    r"cuda_dnn|cuda_fft|cuda_blas|Unable to register cu|computation_placer|cpu_feature_guard|"
    r"This TensorFlow binary is optimized|rebuild TensorFlow with the appropriate compiler flags|"
    r"TF-TRT Warning|Could not find cuda drivers"
)
# The part of STARTUP_NOISE that is noise on any machine (not about CUDA).
CPU_NOISE = re.compile(
    r"All log messages before absl::InitializeLog|oneDNN custom operations|cpu_feature_guard|"
    r"This TensorFlow binary is optimized|rebuild TensorFlow with the appropriate compiler flags"
)


def nvidia_gpu_nodes() -> list:
    """The NVIDIA GPUs the kernel driver shows: `/dev/nvidia<N>` device nodes, or the driver's /proc entries."""
    return sorted(glob.glob("/dev/nvidia[0-9]*")) or sorted(glob.glob("/proc/driver/nvidia/gpus/*"))


def cpu_requested(environ=None) -> bool:
    """True when `CUDA_VISIBLE_DEVICES` hides every GPU ("" or "-1"), the usual way to ask for the CPU."""
    value = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    return value is not None and value.strip() in ("", "-1")


def hide_cuda_notes(environ=None) -> bool:
    """Whether TensorFlow's CUDA start-up lines are noise here: no NVIDIA GPU, or the CPU was asked for."""
    return cpu_requested(environ) or not nvidia_gpu_nodes()


def kept_lines(captured: str, hide_cuda: bool) -> list:
    """The captured start-up lines to pass on (with their line ends)."""
    noise = STARTUP_NOISE if hide_cuda else CPU_NOISE
    return [line for line in captured.splitlines(keepends=True) if not noise.search(line)]


def unused_gpu_message(gpu_nodes, num_tensorflow_gpus: int, built_with_cuda: bool):
    """The one line for a machine whose GPU TensorFlow cannot use; None when there is nothing to say."""
    if not gpu_nodes or num_tensorflow_gpus > 0:
        return None
    reason = (
        "this TensorFlow was built without CUDA"
        if not built_with_cuda
        else "see TensorFlow's CUDA lines above (driver, CUDA libraries: pip install 'tensorflow[and-cuda]')"
    )
    return (
        f"bert_tf: warning: this machine has an NVIDIA GPU ({gpu_nodes[0]}) but TensorFlow cannot use it, "
        f"so everything runs on the CPU: {reason}. Set CUDA_VISIBLE_DEVICES=-1 to use the CPU on purpose."
    )


def load_tensorflow_quietly() -> None:
    """Imports TensorFlow and lists its devices, dropping the start-up notes that are noise from stderr.

    Does nothing when TensorFlow is already loaded, is not installed (JAX-only
    machines), or `TF_CPP_MIN_LOG_LEVEL=0` asks for everything.
    """
    if (
        "tensorflow" in sys.modules
        or os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0"
        or importlib.util.find_spec("tensorflow") is None
    ):
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    hide_cuda = hide_cuda_notes()
    message = None
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf

            # CUDA initialisation, and its notes, happen here.
            gpus = tf.config.list_physical_devices("GPU")
            if not hide_cuda:
                message = unused_gpu_message(nvidia_gpu_nodes(), len(gpus), tf.test.is_built_with_cuda())
        finally:
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
            captured.seek(0)
            for line in kept_lines(captured.read().decode("utf-8", errors="replace"), hide_cuda):
                sys.stderr.write(line)
            if message:
                sys.stderr.write(message + "\n")
            sys.stderr.flush()


class _QuietTensorFlowLoader(importlib.abc.Loader):
    """Loads `tensorflow` with `load_tensorflow_quietly` and hands the import system the module it made."""

    def __init__(self, finder):
        self._finder = finder
        self._spec = None

    def create_module(self, spec):
        # Off sys.meta_path first: the plain import of TensorFlow nested in this one (the module lock is
        # re-entrant) must not come back here.
        _remove_hook(self._finder)
        if self._finder.lean:
            load_tensorflow_lean()
        else:
            load_tensorflow_quietly()
        module = importlib.import_module("tensorflow")
        self._spec = module.__spec__
        return module

    def exec_module(self, module):
        # The import system set __spec__ to the hook's; the module keeps its own, as after a plain import.
        module.__spec__ = self._spec


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Routes the first import of `tensorflow` through the quiet loader (which then removes this finder).

    A mere look-up (`importlib.util.find_spec("tensorflow")`, which some code uses to ask whether
    TensorFlow is installed) gets a spec with TensorFlow's location and leaves the hook in place.
    """

    def __init__(self, lean: bool = False):
        self.lean = lean

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            found = finder.find_spec(name, path, target)  # an import blocker may raise ImportError here
            if found is not None:
                break
        else:
            return None  # not installed: the import fails as it would without the hook
        # TensorFlow's own location, for look-ups; the loader is the hook's.
        spec = importlib.machinery.ModuleSpec(name, _QuietTensorFlowLoader(self), origin=found.origin)
        spec.submodule_search_locations = found.submodule_search_locations
        return spec


_HOOK_LOCK = threading.Lock()


def _remove_hook(finder) -> None:
    with _HOOK_LOCK:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)


def quiet_first_import(lean: bool = False) -> None:
    """Makes the first `import tensorflow` of this process go through `load_tensorflow_quietly`.

    For a program's own process only (`bert_tf.cli.run` calls it for every tool). With `lean=True`
    TensorFlow loads through `load_tensorflow_lean`, without `OPTIONAL_PACKAGES`. Does nothing when
    TensorFlow is already loaded; with the hook already in place, `lean=True` makes it lean. Costs nothing
    at call time: TensorFlow is neither imported nor looked for.
    """
    with _HOOK_LOCK:
        if "tensorflow" in sys.modules:
            return
        for finder in sys.meta_path:
            if isinstance(finder, _QuietTensorFlowFinder):
                finder.lean = finder.lean or lean
                return
        sys.meta_path.insert(0, _QuietTensorFlowFinder(lean))


# Installed packages that `import tensorflow` imports although TensorFlow runs without them: tf.lite's
# converter imports jax, Keras (loaded by TensorFlow) its scikit-learn wrappers (with SciPy), its plots
# (matplotlib), its notebook file editor (IPython) and legacy HDF5 files (h5py). The one list of the
# packages a lean TensorFlow process keeps out.
OPTIONAL_PACKAGES = ("jax", "jaxlib", "sklearn", "scipy", "matplotlib", "IPython", "h5py")


class _OptionalPackageBlocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in OPTIONAL_PACKAGES:
            raise ModuleNotFoundError(f"{name} is not imported while TensorFlow loads", name=name)
        return None


def load_tensorflow_lean() -> None:
    """Imports TensorFlow (quietly) without `OPTIONAL_PACKAGES`: for processes that use none of them.

    Loaded, they add resident memory and start-up time to every TensorFlow process for features that a
    worker or data tool never uses. Each import guards them,
    so TensorFlow and Keras load without; what stays off in this process is what needs them at import time
    (tf.lite's JAX converter, Keras' scikit-learn wrappers, image-gallery plots and legacy HDF5 files).
    Afterwards the packages import as usual. Does nothing when TensorFlow is already loaded.
    """
    if "tensorflow" in sys.modules:
        return
    blocker = _OptionalPackageBlocker()
    sys.meta_path.insert(0, blocker)
    try:
        load_tensorflow_quietly()
        import tensorflow  # noqa: F401 (loaded above unless TF_CPP_MIN_LOG_LEVEL=0 asked for its notes)
    finally:
        sys.meta_path.remove(blocker)
