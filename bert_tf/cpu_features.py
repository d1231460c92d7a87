"""What this x86 CPU offers the inference forms: its instruction-set level and the features behind int8 and bfloat16.

    from bert_tf import cpu_features
    cpu_features.instruction_set_level()   # e.g. "AVX-512 VNNI" or "AVX2"
    cpu_features.form_cost_warning("int8")  # None where the form is fast, else one line saying why not

TensorFlow switches oneDNN on by default only on CPUs with `ONEDNN_DEFAULT_FLAGS` (AVX-512 VNNI or BF16,
AVX-VNNI, AMX); the int8 form's fast kernel needs it, and bfloat16 is computed natively only with AVX-512 BF16
or AMX (emulated, slower than float32, elsewhere). Linux reports the features in `/proc/cpuinfo`; elsewhere
every answer is "unknown" and no warning is given. Pure Python: no TensorFlow.
"""

from __future__ import annotations

import functools
import platform

# The CPU features for which TensorFlow (2.9+, x86 Linux) turns oneDNN on without TF_ENABLE_ONEDNN_OPTS.
ONEDNN_DEFAULT_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
FAST_INT8_FLAGS = ("avx512_vnni", "amx_int8")
FAST_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
# Shown in one line by `.ci/run` and beside every benchmark figure.
REPORTED_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")


@functools.cache
def cpu_flags() -> frozenset[str] | None:
    """The first CPU's feature flags from /proc/cpuinfo; None where the file is missing (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        return None
    return frozenset()


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def instruction_set_level(flags: frozenset[str] | None = None) -> str:
    """The highest level that matters here: "AMX", "AVX-512 VNNI/BF16", "AVX-512 VNNI", "AVX-512", "AVX2", ...

    Example:

    >>> instruction_set_level(frozenset({"avx2", "avx512f", "avx512_vnni"}))
    'AVX-512 VNNI'
    >>> instruction_set_level(frozenset({"avx2"}))
    'AVX2'
    """
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return "unknown"
    if "amx_tile" in flags:
        return "AMX"
    if "avx512f" in flags:
        extras = [name for name, flag in (("VNNI", "avx512_vnni"), ("BF16", "avx512_bf16")) if flag in flags]
        return "AVX-512" + (" " + "/".join(extras) if extras else "")
    if "avx2" in flags:
        return "AVX2 + AVX-VNNI" if "avx_vnni" in flags else "AVX2"
    return "below AVX2"


def form_cost_warning(form: str, flags: frozenset[str] | None = None) -> str | None:
    """One line when this CPU lacks what makes `form` ("int8", "bfloat16") faster than float32, else None.

    Example:

    >>> form_cost_warning("int8", frozenset({"avx2"})).split(":")[0]
    'int8 is not fast on this CPU (AVX2)'
    >>> form_cost_warning("int8", frozenset({"avx512f", "avx512_vnni"})) is None
    True
    """
    flags = cpu_flags() if flags is None else flags
    needs = {"int8": FAST_INT8_FLAGS, "bfloat16": FAST_BFLOAT16_FLAGS}.get(form)
    if flags is None or needs is None or any(flag in flags for flag in needs):
        return None
    wanted = "AVX-512 VNNI or AMX" if form == "int8" else "AVX-512 BF16 or AMX"
    return (
        f"{form} is not fast on this CPU ({instruction_set_level(flags)}): it needs {wanted}; here it runs "
        "at or below float32's speed (docs/distillation.md, 'What each form needs of the CPU')"
    )


def reported_flags(flags: frozenset[str] | None = None) -> str:
    """The flags of `REPORTED_FLAGS` this CPU has, space-separated (for logs and benchmark headers)."""
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return "unknown"
    return " ".join(flag for flag in REPORTED_FLAGS if flag in flags) or "none of " + " ".join(REPORTED_FLAGS)
