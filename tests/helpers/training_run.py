"""Subprocess side of the training tests (strategies that must be set up before TensorFlow starts).

    python tests/helpers/training_run.py synthetic --strategy=one_device,mirrored:jit --logical_cpus=2 --out=w ...
    python tests/helpers/training_run.py clipping --logical_cpus=2 --out=result.json
    python tests/helpers/training_run.py pretrain --kill_at_step=30 --args='{"input_file": ...}'

`synthetic` trains the tiny BERT on `training_data.synthetic_dataset_fn` (dropout 0, deterministic) with
one strategy, or with several in turn (comma-separated; `name:jit` for XLA, `name:float16` for
mixed_float16, `name:jit+float16` for both), evaluates it on
`synthetic_eval_dataset_fn`, and saves each run's weights and metrics to `<out>.<run>.npz`;
`--clipping_out` then also runs the `clipping` check. `clipping` checks the global-norm clipping of
`AdamWeightDecay` across two mirrored replicas. `pretrain` calls `bert_tf.jobs.pretrain.run_pretraining`
`finetune` `bert_tf.jobs.finetuning.job.run_finetuning` and `distill` `bert_tf.jobs.distillation.run_distillation`
with the JSON arguments (the flags, sorted into the
jobs' configs by `tests.helpers.jobs`). All three can SIGKILL themselves at a point that does not
depend on the machine's speed: after the inner loop that ends at `--kill_at_step`, or inside training
step `--kill_in_step` (between its forward pass and its update: a `tf.py_function` that the step's
outputs depend on, counting training steps from the start of this process). `--kill_at_random_moment=SEED`
instead kills at an arbitrary moment after the inner loop ending at `--kill_at_step`: a timer of
`random.Random(SEED).uniform(0, 1)` seconds, so wherever that lands (in a step, in a checkpoint write,
after the last one), and the process waits for the timer rather than exit first.
`--term_in_step=N` instead sends this process a SIGTERM inside training step N (the same `tf.py_function`
point) and waits there until the run's `PreemptionWatcher` has seen it, so the step the run stops after does not
depend on the machine's speed. `cli` runs a command line's `run(argv)` (`--module=experiments.pretrain`, the
flags as a JSON list in `--args`) with the same kill points, so its exit status is the tool's.
"""

import argparse
import importlib
import json
import os
import random
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _configure_cpus(count):
    import tensorflow as tf

    if count > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)


def _kill_now():
    os.kill(os.getpid(), signal.SIGKILL)


_timers = []


def _killer(args):
    """A loop callback that SIGKILLs this process after the inner loop ending at --kill_at_step.

    With --kill_at_random_moment=SEED it starts a timer instead (seeded delay, see the module docstring):
    resuming must give the same weights from any point.
    """

    def kill(step, metrics):
        if step == args.kill_at_step:
            if args.kill_at_random_moment is not None:
                timer = threading.Timer(random.Random(args.kill_at_random_moment).uniform(0.0, 1.0), _kill_now)
                _timers.append(timer)
                timer.start()
            else:
                _kill_now()

    return kill if args.kill_at_step else None


def _wait_for_a_pending_kill():
    """The run ended before the random moment: the kill still comes, after it (at most 1 s)."""
    for timer in _timers:
        timer.join(timeout=30)


def _forward_killing_in_step(forward_fn, step):
    """`forward_fn`, whose training outputs wait for a `tf.py_function` that SIGKILLs this process in step `step`."""
    import tensorflow as tf

    calls = []

    def count_and_kill():
        calls.append(1)
        if len(calls) == step:
            _kill_now()
        return 0

    def forward(model, batch, training):
        outputs = forward_fn(model, batch, training)
        if not training:  # evaluation does not count
            return outputs
        with tf.control_dependencies([tf.py_function(count_and_kill, [], tf.int32)]):
            return tf.nest.map_structure(tf.identity, outputs)

    return forward


def _forward_terminating_in_step(forward_fn, step, watcher):
    """`forward_fn`, whose training outputs wait for a `tf.py_function` that SIGTERMs this process in step `step`.

    It returns once `watcher` has seen the signal (bounded), as the step a signal lands in would go on."""
    import tensorflow as tf

    calls = []

    def count_and_terminate():
        calls.append(1)
        if len(calls) == step:
            os.kill(os.getpid(), signal.SIGTERM)
            if watcher is None or not watcher.wait_until_requested(timeout=120):
                raise RuntimeError("The SIGTERM was not seen by a PreemptionWatcher.")
        return 0

    def forward(model, batch, training):
        outputs = forward_fn(model, batch, training)
        if not training:
            return outputs
        with tf.control_dependencies([tf.py_function(count_and_terminate, [], tf.int32)]):
            return tf.nest.map_structure(tf.identity, outputs)

    return forward


def _install_kill_points(args):
    """Makes `bert_tf.training.train`, as the jobs call it, kill this process at the points `args` name."""
    from bert_tf import training
    from bert_tf.training import loop

    train = training.train

    def train_with_kill_points(*positional, **keywords):
        if args.kill_in_step:
            keywords["forward_fn"] = _forward_killing_in_step(
                keywords.get("forward_fn", loop.default_forward), args.kill_in_step
            )
        if args.kill_at_step:
            keywords["loop_callback"] = _killer(args)
        if args.term_in_step:
            keywords["forward_fn"] = _forward_terminating_in_step(
                keywords.get("forward_fn", loop.default_forward), args.term_in_step, keywords.get("preemption")
            )
        return train(*positional, **keywords)

    training.train = train_with_kill_points


def run_synthetic(args):
    import numpy as np

    from bert_tf import BertEncoder, BertPretrainer, pretraining_losses, training
    from tests.helpers import training_data

    config = training_data.tiny_bert_config(
        training_data.SYNTHETIC_VOCAB, dropout=0.0, max_positions=training_data.SYNTHETIC_SEQ, num_layers=1
    )
    for run in args.strategy.split(","):
        name, _, option = run.partition(":")  # e.g. "mirrored:jit", "mirrored:float16", "mirrored:jit+float16"
        options = set(option.split("+")) - {""}
        training.enable_determinism(args.seed)
        training.set_precision_policy("mixed_float16" if "float16" in options else "float32")
        strategy = training.get_strategy(name, num_gpus=0 if name != "multi_worker_mirrored" else None)
        loop_config = training.TrainingConfig(
            num_train_steps=args.steps,
            learning_rate=1e-3,
            num_warmup_steps=2,
            steps_per_loop=args.steps_per_loop,
            save_checkpoints_steps=args.save_steps,
        )
        result = training.train(
            strategy,
            lambda: BertPretrainer(BertEncoder(config)),
            pretraining_losses,
            training_data.synthetic_dataset_fn(args.global_batch),
            os.path.join(args.model_dir, run),
            loop_config,
            loop_callback=_killer(args),
            jit_compile="jit" in options,
            eval_dataset_fn=training_data.synthetic_eval_dataset_fn(args.global_batch),
        )
        weights = {v.path: v.numpy() for v in result.model.trainable_variables}
        weights["__loss__"] = np.array(result.train_metrics["loss"])
        for metric, value in result.eval_metrics.items():
            weights[f"__eval_{metric}__"] = np.array(value)
        weights["__replicas__"] = np.array(strategy.num_replicas_in_sync)
        weights["__compute_dtype__"] = np.array(result.model.encoder.dtype_policy.compute_dtype)
        weights["__is_chief__"] = np.array(training.is_chief(strategy))
        np.savez(f"{args.out}.{run}.npz", **weights)
    if args.clipping_out:
        # One MirroredStrategy per process: a second one can reuse the first one's collective keys.
        run_clipping(args.clipping_out, strategy)


def run_clipping(out, strategy=None):
    """Two replicas with gradients [0.8, 0] and [0, 0.8]: the update must use the clipped *sum*."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.training import AdamWeightDecay

    strategy = strategy or tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        weight = tf.Variable(np.zeros(2, np.float32), name="kernel")
        optimizer = AdamWeightDecay([weight], learning_rate=1.0, weight_decay_rate=0.0, clip_norm=1.0)

    @tf.function
    def step():
        def replica_fn():
            context = tf.distribute.get_replica_context()
            grad = tf.where(context.replica_id_in_sync_group == 0, tf.constant([0.8, 0.0]), tf.constant([0.0, 0.8]))
            grad = context.all_reduce(tf.distribute.ReduceOp.SUM, grad)
            return optimizer.apply_gradients([grad])

        return strategy.run(replica_fn)

    norms = strategy.experimental_local_results(step())
    result = {
        "replicas": strategy.num_replicas_in_sync,
        "norms": [float(n) for n in norms],
        "first_moment": [list(map(float, m)) for m in strategy.experimental_local_results(optimizer.m[0])],
        "weights": [list(map(float, w)) for w in strategy.experimental_local_results(weight)],
    }
    with open(out, "w") as f:
        json.dump(result, f)


def run_pretrain(args):
    from tests.helpers import jobs

    _install_kill_points(args)
    jobs.pretrain(**json.loads(args.args))
    _wait_for_a_pending_kill()


def run_finetune(args):
    """`run_finetuning` with the JSON arguments, with the kill points installed."""
    from tests.helpers import jobs

    _install_kill_points(args)
    jobs.finetune(**json.loads(args.args))
    _wait_for_a_pending_kill()


def run_distill(args):
    """`run_distillation` with the JSON arguments (`tests.helpers.jobs.distill`), with the kill points installed."""
    from tests.helpers import jobs

    _install_kill_points(args)
    jobs.distill(**json.loads(args.args))
    _wait_for_a_pending_kill()


def run_cli(args):
    """`<module>.run([module, *flags])` with the kill points installed: exits with the tool's status."""
    _install_kill_points(args)
    importlib.import_module(args.module).run([args.module] + json.loads(args.args))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=("synthetic", "clipping", "pretrain", "finetune", "distill", "cli"))
    parser.add_argument("--strategy", default="one_device")
    parser.add_argument("--logical_cpus", type=int, default=1)
    parser.add_argument("--model_dir")
    parser.add_argument("--out")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--steps_per_loop", type=int, default=3)
    parser.add_argument("--save_steps", type=int, default=3)
    parser.add_argument("--global_batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--clipping_out", help="synthetic: also run the clipping check, writing here")
    parser.add_argument("--kill_at_step", type=int, default=0)
    parser.add_argument("--kill_in_step", type=int, default=0)
    parser.add_argument("--kill_at_random_moment", type=int, default=None, help="the seed of the moment")
    parser.add_argument("--term_in_step", type=int, default=0)
    parser.add_argument("--module", help="cli: the command line's module, e.g. experiments.pretrain")
    parser.add_argument("--args", default="{}")
    args = parser.parse_args()
    _configure_cpus(args.logical_cpus)
    from absl import logging

    logging.set_verbosity(logging.INFO)
    if args.task == "clipping":
        run_clipping(args.out)
    else:
        tasks = {
            "synthetic": run_synthetic,
            "pretrain": run_pretrain,
            "finetune": run_finetune,
            "distill": run_distill,
            "cli": run_cli,
        }
        tasks[args.task](args)


if __name__ == "__main__":
    main()
