"""Loads TensorFlow without its C++ start-up notes on stderr.

On a machine without a GPU, TensorFlow 2.21 prints "Could not find cuda
drivers", "failed call to cuInit: ... UNKNOWN ERROR (303)" and oneDNN notes
while it loads and enumerates devices. They read like failures, and
`TF_CPP_MIN_LOG_LEVEL` cannot hide them: they are logged before TensorFlow
initialises absl logging, which then ignores thresholds. So the package loads
TensorFlow once with stderr captured at the file-descriptor level and passes
on every captured line except these known notes. Standard library only.
"""

import importlib.util
import os
import re
import sys
import tempfile

# The notes TensorFlow prints on every CPU-only start; anything else is passed on.
STARTUP_NOISE = re.compile(
    r"All log messages before absl::InitializeLog|oneDNN custom operations|cudart_stub|cuda_platform|cuInit|"
    r"cuda_dnn|cuda_fft|cuda_blas|Unable to register cu|computation_placer|cpu_feature_guard|"
    r"This TensorFlow binary is optimized|rebuild TensorFlow with the appropriate compiler flags|"
    r"TF-TRT Warning|Could not find cuda drivers"
)


def load_tensorflow_quietly() -> None:
    """Imports TensorFlow and lists its devices, dropping the start-up notes from stderr.

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
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # CUDA initialisation, and its notes, happen here.
        finally:
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
            captured.seek(0)
            for line in captured.read().decode("utf-8", errors="replace").splitlines(keepends=True):
                if not STARTUP_NOISE.search(line):
                    sys.stderr.write(line)
            sys.stderr.flush()
