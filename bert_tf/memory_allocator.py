"""jemalloc for a child process that must give its freed memory back: where to find it, and how to start one.

TensorFlow's CPU kernels (oneDNN) take their tensors from a pool that grows by regions of doubling size and
never shrinks: after its largest training step the process holds a pool larger than that step's tensors for
the rest of its life. With `TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1` they call `malloc` instead, and jemalloc,
preloaded, returns freed pages to the system after a second (`dirty_decay_ms:1000`), where glibc keeps them
in its arenas. So a child that fine-tunes and exits (the fine-tuning reference of `probe_layers`) peaks lower,
at some more time; glibc's own settings that return memory as eagerly cost more time still.

jemalloc is no Python package: `scripts/setup.sh` uses the system's library where there is one and otherwise
unpacks Debian's `libjemalloc2` into `.venv/lib/jemalloc/`. Without it, everything works the same, with the
higher peak. `BERT_TF_JEMALLOC=<path>` names another library; `BERT_TF_JEMALLOC=none` turns it off.

    from bert_tf.child_process import run_in_child_process
    from bert_tf.memory_allocator import releasing_allocator_environment

    accuracy = run_in_child_process(fine_tune, description="fine-tuning", environment=releasing_allocator_environment())

`LD_PRELOAD` acts only when a process starts, which is why this is for child processes: the parent's own
allocator cannot be changed once it runs.
"""

from __future__ import annotations

import os
import sys

from bert_tf.errors import BadInputError

ENVIRONMENT_VARIABLE = "BERT_TF_JEMALLOC"
LIBRARY_NAME = "libjemalloc.so.2"
# jemalloc's decay: freed pages go back to the system after a second (background thread), none kept "muzzy".
MALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"


def _candidates() -> list[str]:
    """Where scripts/setup.sh puts the library, then the usual system directories."""
    return [
        os.path.join(sys.prefix, "lib", "jemalloc", LIBRARY_NAME),
        f"/usr/lib/x86_64-linux-gnu/{LIBRARY_NAME}",
        f"/usr/lib/aarch64-linux-gnu/{LIBRARY_NAME}",
        f"/usr/lib64/{LIBRARY_NAME}",
        f"/usr/lib/{LIBRARY_NAME}",
        f"/usr/local/lib/{LIBRARY_NAME}",
    ]


def find_jemalloc() -> str | None:
    """The path of the jemalloc shared library to preload, or None (none found, not Linux, or turned off)."""
    chosen = os.environ.get(ENVIRONMENT_VARIABLE)
    if chosen is not None:
        if chosen.lower() in ("", "none", "off"):
            return None
        if not os.path.isfile(chosen):
            raise BadInputError(f"{ENVIRONMENT_VARIABLE}={chosen}: no such file.")
        return chosen
    if not sys.platform.startswith("linux"):
        return None  # LD_PRELOAD is the Linux loader's
    return next((path for path in _candidates() if os.path.isfile(path)), None)


def releasing_allocator_environment() -> dict[str, str]:
    """Environment variables that start a child process on jemalloc; {} where `find_jemalloc()` finds none."""
    library = find_jemalloc()
    if library is None:
        return {}
    preload = " ".join(p for p in (library, os.environ.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1", "MALLOC_CONF": MALLOC_CONF}
