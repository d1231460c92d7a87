"""benchmarks/student_inference_jax.py on CPU with TensorFlow blocked: the GPU machine's path (JAX, no TensorFlow)."""

import sys

import pytest

from tests.helpers import no_tensorflow, training_data

SCRIPT = str(training_data.ROOT / "benchmarks" / "student_inference_jax.py")


def test_times_each_depth_and_precision_without_tensorflow(tmp_path):
    result = no_tensorflow.run_jax_script(
        SCRIPT,
        [
            "--layers=2,1",
            "--precisions=float32,mixed_bfloat16",
            "--batch_size=2",
            "--max_seq_length=16",
            "--warmup_steps=1",
            "--timed_steps=10",
            "--no-write",
        ],
        tmp_path / "no_tensorflow",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [
        line.split("|")[1:-1] for line in result.stdout.splitlines() if line.startswith("| ") and "layers" not in line
    ]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("2", "float32"),
        ("1", "float32"),
        ("2", "mixed_bfloat16"),
        ("1", "mixed_bfloat16"),
    ]
    assert rows[0][3].strip() == "1.00x" and all(float(r[2].replace(",", "")) > 0 for r in rows)


def test_bad_layers_flag_exits_2(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(training_data.ROOT / "benchmarks"))
    import student_inference_jax

    monkeypatch.setattr(sys, "argv", [SCRIPT, "--layers=3,a", "--no-write"])
    with pytest.raises(SystemExit) as exit_info:
        student_inference_jax.main()
    assert exit_info.value.code == 2
    assert "--layers" in capsys.readouterr().err.strip().splitlines()[-1]
