"""benchmarks/train_throughput.py on the JAX backend, from a model directory, with TensorFlow blocked.

The path of the GPU command at the top of the script (a machine with JAX and no TensorFlow), on CPU with a tiny
model directory and few steps: the benchmark must run, train (finite loss) and import no TensorFlow.
"""

from tests.helpers import export_fixtures, no_tensorflow, training_data

SCRIPT = str(training_data.ROOT / "benchmarks" / "train_throughput.py")


def test_jax_benchmark_runs_from_a_model_dir_without_tensorflow(tmp_path):
    model_dir = tmp_path / "model"
    export_fixtures.write_tiny_model_dir(str(model_dir), with_heads=True)
    result = no_tensorflow.run_jax_script(
        SCRIPT,
        [
            "--backends=jax",
            f"--model_dir={model_dir}",
            "--precision=mixed_bfloat16",
            "--batch_size=4",
            "--max_seq_length=32",
            "--predictions=4",
            "--warmup_steps=1",
            "--timed_steps=10",
            "--no-write",
        ],
        tmp_path / "no_tensorflow",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "FAILED" not in out and "TensorFlow was imported" not in out, out[-3000:]
    assert "(L=2, H=32), seq 32, batch 4" in out and "mixed_bfloat16" in out, out
    row = next(line for line in out.splitlines() if line.startswith("| ours JAX (jit) |"))
    assert float(row.split("|")[2]) > 0
