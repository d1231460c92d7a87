"""`bert_tf.cpu_features`: the instruction-set level and the one-line warnings the tools print about a form's cost."""

import doctest

import pytest

from bert_tf import cpu_features
from tests.helpers import export_fixtures
from tests.helpers.absl_flags import run_main

AVX2 = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma"})
AVX512_VNNI = AVX2 | {"avx512f", "avx512bw", "avx512_vnni"}
ZEN4 = AVX512_VNNI | {"avx512_bf16"}
SAPPHIRE_RAPIDS = ZEN4 | {"amx_tile", "amx_int8", "amx_bf16"}


@pytest.mark.parametrize(
    "flags, level",
    [
        (AVX2, "AVX2"),
        (AVX2 | {"avx_vnni"}, "AVX2 + AVX-VNNI"),
        (AVX2 | {"avx512f"}, "AVX-512"),
        (AVX512_VNNI, "AVX-512 VNNI"),
        (ZEN4, "AVX-512 VNNI/BF16"),
        (SAPPHIRE_RAPIDS, "AMX"),
        (frozenset({"sse2"}), "below AVX2"),
        (None, "unknown"),
    ],
)
def test_instruction_set_level(flags, level, monkeypatch):
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: flags)
    assert cpu_features.instruction_set_level() == level


@pytest.mark.parametrize(
    "flags, slow_forms",
    [
        (AVX2, {"int8", "bfloat16"}),
        (AVX512_VNNI, {"bfloat16"}),
        (ZEN4, set()),
        (SAPPHIRE_RAPIDS, set()),
        (None, set()),  # not Linux: nothing known, nothing said
    ],
)
def test_form_cost_warning_names_the_form_the_level_and_what_it_needs(flags, slow_forms, monkeypatch):
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: flags)
    for form in ("float32", "int8", "bfloat16"):
        warning = cpu_features.form_cost_warning(form)
        assert (warning is not None) == (form in slow_forms), (form, warning)
        if warning:
            assert warning.startswith(f"{form} is not fast on this CPU ({cpu_features.instruction_set_level()})")
            assert ("VNNI" if form == "int8" else "BF16") in warning and "\n" not in warning


@pytest.mark.parametrize(
    "flags, policy, said",
    [
        (AVX2, "float32", "(AVX2) has no native bfloat16 (AVX-512 BF16 or AMX), so float32 is its fast choice."),
        (AVX512_VNNI, "mixed_bfloat16", "(AVX-512 VNNI) emulates bfloat16 (no AVX-512 BF16 or AMX): slower than"),
        (ZEN4, "float32", "(AVX-512 VNNI/BF16) computes bfloat16 natively: --mixed_precision=mixed_bfloat16 may be"),
        (SAPPHIRE_RAPIDS, "float32", "(AMX) computes bfloat16 natively: --mixed_precision=mixed_bfloat16 may be"),
        (SAPPHIRE_RAPIDS, "mixed_bfloat16", "(AMX) computes bfloat16 natively."),
    ],
)
def test_the_precision_note_suggests_bfloat16_only_on_a_cpu_that_computes_it_natively(flags, policy, said):
    from bert_tf.training import precision

    note = precision.precision_note(policy, flags=flags)
    assert note.startswith(f"Precision {policy} (--mixed_precision); this CPU {said}"), note
    assert ("may be faster" in note) == (flags in (ZEN4, SAPPHIRE_RAPIDS) and policy == "float32")
    assert "\n" not in note


def test_the_precision_note_off_a_cpu_or_without_its_features_says_only_the_policy(monkeypatch):
    from bert_tf.training import precision

    assert precision.precision_note("mixed_bfloat16", on_cpu=False) == "Precision mixed_bfloat16 (--mixed_precision)."
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: None)
    assert precision.precision_note("float32").endswith("(--mixed_precision); this CPU's features are unknown.")
    result = doctest.testmod(precision, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 1 and result.failed == 0


def test_reported_flags_and_this_machines_answers_agree_with_proc_cpuinfo():
    assert cpu_features.reported_flags(SAPPHIRE_RAPIDS).split() == [
        "avx2",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
        "amx_int8",
        "amx_bf16",
    ]
    assert cpu_features.reported_flags(frozenset({"sse2"})).startswith("none of avx2")
    flags = cpu_features.cpu_flags()
    if flags is not None:  # Linux
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            assert "avx2" in f.read() or "avx2" not in flags
        assert set(cpu_features.reported_flags().split()) <= set(cpu_features.REPORTED_FLAGS) | {"none", "of"}
    assert cpu_features.cpu_name()


def test_docstring_examples_run():
    result = doctest.testmod(cpu_features, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0


@pytest.mark.parametrize("flags, warned", [(AVX2, True), (SAPPHIRE_RAPIDS, False)])
def test_int8_export_warns_on_a_cpu_without_vnni_and_says_what_serving_needs(
    flags, warned, tmp_path, monkeypatch, capsys
):
    from experiments import export

    export_fixtures.write_tiny_model_dir(str(tmp_path / "model"), with_heads=False)
    monkeypatch.setattr(cpu_features, "cpu_flags", lambda: flags)
    argv = [
        f"--model_dir={tmp_path / 'model'}",
        f"--export_dir={tmp_path / 'int8'}",
        "--quantize=int8",
        "--noverify",
        "--max_seq_length=32",
    ]
    assert run_main(export, argv) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: int8 is not fast")]
    assert len(warnings) == (1 if warned else 0), captured.err[-2000:]
    assert "serving:    any CPU with TensorFlow" in captured.out
