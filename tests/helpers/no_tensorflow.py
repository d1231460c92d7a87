"""Runs Python with `import tensorflow` (and tensorflow_text, _hub, _datasets, tf_keras) failing, as where it is absent.

`environment(tmp_dir, **extra)` writes a `sitecustomize.py` into `tmp_dir` that puts an import finder raising
ImportError for those names first on `sys.meta_path`, and returns an environment whose PYTHONPATH starts with
`tmp_dir` (so the blocker loads at start-up) and then the repository.
"""

import os

from tests.helpers import training_data

BLOCKER = '''
import sys


class _NoTensorFlow:
    """Fails every import of TensorFlow and its companions, as where they are not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith("tensorflow") or name.split(".")[0] == "tf_keras":
            raise ImportError(f"No module named {name!r} (blocked: this process runs without TensorFlow)")
        return None


sys.meta_path.insert(0, _NoTensorFlow())
'''


def environment(tmp_dir, **extra) -> dict:
    os.makedirs(tmp_dir, exist_ok=True)
    with open(os.path.join(tmp_dir, "sitecustomize.py"), "w", encoding="utf-8") as f:
        f.write(BLOCKER)
    env = training_data.subprocess_env(**extra)
    env["PYTHONPATH"] = str(tmp_dir) + os.pathsep + env["PYTHONPATH"]
    return env


def run_jax_script(script, args, tmp_dir, timeout=300):
    """Runs `python script *args` on the JAX backend without TensorFlow, from the repository root."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, str(script), *args],
        env=environment(str(tmp_dir), KERAS_BACKEND="jax"),
        cwd=str(training_data.ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
