#!/usr/bin/env bash
# Packed pretraining rows on one GPU: BERT-Large's JAX step (bf16, batch 512, seq 128, attention dropout 0,
# gelu_new) on all-real rows (RESULTS.md's best command), then on instances of real lengths
# (benchmarks/pretraining_lengths_128.json) packed <= K a row with cuDNN attention under the block-diagonal mask,
# the same packed rows by cuDNN's segment lengths and offsets (Hopper), and one instance a row (padding after,
# the lengths path). 10 timed steps each, one process a row; ends with one table. Stays under BUDGET_S seconds
# (a row that could not finish in what is left is skipped).
#
#   bash benchmarks/gpu_packed_pretraining.sh                    # on the GPU machine (JAX, no TensorFlow)
#   PRESET=bert_tiny BATCH=8 JAX_PLATFORMS=cpu bash benchmarks/gpu_packed_pretraining.sh   # the logic, on a CPU
#
# Keras is installed from the wheels in $WHEELS (default tmp/device_wheels: keras 3.15.1 and its pure-Python and
# cp311 dependencies, no index) when `import keras` fails. The full log goes to $OUT (or /tmp) as
# gpu_packed_pretraining.log.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
WHEELS=${WHEELS:-tmp/device_wheels}
PRESET=${PRESET:-bert_large}
BATCH=${BATCH:-512}
K=${K:-3}
WARMUP=${WARMUP:-2}
BUDGET_S=${BUDGET_S:-340}
MIN_ROW_S=${MIN_ROW_S:-50}
LOG=${OUT:-/tmp}/gpu_packed_pretraining.log
start=$(date +%s)
: >"$LOG"

if ! KERAS_BACKEND=jax "$PY" -c "import keras" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" keras safetensors >>"$LOG" 2>&1 ||
        { echo "gpu_packed_pretraining.sh: installing keras from $WHEELS failed (see $LOG)" >&2; exit 2; }
fi
export KERAS_BACKEND=jax XLA_FLAGS=${XLA_FLAGS:---xla_gpu_enable_triton_gemm=false}
{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    "$PY" -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__, jax.devices())"
} 2>&1 | tee -a "$LOG"

common=(--backends=jax "--preset=$PRESET" --precision=mixed_bfloat16 --no-write --attention_dropout=0
    --hidden_act=gelu_new "--batch_size=$BATCH" "--warmup_steps=$WARMUP" --timed_steps=10
    --packed_lengths=benchmarks/pretraining_lengths_128.json "--examples_per_row=$K")
rows=()
run_rows() {  # run_rows NAME FLAGS...: one train_throughput call; its table rows join the summary
    local name=$1 left
    shift
    left=$((BUDGET_S - $(date +%s) + start))
    if [ "$left" -lt "$MIN_ROW_S" ]; then
        echo "SKIPPED $name: ${left} s of the budget left" | tee -a "$LOG"
        return
    fi
    echo "== $name (${left} s left)" | tee -a "$LOG"
    timeout "$left" "$PY" benchmarks/train_throughput.py "${common[@]}" "$@" >"$LOG.part" 2>&1
    echo "   exit $?" | tee -a "$LOG"
    cat "$LOG.part" >>"$LOG"
    grep -E '^\[round|failed' "$LOG.part"
    header=$(grep -m1 '^| contender' "$LOG.part") && HEADER=$header
    while IFS= read -r row; do rows+=("$row"); done < <(grep '^| ours' "$LOG.part")
}

HEADER=""
run_rows "all-real rows, then packed rows (cuDNN, block-diagonal mask)" --layouts=full,packed
run_rows "packed rows (cuDNN segments)" --layouts=packed --attention=segments
run_rows "one instance a row (lengths path)" --layouts=lengths
rm -f "$LOG.part"

echo
echo "$PRESET, seq 128, batch $BATCH rows, bf16, attention dropout 0, gelu_new, $WARMUP warm-up + 10 timed steps;"
echo "sequences/s counts instances (real-length rows: lengths from benchmarks/pretraining_lengths_128.json)"
echo "$HEADER"
echo "$HEADER" | sed -E 's/[^|]+/---/g'
printf '%s\n' "${rows[@]}"
echo "total $(($(date +%s) - start)) s; log: $LOG"
