r"""BERT pretraining-step throughput (MLM + NSP): ours and, with --peers, the implementations users pick instead.

    python benchmarks/train_throughput.py                    # ours: TF backend (XLA off, on), JAX if installed
    python benchmarks/train_throughput.py --peers --rounds=2 # + HF/PyTorch, keras-hub, Model Garden, interleaved
    python benchmarks/train_throughput.py --preset=bert_tiny --timed_steps=10 --no-write
    # On a GPU machine with JAX and without TensorFlow (bf16; keras, numpy, safetensors, absl-py installed;
    # `--model_dir=DIR` starts from a model directory's weights.safetensors instead of random weights):
    KERAS_BACKEND=jax python benchmarks/train_throughput.py --backends=jax --preset=bert_large --batch_size=128 \
        --precision=mixed_bfloat16 --no-write
    # The JAX child's model switches (with --preset): --attention_dropout=0 lets cuDNN's fused attention run,
    # --hidden_dropout, --hidden_act=gelu_new, --attention=einsum keeps the unfused attention; --profile_dir=DIR
    # traces 3 more steps and prints the GPU kernel time per step by kind and the top kernels.
    # --packed_lengths=benchmarks/pretraining_lengths_128.json adds rows of instances of real lengths, one a row
    # and packed (`BertPretrainer(examples_per_row=k)`); --attention=segments: packed rows by cuDNN's segments.

What is measured: one optimizer step (forward, backward, global-norm clipping at 1.0, AdamW with weight
decay 0.01) on synthetic batches already in memory (random token ids, all tokens real, `--predictions`
masked positions, random NSP labels), dropout 0.1, exact GELU, float32 unless --precision, which every
contender applies its own way (Keras/tf_keras dtype policies, PyTorch CPU autocast). Every contender runs in a
fresh process; it takes `--warmup_steps` untimed steps (the first one traces/compiles: reported apart as
"first step s"), then `--timed_steps` steps each timed on its own with the result fetched; the figure is
the median step. With --rounds=N the contender list runs N times in turn (A B C A B C), and each
contender's figure is the median over all its timed steps.

Contenders:
- ours, TF backend: `bert_tf.training.train` (the loop `experiments/pretrain.py` and the demo use),
  one_device strategy, steps_per_loop=1, XLA off and on; a step is timed as the peers' are, by the wall
  clock from the end of one step to the end of the next (`loop_callback`), so the loop's per-step work
  (metrics to the host, progress line, summaries) is inside it; the first step from the loop's timer.
- ours, JAX backend (where JAX is installed): the same `BertPretrainer` and `pretraining_losses` under
  `model.stateless_call` in one jitted step with the same AdamW (written below; `bert_tf.training` is
  TensorFlow-only). Imports no TensorFlow (tests/test_train_throughput_jax.py runs it with TensorFlow
  blocked). With `--model_dir`, the model is read from that directory (`load_pretrainer`, or
  `load_encoder` with new heads) and its config replaces `--preset`.
- --peers, each in its own venv under --peer_dir, created from PyPI on first use:
  HuggingFace transformers `BertForPreTraining` on PyTorch (eager, torch.optim.AdamW), with MLM logits
  at the masked positions only ("hf_masked": `model.bert` + gather + `model.cls`), and as users usually
  run it, with labels at every position ("hf_labels", -100 where not masked);
  keras-hub `BertMaskedLM` (Keras 3, TF backend, `train_on_batch`, XLA off and on; MLM only: keras-hub
  has no NSP head; compiled without its default weighted accuracy, and with the exact GELU swapped in for
  its backbone's tanh approximation, `use_exact_gelu`);
  TF Model Garden `BertPretrainerV2` (tf-models-official 2.20, tf_keras, its `create_optimizer` AdamW,
  which clips the global norm itself, so the step does not clip again; a `tf.function` step, XLA off and on).
What remains different: keras-hub trains no NSP head; "hf_labels" computes MLM logits at every position
(its users' usual way; "hf_masked" does the same work as ours); ours computes MLM and NSP accuracies with
the loss (the peers compute the loss alone).

Model FLOP/s: training FLOPs per sequence = 3 x forward FLOPs (the backward pass costs twice the
forward), counting only matrix products (2 FLOPs per multiply-add):
    forward = L * S * (8 H^2 + 4 H I + 4 S H)        per layer: Q, K, V, output projections; FFN; QK^T and PV
            + P * (2 H^2 + 2 H V)                     MLM transform + vocabulary projection at P positions
            + 2 H^2 + 4 H                             pooler + NSP
(L layers, S sequence length, H hidden, I intermediate, V vocabulary, P masked positions; with
hf_labels the MLM term uses S instead of P, but the figure counts the useful work, P.) It is reported as a
fraction of the machine's float32 matmul rate, measured in the same run as the best of TensorFlow's and
(with --peers) PyTorch's 2048x2048x2048 matmul.

The table goes to stdout and, unless --no-write, into the `train_throughput` section of
benchmarks/RESULTS.md with date, CPU, load average, versions and the command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common

SCRIPT = os.path.abspath(__file__)
SECTION = "train_throughput"

# (label, venv: None = ours, child kind, extra child flags)
OURS_TF = [("ours TF", None, "ours_tf", ["--xla=0"]), ("ours TF+XLA", None, "ours_tf", ["--xla=1"])]
# The JAX child's rows (--layout): all tokens real, and with --packed_lengths, instances of real lengths.
JAX_LAYOUTS = {
    "full": "ours JAX (jit)",
    "lengths": "ours JAX, real lengths, one a row",
    "packed": "ours JAX, real lengths, packed <= {k} a row",
}
PEERS = [
    ("HF torch, logits at masked positions", "hf_torch", "hf", ["--hf_mode=masked"]),
    ("HF torch, labels at every position", "hf_torch", "hf", ["--hf_mode=labels"]),
    ("keras-hub BertMaskedLM", "keras_hub", "keras_hub", ["--xla=0"]),
    ("keras-hub BertMaskedLM +XLA", "keras_hub", "keras_hub", ["--xla=1"]),
    ("Model Garden BertPretrainerV2", "tf_models", "model_garden", ["--xla=0"]),
    ("Model Garden BertPretrainerV2 +XLA", "tf_models", "model_garden", ["--xla=1"]),
]
MATMUL = [(None, "matmul_tf"), ("hf_torch", "matmul_torch")]

# bert_tf.config.PRESETS, repeated so that peers (which cannot import bert_tf) build the same shapes.
SHAPES = {
    "bert_tiny": dict(L=2, H=128, A=2, I=512),
    "bert_mini": dict(L=4, H=256, A=4, I=1024),
    "bert_small": dict(L=4, H=512, A=8, I=2048),
    "bert_medium": dict(L=8, H=512, A=8, I=2048),
    "bert_base": dict(L=12, H=768, A=12, I=3072),
    "bert_large": dict(L=24, H=1024, A=16, I=4096),
}
VOCAB = 30522


def encoder_forward_flops(shape: dict, seq_length: int) -> float:
    """The encoder's forward matmul FLOPs per sequence, pooler included (the module docstring's first and last
    terms, without NSP)."""
    L, H, I, S = shape["L"], shape["H"], shape["I"], seq_length
    return float(L * S * (8 * H * H + 4 * H * I + 4 * S * H) + 2 * H * H)


def training_flops_per_sequence(shape: dict, seq_length: int, predictions: int, vocab: int = VOCAB) -> float:
    """3 x the forward matmul FLOPs; see the module docstring for the formula."""
    H, P = shape["H"], predictions
    return 3.0 * (encoder_forward_flops(shape, seq_length) + P * (2 * H * H + 2 * H * vocab) + 4 * H)


# The peers' models, one constructor each for both benchmarks: BERT's shapes, vocabulary, 512 positions,
# 2 segments, exact GELU and dropout 0.1 (each library's default; a forward with training=False skips it).


def hf_bert_config(transformers, preset: str):
    shape = SHAPES[preset]
    return transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=shape["H"],
        num_hidden_layers=shape["L"],
        num_attention_heads=shape["A"],
        intermediate_size=shape["I"],
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
    )


def use_exact_gelu(backbone, keras):
    """Swaps keras-hub's tanh-approximated GELU (its BertBackbone's choice) for BERT's exact one, in place.

    The feed-forward Dense layers read `activation` at call time, so the functional backbone then runs the
    exact GELU that ours, HF (`hidden_act="gelu"`) and Model Garden use.
    """
    exact = lambda x: keras.activations.gelu(x, approximate=False)  # noqa: E731
    for layer in backbone.transformer_layers:
        layer.activation = exact
        layer._feedforward_intermediate_dense.activation = exact
    return backbone


def keras_hub_backbone(keras_hub, preset: str):
    """keras-hub's BertBackbone of `preset`'s shape, with the exact GELU (`use_exact_gelu`)."""
    import keras

    shape = SHAPES[preset]
    return use_exact_gelu(_keras_hub_bert_backbone(keras_hub, shape), keras)


def _keras_hub_bert_backbone(keras_hub, shape: dict):
    return keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=shape["L"],
        num_heads=shape["A"],
        hidden_dim=shape["H"],
        intermediate_dim=shape["I"],
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
    )


def keras_hub_inputs(batch: dict, tf) -> dict:
    """keras-hub's input names for a batch of `synthetic_batch`'s (or the inference benchmark's) arrays."""
    return {
        "token_ids": tf.constant(batch["input_word_ids"]),
        "segment_ids": tf.constant(batch["input_type_ids"]),
        "padding_mask": tf.constant(batch["input_mask"].astype(bool)),
    }


def model_garden_encoder(networks, tf, preset: str):
    shape = SHAPES[preset]
    return networks.BertEncoderV2(
        vocab_size=VOCAB,
        hidden_size=shape["H"],
        num_layers=shape["L"],
        num_attention_heads=shape["A"],
        inner_dim=shape["I"],
        inner_activation=lambda x: tf.keras.activations.gelu(x, approximate=False),
        output_dropout=0.1,
        attention_dropout=0.1,
        max_sequence_length=512,
        type_vocab_size=2,
    )


def model_shape(args) -> tuple[dict, int]:
    """(shape, vocabulary size): `--model_dir`'s bert_config.json, else `--preset`'s."""
    if not getattr(args, "model_dir", None):
        return SHAPES[args.preset], VOCAB
    with open(os.path.join(args.model_dir, "bert_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    shape = dict(
        L=config["num_hidden_layers"],
        H=config["hidden_size"],
        A=config["num_attention_heads"],
        I=config["intermediate_size"],
    )
    return shape, config["vocab_size"]


def synthetic_batch(args, np, vocab: int = VOCAB):
    """The batch every contender trains on (same numbers everywhere), as numpy arrays."""
    rng = np.random.default_rng(0)
    B, S, P = args.batch_size, args.max_seq_length, args.predictions
    low = min(1000, vocab // 2)
    positions = np.sort(np.stack([rng.choice(np.arange(1, S), P, replace=False) for _ in range(B)]), -1)
    return {
        "input_word_ids": rng.integers(low, vocab, (B, S)).astype("int32"),
        "input_mask": np.ones((B, S), "int32"),
        "input_type_ids": np.broadcast_to(np.arange(S) >= S // 2, (B, S)).astype("int32").copy(),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(low, vocab, (B, P)).astype("int32"),
        "masked_lm_weights": np.ones((B, P), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (B,)).astype("int32"),
    }


def read_length_histogram(path: str) -> dict:
    """{instance length: count} from a JSON such as benchmarks/pretraining_lengths_128.json."""
    with open(path, encoding="utf-8") as f:
        counts = json.load(f)["counts_by_length"]
    return {int(length): int(count) for length, count in counts.items()}


def greedy_rows(lengths, seq_length: int, max_examples: int, rows_wanted: int, open_rows: int = 64) -> list:
    """The first `rows_wanted` rows of instance lengths, packed greedily in the order drawn: each instance goes to
    the oldest open row with room for it and fewer than `max_examples` instances, else opens a new row; only the
    `open_rows` newest rows take instances (a streaming packer's bounded window). Rows come in the order they were
    opened, and only rows no later instance could still join are returned."""
    rows, open_indices = [], []
    for length in lengths:
        for index in open_indices:
            if sum(rows[index]) + length <= seq_length and len(rows[index]) < max_examples:
                rows[index].append(length)
                break
        else:
            rows.append([length])
            open_indices = (open_indices + [len(rows) - 1])[-open_rows:]
        if len(rows) >= rows_wanted + open_rows:
            return rows[:rows_wanted]
    raise ValueError(f"{len(lengths)} instances fill fewer than {rows_wanted} closed rows")


def length_batch(args, np, vocab: int = VOCAB, packed: bool = False):
    """(batch, instances, real tokens) of rows of instances whose lengths follow `--packed_lengths`.

    Unpacked: one instance a row, padding after its tokens (the lengths path of the attention). Packed: rows
    from `greedy_rows` with at most `--examples_per_row` instances, `input_example_ids` and one next-sentence
    label a slot (-1: empty). Each instance: [CLS] first, its second half of type 1, round(15%) of its tokens
    masked (at most `--predictions`); a packed row has `--predictions` + k prediction slots (0-weight padding).
    """
    rng = np.random.default_rng(0)
    histogram = read_length_histogram(args.packed_lengths)
    lengths = np.array(sorted(histogram))
    weights = np.array([histogram[length] for length in lengths], "float64")
    B, S, K = args.batch_size, args.max_seq_length, args.examples_per_row if packed else 1
    drawn = rng.choice(lengths, size=(B + 64) * K, p=weights / weights.sum()).tolist()
    rows = greedy_rows(drawn, S, K, B) if packed else [[length] for length in drawn[:B]]
    P = args.predictions + (K if packed else 0)
    low = min(1000, vocab // 2)
    batch = {
        "input_word_ids": rng.integers(low, vocab, (B, S)).astype("int32"),
        "input_mask": np.zeros((B, S), "int32"),
        "input_type_ids": np.zeros((B, S), "int32"),
        "input_example_ids": np.zeros((B, S), "int32"),
        "masked_lm_positions": np.zeros((B, P), "int32"),
        "masked_lm_ids": rng.integers(low, vocab, (B, P)).astype("int32"),
        "masked_lm_weights": np.zeros((B, P), "float32"),
        "next_sentence_labels": np.full((B, K), -1, "int32"),
    }
    for r, row in enumerate(rows):
        start, positions = 0, []
        for slot, length in enumerate(row):
            batch["input_word_ids"][r, start] = 101  # [CLS]
            batch["input_mask"][r, start : start + length] = 1
            batch["input_type_ids"][r, start + length // 2 : start + length] = 1
            batch["input_example_ids"][r, start : start + length] = slot + 1
            batch["next_sentence_labels"][r, slot] = rng.integers(0, 2)
            count = min(args.predictions, max(1, round(0.15 * length)), length - 1)
            positions += sorted(start + int(p) for p in rng.choice(np.arange(1, length), count, replace=False))
            start += length
        positions = positions[:P]
        batch["masked_lm_positions"][r, : len(positions)] = positions
        batch["masked_lm_weights"][r, : len(positions)] = 1.0
    if not packed:
        del batch["input_example_ids"]
        batch["next_sentence_labels"] = batch["next_sentence_labels"][:, 0]
    return batch, sum(len(row) for row in rows), int(batch["input_mask"].sum())


def _time_steps(step, args, sync=lambda x: x):
    """Runs warm-up then timed steps; `step()` returns something `sync` waits on."""
    first = None
    for i in range(args.warmup_steps):
        start = time.perf_counter()
        sync(step())
        if i == 0:
            first = time.perf_counter() - start
    times = []
    for _ in range(args.timed_steps):
        start = time.perf_counter()
        sync(step())
        times.append(time.perf_counter() - start)
    return {"step_s": times, "first_step_s": first}


# --- children -------------------------------------------------------------------------------------


def child_ours_tf(args):
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import tempfile

    import keras
    import numpy as np
    import tensorflow as tf

    from bert_tf import BertConfig, BertEncoder, BertPretrainer, pretraining_losses, training

    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    config = BertConfig.from_preset(args.preset)
    batch = synthetic_batch(args, np)

    def dataset_fn(input_context):
        return tf.data.Dataset.from_tensors(batch).repeat()

    step_seconds, step_end_times = [], []

    def record(step, metrics):
        # The first step's own time (trace, compile) from the loop; every step after it as the peers' are
        # timed: wall-clock time from the end of one step to the end of the next, so the loop's per-step
        # work (metrics to the host, the progress line, summaries) is inside it.
        step_end_times.append(time.perf_counter())
        step_seconds.append(args.batch_size / metrics["examples_per_second"])

    steps = args.warmup_steps + args.timed_steps
    loop_config = training.TrainingConfig(
        num_train_steps=steps,
        learning_rate=1e-4,
        num_warmup_steps=1,
        steps_per_loop=1,
        save_checkpoints_steps=10**9,
    )
    with tempfile.TemporaryDirectory() as model_dir:
        training.train(
            training.get_strategy("one_device"),
            lambda: BertPretrainer(BertEncoder(config)),
            pretraining_losses,
            dataset_fn,
            model_dir,
            loop_config,
            loop_callback=record,
            jit_compile=args.xla == "1",
        )
    wall = [end - start for start, end in zip(step_end_times[:-1], step_end_times[1:])]
    return {
        "step_s": wall[args.warmup_steps - 1 :],
        "first_step_s": step_seconds[0],
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
    }


def child_ours_jax(args):
    os.environ["KERAS_BACKEND"] = "jax"
    import functools
    import re

    import jax
    import jax.numpy as jnp
    import keras
    import numpy as np

    from bert_tf import BertConfig, BertEncoder, BertPretrainer, pretraining_losses

    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    if args.attention == "einsum":
        from bert_tf.layers import attention

        attention.fused_attention_available = lambda: False
    if args.attention == "segments":  # packed rows: cuDNN reads segment lengths and offsets, not the bias
        from bert_tf.layers import attention

        def over_segments(query, key, value, attention_bias, implementation=None):
            return attention.attention_over_segments(query, key, value, attention_bias, args.examples_per_row + 1)

        attention._attention_over_blocks = over_segments
    preset_overrides = dict(
        hidden_dropout_prob=args.hidden_dropout,
        attention_probs_dropout_prob=args.attention_dropout,
        hidden_act=args.hidden_act,
    )
    if args.model_dir:
        from bert_tf.checkpoints import load_encoder, load_pretrainer, weights_file

        if weights_file.has_pretraining_heads(args.model_dir):
            model = load_pretrainer(args.model_dir)
        else:
            model = BertPretrainer(load_encoder(args.model_dir))
        config = model.encoder.config
    else:
        config = BertConfig.from_preset(args.preset, **preset_overrides)
        packed = args.layout == "packed"
        model = BertPretrainer(BertEncoder(config), examples_per_row=args.examples_per_row if packed else None)
    if args.layout == "full":
        batch = synthetic_batch(args, np, config.vocab_size)
        examples, real_tokens = args.batch_size, args.batch_size * args.max_seq_length
    else:
        batch, examples, real_tokens = length_batch(args, np, config.vocab_size, packed=args.layout == "packed")
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    inputs = {name: batch[name] for name in model.input}
    # bert_tf.training.optimization's rule: no decay for LayerNorm and bias variables.
    decay = [not re.search("layer_norm|LayerNorm|bias", v.path) for v in model.trainable_variables]
    beta_1, beta_2, epsilon, rate, clip = 0.9, 0.999, 1e-6, 0.01, 1.0

    def loss_fn(trainable, non_trainable):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable, inputs, training=True)
        return pretraining_losses(batch, outputs)["loss"], non_trainable

    # The weights, seed states and moments are donated: each step updates them in place (no second copy).
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2, 3))
    def train_step(trainable, non_trainable, m, v, lr):
        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable, non_trainable)
        norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32))) for g in grads))
        scale = jnp.minimum(1.0, clip / jnp.maximum(norm, 1e-12))
        new_t, new_m, new_v = [], [], []
        for w, g, mi, vi, d in zip(trainable, grads, m, v, decay):
            g = g * scale
            mi = beta_1 * mi + (1 - beta_1) * g
            vi = beta_2 * vi + (1 - beta_2) * g * g
            update = mi / (jnp.sqrt(vi) + epsilon) + (rate * w if d else 0.0)
            new_t.append(w - lr * update)
            new_m.append(mi)
            new_v.append(vi)
        return new_t, non_trainable, new_m, new_v, loss

    state = {"t": [v.value for v in model.trainable_variables], "n": [v.value for v in model.non_trainable_variables]}
    state["m"] = [jnp.zeros_like(w) for w in state["t"]]
    state["v"] = [jnp.zeros_like(w) for w in state["t"]]

    def step():
        state["t"], state["n"], state["m"], state["v"], loss = train_step(
            state["t"], state["n"], state["m"], state["v"], jnp.float32(1e-4)
        )
        return loss

    result = _time_steps(step, args, sync=lambda x: x.block_until_ready())
    if args.profile_dir:
        with jax.profiler.trace(args.profile_dir, create_perfetto_trace=True):
            for _ in range(PROFILED_STEPS):
                step().block_until_ready()
        result["profile"] = kernel_time_summary(args.profile_dir, PROFILED_STEPS)
    result["versions"] = {"jax": jax.__version__, "keras": keras.__version__}
    result["device"] = str(jax.devices()[0].device_kind)
    result["examples_per_step"], result["real_tokens_per_step"] = examples, real_tokens
    result["final_loss"] = float(step())
    result["tensorflow_imported"] = any(m.split(".")[0] == "tensorflow" for m in sys.modules)
    return result


PROFILED_STEPS = 3
# Kernel-name patterns, first match wins: what share of a GPU step each kind of work takes.
KERNEL_KINDS = (
    ("attention (cuDNN)", ("cudnn", "fmha", "flash", "sdpa")),
    ("matrix products", ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "sm80_", "cublas", "triton_gemm")),
    ("random bits", ("threefry", "rng", "philox", "random")),
    ("reductions (softmax, layer norm, losses)", ("reduce", "reduction")),
    ("copies", ("memcpy", "memset", "copy", "transpose")),
    ("elementwise fusions", ("fusion", "loop_", "convert", "add", "multiply", "select")),
)


def kernel_time_summary(profile_dir: str, steps: int) -> dict:
    """GPU kernel time per step, by kind and by the top kernels, from a perfetto trace of `steps` steps."""
    import collections
    import glob
    import gzip

    path = sorted(glob.glob(os.path.join(profile_dir, "**", "perfetto_trace.json.gz"), recursive=True))[-1]
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes, threads = {}, {}
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            threads[(event["pid"], event["tid"])] = event["args"]["name"]
    by_name = collections.Counter()
    for event in events:
        if event.get("ph") != "X" or "dur" not in event:
            continue
        process = processes.get(event["pid"], "")
        thread = threads.get((event["pid"], event["tid"]), "")
        # Kernels as the device ran them: the GPU's stream lines, not its "XLA Ops" / "Steps" summaries.
        if "GPU" in process and "Stream" in thread:
            by_name[event["name"]] += event["dur"]
    if not by_name:
        return {"no_gpu_kernels": sorted({f"{processes.get(p, p)} / {t}" for (p, _), t in threads.items()})[:40]}
    by_kind = collections.Counter()
    for name, microseconds in by_name.items():
        kind = next((k for k, patterns in KERNEL_KINDS if any(p in name.lower() for p in patterns)), "other")
        by_kind[kind] += microseconds
    per_step = lambda us: round(us / 1000 / steps, 2)  # noqa: E731
    return {
        "kernel_ms_per_step": per_step(sum(by_name.values())),
        "by_kind_ms": {k: per_step(v) for k, v in by_kind.most_common()},
        "top_kernels_ms": [[name[:90], per_step(v)] for name, v in by_name.most_common(25)],
    }


def child_hf(args):
    import contextlib

    import numpy as np
    import torch
    import transformers

    config = hf_bert_config(transformers, args.preset)
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(config)
    # --precision: float32 weights, the forward pass under CPU autocast (PyTorch's mixed precision).
    autocast_dtype = {"mixed_bfloat16": torch.bfloat16, "mixed_float16": torch.float16}.get(args.precision)
    autocast = (lambda: torch.autocast("cpu", dtype=autocast_dtype)) if autocast_dtype else contextlib.nullcontext
    model.train()
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4, eps=1e-6
    )
    b = {
        k: torch.from_numpy(v).long() if v.dtype != np.float32 else torch.from_numpy(v)
        for k, v in synthetic_batch(args, np).items()
    }
    H = config.hidden_size
    cross_entropy = torch.nn.CrossEntropyLoss()
    if args.hf_mode == "labels":
        labels = torch.full_like(b["input_word_ids"], -100)
        labels.scatter_(1, b["masked_lm_positions"], b["masked_lm_ids"])

    def step():
        with autocast():
            loss = forward()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    def forward():
        if args.hf_mode == "masked":
            sequence_output, pooled_output = model.bert(
                input_ids=b["input_word_ids"],
                attention_mask=b["input_mask"],
                token_type_ids=b["input_type_ids"],
                return_dict=False,
            )[:2]
            gathered = torch.gather(sequence_output, 1, b["masked_lm_positions"][..., None].expand(-1, -1, H))
            mlm_logits = model.cls.predictions(gathered)
            nsp_logits = model.cls.seq_relationship(pooled_output)
            loss = cross_entropy(mlm_logits.reshape(-1, VOCAB), b["masked_lm_ids"].reshape(-1)) + cross_entropy(
                nsp_logits, b["next_sentence_labels"]
            )
        else:
            loss = model(
                input_ids=b["input_word_ids"],
                attention_mask=b["input_mask"],
                token_type_ids=b["input_type_ids"],
                labels=labels,
                next_sentence_label=b["next_sentence_labels"],
            ).loss
        return loss

    result = _time_steps(step, args)
    result["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    result["threads"] = torch.get_num_threads()
    return result


def child_keras_hub(args):
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    backbone = keras_hub_backbone(keras_hub, args.preset)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    # keras-hub's default loss, BERT's AdamW settings; no metric (its default weighted accuracy is work the
    # other contenders do not do).
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
        weighted_metrics=[],
        jit_compile=args.xla == "1",
    )
    b = synthetic_batch(args, np)
    x = dict(keras_hub_inputs(b, tf), mask_positions=tf.constant(b["masked_lm_positions"]))
    y = tf.constant(b["masked_lm_ids"])
    weights = tf.constant(b["masked_lm_weights"])

    result = _time_steps(lambda: model.train_on_batch(x, y, sample_weight=weights), args)
    result["versions"] = {
        "keras-hub": keras_hub.__version__,
        "keras (keras-hub venv)": keras.__version__,
        "tensorflow (keras-hub venv)": tf.__version__,
    }
    return result


def child_model_garden(args):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    from official.nlp import optimization
    from official.nlp.modeling import layers, models, networks

    if args.precision != "float32":
        tf.keras.mixed_precision.set_global_policy(args.precision)
    shape = SHAPES[args.preset]
    encoder = model_garden_encoder(networks, tf, args.preset)
    model = models.BertPretrainerV2(
        encoder_network=encoder,
        classification_heads=[layers.ClassificationHead(inner_dim=shape["H"], num_classes=2, name="next_sentence")],
    )
    # Its AdamWeightDecay clips the gradients' global norm at 1.0 itself (gradient_clip_norm=1.0), so
    # the step below does not clip again.
    optimizer = optimization.create_optimizer(1e-4, num_train_steps=1000, num_warmup_steps=10, optimizer_type="adamw")
    if args.precision == "mixed_float16":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    b = {k: tf.constant(v) for k, v in synthetic_batch(args, np).items()}
    inputs = {k: b[k] for k in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")}
    model(inputs)

    @tf.function(jit_compile=args.xla == "1")
    def train_step():
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            mlm = tf.keras.losses.sparse_categorical_crossentropy(
                b["masked_lm_ids"], outputs["mlm_logits"], from_logits=True
            )
            mlm = tf.reduce_sum(mlm * b["masked_lm_weights"]) / (tf.reduce_sum(b["masked_lm_weights"]) + 1e-5)
            nsp = tf.reduce_mean(
                tf.keras.losses.sparse_categorical_crossentropy(
                    b["next_sentence_labels"], outputs["next_sentence"], from_logits=True
                )
            )
            loss = mlm + nsp
            scaled = optimizer.get_scaled_loss(loss) if args.precision == "mixed_float16" else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        if args.precision == "mixed_float16":
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    result = _time_steps(train_step, args, sync=lambda x: x.numpy())
    import official

    result["versions"] = {
        "tf-models-official": _common.tensorflow_models_version(official),
        "tensorflow (Model Garden venv)": tf.__version__,
    }
    return result


def child_matmul_tf(args):
    import tensorflow as tf

    a = tf.random.normal([2048, 2048])
    f = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))
    return _matmul_rate(lambda: f(a).numpy())


def child_matmul_torch(args):
    import torch

    a = torch.randn(2048, 2048)
    return _matmul_rate(lambda: torch.matmul(a, a).sum().item())


def _matmul_rate(run):
    run()
    best = min(_timed(run) for _ in range(10))
    return {"flops_per_s": 2 * 2048**3 / best}


def _timed(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


CHILDREN = {
    "ours_tf": child_ours_tf,
    "ours_jax": child_ours_jax,
    "hf": child_hf,
    "keras_hub": child_keras_hub,
    "model_garden": child_model_garden,
    "matmul_tf": child_matmul_tf,
    "matmul_torch": child_matmul_torch,
}


# --- parent ----------------------------------------------------------------------------------------


def _have_module(name):
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def jax_label(layout: str, args) -> str:
    """The table's label of a JAX row: its layout, and the attention when not the default."""
    label = JAX_LAYOUTS[layout].format(k=args.examples_per_row)
    return label if args.attention == "auto" else f"{label}, attention {args.attention}"


def _check_packed_flags(parser, args) -> list:
    """The JAX layouts to run: ["full"] without --packed_lengths, else --layouts, once the flags are checked."""
    if not args.packed_lengths:
        return ["full"]
    try:
        histogram = read_length_histogram(args.packed_lengths)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        parser.error(f"--packed_lengths={args.packed_lengths}: not a length histogram ({type(e).__name__}: {e})")
    if not histogram or min(histogram) < 2 or max(histogram) > args.max_seq_length:
        parser.error(f"--packed_lengths={args.packed_lengths}: lengths must lie in 2..--max_seq_length")
    layouts = [layout.strip() for layout in args.layouts.split(",") if layout.strip()]
    if not layouts or set(layouts) - set(JAX_LAYOUTS):
        parser.error(f"--layouts={args.layouts}: a comma-separated subset of {','.join(JAX_LAYOUTS)}")
    if args.examples_per_row < 1:
        parser.error("--examples_per_row must be >= 1")
    if args.model_dir:
        parser.error("--packed_lengths builds --preset (not --model_dir)")
    return layouts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="bert_mini", choices=sorted(SHAPES))
    parser.add_argument("--model_dir", default="", help="JAX only: start from this model directory's weights")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--predictions", type=int, default=20, help="masked positions per sequence")
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--timed_steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1, help="times the contender list runs, interleaved")
    parser.add_argument("--backends", default="tensorflow,jax", help="our backends to measure")
    parser.add_argument("--xla", default="0,1", help="XLA settings for the TF contenders")
    parser.add_argument("--precision", default="float32", choices=("float32", "mixed_bfloat16", "mixed_float16"))
    parser.add_argument("--peers", action="store_true", help="also run the peers (venvs created on first use)")
    parser.add_argument("--only_peers", default="", help="comma-separated peer venvs to keep (hf_torch,...)")
    parser.add_argument("--peer_dir", default=_common.DEFAULT_PEER_DIR)
    parser.add_argument("--no-write", dest="write", action="store_false", help="do not update RESULTS.md")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--hf_mode", default="masked", help=argparse.SUPPRESS)
    parser.add_argument("--hidden_dropout", type=float, default=0.1, help="JAX: hidden_dropout_prob (--preset)")
    parser.add_argument(
        "--attention_dropout", type=float, default=0.1, help="JAX: attention_probs_dropout_prob (--preset)"
    )
    parser.add_argument(
        "--attention",
        default="auto",
        choices=("auto", "einsum", "segments"),
        help="JAX: einsum keeps the unfused attention even where the fused cuDNN kernel would run; segments: "
        "packed rows' fused attention by segment lengths and offsets (Hopper) instead of a mask",
    )
    parser.add_argument("--hidden_act", default="gelu", choices=("gelu", "gelu_new"), help="JAX: (--preset)")
    parser.add_argument("--profile_dir", default="", help="JAX: trace 3 more steps here and sum kernel time")
    parser.add_argument(
        "--packed_lengths",
        default="",
        help="JAX: a length histogram (benchmarks/pretraining_lengths_128.json): rows of instances of those lengths, "
        "one a row (padding after) and packed, beside the all-real rows; sequences/s then counts instances",
    )
    parser.add_argument("--examples_per_row", type=int, default=3, help="JAX, --packed_lengths: instances a row")
    parser.add_argument(
        "--layouts", default="full,lengths,packed", help="JAX, --packed_lengths: which of full,lengths,packed to run"
    )
    parser.add_argument("--layout", default="full", choices=JAX_LAYOUTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warmup_steps < 1 or args.rounds < 1:
        parser.error("--warmup_steps and --rounds must be >= 1")
    if args.timed_steps < 10:
        parser.error("--timed_steps must be >= 10 (the figure is a median of at least 10 steps)")
    if args.predictions >= args.max_seq_length:
        parser.error("--predictions must be below --max_seq_length")

    layouts = _check_packed_flags(parser, args)
    if args.child:
        print("RESULT " + json.dumps(CHILDREN[args.child](args)), flush=True)
        return

    xla_modes = [x.strip() for x in args.xla.split(",") if x.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    contenders = []
    if "tensorflow" in backends and _have_module("tensorflow"):
        contenders += [c for c in OURS_TF if c[3][0].split("=")[1] in xla_modes]
    if "jax" in backends and _have_module("jax"):
        contenders += [(jax_label(layout, args), None, "ours_jax", [f"--layout={layout}"]) for layout in layouts]
    pythons = {None: sys.executable}
    if args.peers:
        keep = set(filter(None, args.only_peers.split(","))) or set(_common.PEER_VENVS)
        for name in sorted(keep):
            pythons[name] = _common.peer_python(args.peer_dir, name, create=True)
        contenders += [
            c
            for c in PEERS
            if c[1] in keep and not (c[2] in ("keras_hub", "model_garden") and c[3][0].split("=")[1] not in xla_modes)
        ]
    if not contenders:
        sys.exit("Nothing to measure: neither TensorFlow nor JAX is installed here and --peers is off.")

    common_flags = [
        f"--preset={args.preset}",
        f"--max_seq_length={args.max_seq_length}",
        f"--batch_size={args.batch_size}",
        f"--predictions={args.predictions}",
        f"--warmup_steps={args.warmup_steps}",
        f"--timed_steps={args.timed_steps}",
        f"--precision={args.precision}",
        f"--hidden_dropout={args.hidden_dropout}",
        f"--attention_dropout={args.attention_dropout}",
        f"--attention={args.attention}",
        f"--hidden_act={args.hidden_act}",
    ]
    if args.profile_dir:
        common_flags.append(f"--profile_dir={os.path.abspath(args.profile_dir)}")
    if args.packed_lengths:
        common_flags += [
            f"--packed_lengths={os.path.abspath(args.packed_lengths)}",
            f"--examples_per_row={args.examples_per_row}",
        ]
    if args.model_dir:
        if "tensorflow" in backends or args.peers:
            parser.error("--model_dir is for --backends=jax alone (the other contenders build --preset)")
        common_flags.append(f"--model_dir={os.path.abspath(args.model_dir)}")
    load_before = _common.load_average()
    results = {label: {"step_s": [], "first_step_s": []} for label, *_ in contenders}
    matmul = {}
    versions = {}
    for round_index in range(args.rounds):
        for label, venv, kind, flags in contenders:
            env = {"KERAS_BACKEND": "jax" if kind == "ours_jax" else "tensorflow"}
            out = _common.run_child(pythons[venv], SCRIPT, [f"--child={kind}"] + common_flags + flags, env=env)
            if "error" in out:
                print(f"[round {round_index + 1}] {label}: FAILED\n{out['error']}", flush=True)
                results[label].setdefault("errors", []).append(out["error"][-300:])
                continue
            if out.get("tensorflow_imported"):
                results[label]["tensorflow_imported"] = True
            if "device" in out:
                versions["device"] = out["device"]
            if "profile" in out:
                print(f"[round {round_index + 1}] {label}: GPU kernel time {json.dumps(out['profile'])}", flush=True)
            results[label]["step_s"] += out["step_s"]
            results[label]["examples_per_step"] = out.get("examples_per_step", args.batch_size)
            results[label]["real_tokens_per_step"] = out.get("real_tokens_per_step")
            results[label]["first_step_s"].append(out["first_step_s"])
            versions.update(out.get("versions", {}))
            rate = results[label]["examples_per_step"] / statistics.median(out["step_s"])
            print(
                f"[round {round_index + 1}] {label}: {rate:.1f} sequences/s (median of {len(out['step_s'])} steps; "
                f"first step {out['first_step_s']:.1f} s)",
                flush=True,
            )
        for venv, kind in MATMUL:
            if venv in pythons and (venv is not None or _have_module("tensorflow")):
                out = _common.run_child(pythons[venv], SCRIPT, [f"--child={kind}"])
                if "error" not in out:
                    matmul[kind] = max(matmul.get(kind, 0.0), out["flops_per_s"])
    load_after = _common.load_average()

    shape, vocab = model_shape(args)
    flops = training_flops_per_sequence(shape, args.max_seq_length, args.predictions, vocab)
    matmul_rate = max(matmul.values()) if matmul else None
    rows = _common.step_rows(results, args.batch_size, args.timed_steps)
    for label, row in rows.items():  # instances, not rows, where a row packs several
        per_row = results[label].get("examples_per_step", args.batch_size) / args.batch_size
        row["sequences_per_s"] *= per_row
        row["per_round"] = [rate * per_row for rate in row["per_round"]]
    ours, peers = _common.ours_and_peers({label: row["sequences_per_s"] for label, row in rows.items()})
    best_ours = max(ours.values()) if ours else None

    packed_note = (
        f" (with --packed_lengths, instance lengths drawn from `{os.path.basename(args.packed_lengths)}` and "
        f"sequences/s counting instances; packed rows hold <= {args.examples_per_row} instances and "
        f"{args.predictions} + {args.examples_per_row} prediction slots)"
        if args.packed_lengths
        else ""
    )
    model_name = f"`{args.model_dir}` (L={shape['L']}, H={shape['H']})" if args.model_dir else f"`{args.preset}`"
    lines = [
        f"{model_name}, seq {args.max_seq_length}, batch {args.batch_size}, {args.predictions} masked positions, "
        f"MLM + NSP (keras-hub: MLM only), dropout {args.hidden_dropout} (attention probabilities: "
        f"{args.attention_dropout}, attention {args.attention}), {args.precision}, synthetic batches"
        f"{packed_note}; "
        f"{args.rounds} interleaved round(s) of {args.warmup_steps} warm-up + {args.timed_steps} timed steps "
        f"per contender, each in a fresh process; figure = median step.",
        "",
    ]
    command = "python benchmarks/train_throughput.py " + " ".join(sys.argv[1:])
    lines += _common.header_lines(command.strip(), load_before, load_after, versions)
    lines.append(f"- Training FLOPs per sequence (formula in the script): {flops / 1e9:.2f} GFLOP")
    lines.append(
        "- Same work, timed the same way: every contender runs --precision its own way, the exact GELU, one "
        "global-norm clipping, AdamW, no metrics beyond the loss except ours (MLM/NSP accuracy), and each step "
        "is timed by the wall clock with its result fetched (ours: between the loop's callbacks, its per-step "
        "logging and summaries included). Remains different: keras-hub trains no NSP head; the HF 'labels' row "
        "computes MLM logits at every position."
    )
    if matmul:
        lines.append(
            "- float32 2048x2048 matmul rate (best of 10): "
            + ", ".join(f"{k.split('_')[1]} {v / 1e9:.0f} GFLOP/s" for k, v in matmul.items())
        )
    columns = [("contender", "<"), ("sequences/s (median)", ">"), ("per round", "<"), ("ms/step", ">")]
    columns += [("first step s", ">"), ("model GFLOP/s", ">"), ("% of matmul rate", ">"), ("best ours / this", ">")]
    table = []
    if args.packed_lengths:
        columns[2:2] = [("instances/row", ">"), ("real tokens/s", ">")]
    for label, row in rows.items():
        rate = row["sequences_per_s"]
        model_flops = args.batch_size / row["median_step_s"] * flops  # every row computes seq_length positions
        packed_cells = []
        if args.packed_lengths:
            tokens = results[label]["real_tokens_per_step"] / row["median_step_s"]
            packed_cells = [f"{results[label]['examples_per_step'] / args.batch_size:.3f}", f"{tokens:,.0f}"]
        table.append(
            [
                label,
                f"{rate:.1f}",
                *packed_cells,
                _common.per_round_cell(row["per_round"]),
                f"{1000 * row['median_step_s']:.0f}",
                f"{row['first_step_s']:.1f}",
                f"{model_flops / 1e9:.1f}",
                f"{100 * model_flops / matmul_rate:.0f}%" if matmul_rate else "-",
                f"{best_ours / rate:.2f}x" if best_ours else "-",
            ]
        )
    lines += [""] + _common.table_lines(columns, table)
    lines += [
        f"\n{label}: TensorFlow was imported in its process."
        for label in results
        if results[label].get("tensorflow_imported")
    ]
    lines += _common.closing_lines(
        {label: result.get("errors") for label, result in results.items()}, ours, peers, 1.25
    )
    _common.publish(SECTION, "train_throughput: pretraining step, ours vs peers", lines, args.write)


if __name__ == "__main__":
    main()
