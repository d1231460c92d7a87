r"""Transfer study, part 3: the main job's small encoder pretrained to match a sentence-embedding teacher.

    nice -n 10 python benchmarks/transfer_study.py --work_dir=/tmp/transfer3 --seeds=1 --tag=mlm_mean

Builds what the main job builds before its small encoders (its own steps, `experiments.demo.steps`: the
vocabulary of the novels and the training reviews, the pretraining records, 1,000 steps of MLM+NSP pretraining,
the converted all-MiniLM-L6-v2), then continues the small encoder's pretraining on the training reviews' text
(never the test reviews', never their labels): its pooled features (`--student_pooling`: the mean of
`sequence_output`, or `pooled_output`), through a linear projection, are fitted to MiniLM's sentence
embedding of the same review (mean of the last layer, unit length; each model reads the text with its own
vocabulary), by mean squared error (Reimers & Gurevych 2020's multilingual distillation, with the student in
another vocabulary). The student then goes through the job's own fine-tuning of a small encoder
(`experiments.export`, `experiments.classify_with_hub` with the job's recipe) beside the job's random-init
twin (`experiments.export --init_from=random --seed=0`), once per `--seeds` seed (`classify_with_hub --seed`
and the distillation's seed). One JSON line per run is appended to `<work_dir>/runs.jsonl`.

The teacher's embeddings are computed once per work directory and text set (`teacher_*.npy`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiments.demo import runner, steps  # noqa: E402
from experiments.demo.config import LABEL_NAMES, DemoConfig  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work_dir", required=True)
    p.add_argument("--tag", required=True, help="The run's name in runs.jsonl and its directory.")
    p.add_argument("--seeds", default="1", help="Comma-separated fine-tuning (and distillation) seeds.")
    p.add_argument("--student_init", choices=("mlm", "random"), default="mlm")
    p.add_argument("--student_pooling", choices=("mean", "pooled"), default="mean")
    p.add_argument("--epochs", type=int, default=10, help="Distillation epochs over the texts (0: none).")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=5e-4)
    p.add_argument("--student_seq_length", type=int, default=64)
    p.add_argument("--teacher_seq_length", type=int, default=128)
    p.add_argument("--augmented_copies", type=int, default=0, help="Altered copies of each review (augmentation).")
    p.add_argument(
        "--recipe",
        choices=("job", "B"),
        default="job",
        help="Fine-tuning of both encoders: the job's (Adam, constant 1e-3, 2 epochs), or part 1's recipe B "
        "(peak 3e-4, 10%% warm-up then linear decay, 3 epochs).",
    )
    return p.parse_args(argv)


def base_config(work_dir):
    return DemoConfig(output_dir=os.path.join(work_dir, "base"))


def build_base(config):
    """The main job's steps 1-4 (cached in `config.output_dir`), as `experiments.demo.main` calls them."""
    from bert_tf.datasets import bundled

    train_texts, _ = bundled.read_sentiment("train")
    vocab, _ = steps.learn_vocabulary(config, train_texts)
    model_config = config.small_encoder_config(vocab["vocab_size"])
    data, _ = steps.write_tfrecords(config, vocab)
    pretrained, _ = steps.pretrain_from_scratch(config, model_config, vocab, data)
    real, _ = steps.convert_real_weights(config)
    return model_config, vocab, pretrained, real


def distillation_texts(augmented_copies):
    """The training reviews' texts (never the test reviews'), and `augmented_copies` altered copies of each."""
    from bert_tf.datasets import bundled
    from bert_tf.distillation.augmentation import altered_text

    texts, _ = bundled.read_sentiment("train")
    rng = random.Random(0)
    copies = [altered_text(t, rng) for _ in range(augmented_copies) for t in texts]
    return list(texts) + copies


def teacher_embeddings(work_dir, real, texts, seq_length, augmented_copies):
    """MiniLM's unit-length mean-pooled sentence embeddings of `texts`, [len(texts), 384], cached."""
    import numpy as np

    path = os.path.join(work_dir, f"teacher_{seq_length}_copies{augmented_copies}.npy")
    if os.path.exists(path):
        return np.load(path), 0.0
    start = time.time()
    originals = os.path.join(work_dir, f"teacher_{seq_length}_copies0.npy")
    if augmented_copies and os.path.exists(originals):  # the reviews' own come first in `texts`
        done = np.load(originals)
        embeddings = np.concatenate([done, sentence_embeddings(real["model_dir"], texts[len(done) :], seq_length)])
    else:
        embeddings = sentence_embeddings(real["model_dir"], texts, seq_length)
    np.save(path, embeddings)
    return embeddings, time.time() - start


def sentence_embeddings(model_dir, texts, seq_length, batch_size=64):
    """sentence-transformers' embedding by a converted model directory: mean of the last layer, unit length."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.checkpoints.model_dir import load_encoder
    from bert_tf.data.text_inputs import pack_texts
    from bert_tf.features.pooling import l2_normalize, pool_tokens
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    encoder = load_encoder(model_dir)
    inputs = pack_texts(TaskTokenizer(os.path.join(model_dir, "vocab.txt")), texts, [None] * len(texts), seq_length)

    @tf.function(jit_compile=True, reduce_retracing=True)
    def embed(batch):
        out = encoder(batch, training=False)
        return l2_normalize(pool_tokens(out["sequence_output"], batch["input_mask"], "mean"))

    parts = []
    for start in range(0, len(texts), batch_size):
        batch = {k: v[start : start + batch_size] for k, v in inputs.items()}
        length = max(16, -(-int(batch["input_mask"].sum(1).max()) // 16) * 16)
        parts.append(embed({k: tf.constant(v[:, :length]) for k, v in batch.items()}).numpy())
        if start // batch_size % 20 == 0:
            print(f"   teacher: {start + len(batch['input_mask'])}/{len(texts)} texts", flush=True)
    return np.concatenate(parts)


def _ProjectedStudent(encoder, pooling, width):
    """A Keras model: encoder inputs -> the encoder's pooled features -> Dense(width)."""
    import keras

    from bert_tf.features.pooling import pool_tokens

    class ProjectedStudent(keras.Model):
        def __init__(self):
            super().__init__()
            self.encoder = encoder
            self.projection = keras.layers.Dense(width, name="projection")

        def call(self, inputs, training=False):
            outputs = self.encoder(inputs, training=training)
            if pooling == "mean":
                features = pool_tokens(outputs["sequence_output"], inputs["input_mask"], "mean")
            else:
                features = outputs["pooled_output"]
            return self.projection(features)

    return ProjectedStudent()


def distil(args, seed, model_config, vocab, pretrained, texts, targets, out_dir):
    """The small encoder (from the MLM checkpoint or random) fitted to the teacher's embeddings; saved."""
    import keras
    import numpy as np

    from bert_tf.checkpoints.model_dir import restore, write_model_dir
    from bert_tf.data.text_inputs import pack_texts
    from bert_tf.models import BertEncoder
    from bert_tf.tasks.task_tokenizer import TaskTokenizer

    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(model_config)  # the fine-tuning config: dropout 0.1
    inputs = pack_texts(TaskTokenizer(vocab["vocab_file"]), texts, [None] * len(texts), args.student_seq_length)
    encoder({k: v[:2] for k, v in inputs.items()})
    if args.student_init == "mlm":
        restore(encoder, pretrained["model_dir"])
    model = _ProjectedStudent(encoder, args.student_pooling, targets.shape[1])
    if not args.epochs:  # the MLM checkpoint alone (the job's encoder), for reference
        write_model_dir(out_dir, encoder, vocab["vocab_file"])
        return {"distil_seconds": 0.0, "distil_loss": []}
    steps_total = args.epochs * -(-len(texts) // args.batch_size)
    warmup = max(steps_total // 10, 1)
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, steps_total - warmup, alpha=0.0, warmup_target=args.learning_rate, warmup_steps=warmup
    )
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), loss="mse", jit_compile=True)
    # Unit-length targets have entries near 1/sqrt(384): scaled to unit mean square per dimension.
    scaled = (targets * np.sqrt(targets.shape[1])).astype("float32")
    start = time.time()
    history = model.fit(inputs, scaled, batch_size=args.batch_size, epochs=args.epochs, shuffle=True, verbose=2)
    seconds = time.time() - start
    write_model_dir(out_dir, encoder, vocab["vocab_file"])
    return {"distil_seconds": round(seconds, 1), "distil_loss": [round(x, 4) for x in history.history["loss"]]}


def export(config, model_dir, export_dir, config_file, *extra):
    runner.run_tool(
        "experiments.export",
        export_dir + ".log",
        *([f"--model_dir={model_dir}"] if model_dir else []),
        f"--export_dir={export_dir}",
        f"--max_seq_length={config.max_seq_length}",
        f"--bert_config_file={config_file}",
        *extra,
    )


def recipe_flags(config, recipe):
    if recipe == "B":
        return ["--num_train_epochs=3", "--learning_rate=3e-4", "--warmup_proportion=0.1"]
    return [
        f"--num_train_epochs={config.small_encoder_epochs}",
        f"--learning_rate={config.small_encoder_learning_rate}",
    ]


def fine_tune(config, export_dir, out_dir, seed, recipe):
    """The job's fine-tuning of a small encoder (`steps.fine_tune_with_hub`'s command) with `--seed`."""
    from bert_tf.datasets import bundled

    runner.run_tool(
        "experiments.classify_with_hub",
        out_dir + ".log",
        f"--export_dir={export_dir}",
        f"--train_file={bundled.sentiment_path('train')}",
        f"--eval_file={bundled.sentiment_path('test')}",
        f"--output_dir={out_dir}",
        *recipe_flags(config, recipe),
        f"--label_names={','.join(LABEL_NAMES)}",
        f"--seed={seed}",
        env=dict(os.environ, TF_USE_LEGACY_KERAS="1"),
    )
    with open(os.path.join(out_dir, "results.json"), encoding="utf-8") as f:
        return json.load(f)["test_accuracy"]


def random_init_accuracy(args, config, model_config, vocab, seed):
    """The job's random-init twin fine-tuned with `seed`, once per work directory and seed."""
    root = os.path.join(args.work_dir, "random_init")
    suffix = "" if args.recipe == "job" else f"_{args.recipe}"
    result_path = os.path.join(root, f"seed{seed}{suffix}.json")
    if os.path.exists(result_path):
        with open(result_path, encoding="utf-8") as f:
            return json.load(f)["test_accuracy"]
    os.makedirs(root, exist_ok=True)
    export_dir = os.path.join(root, "export")
    if not os.path.isdir(export_dir):
        config_file = os.path.join(root, "bert_config.json")
        model_config.to_json_file(config_file)
        export(
            config,
            None,
            export_dir,
            config_file,
            f"--vocab_file={vocab['vocab_file']}",
            "--init_from=random",
            "--seed=0",
        )
    accuracy = fine_tune(config, export_dir, os.path.join(root, f"classifier_seed{seed}{suffix}"), seed, args.recipe)
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump({"test_accuracy": accuracy}, f)
    return accuracy


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.work_dir, exist_ok=True)
    config = base_config(args.work_dir)
    model_config, vocab, pretrained, real = build_base(config)
    texts = distillation_texts(args.augmented_copies)
    targets, teacher_seconds = teacher_embeddings(
        args.work_dir, real, texts, args.teacher_seq_length, args.augmented_copies
    )
    print(f"teacher embeddings of {len(texts)} texts ({teacher_seconds:.0f} s)", flush=True)
    for seed in [int(s) for s in args.seeds.split(",")]:
        run_dir = os.path.join(args.work_dir, args.tag, f"seed{seed}")
        os.makedirs(run_dir, exist_ok=True)
        distilled = {"distil_seconds": None, "distil_loss": None}  # an earlier run's model, fine-tuned again
        if not os.path.isdir(os.path.join(run_dir, "export")):
            distilled = distil(
                args, seed, model_config, vocab, pretrained, texts, targets, os.path.join(run_dir, "model")
            )
            config_file = os.path.join(run_dir, "bert_config.json")
            model_config.to_json_file(config_file)
            export(config, os.path.join(run_dir, "model"), os.path.join(run_dir, "export"), config_file)
        suffix = "" if args.recipe == "job" else f"_{args.recipe}"
        pretrained_accuracy = fine_tune(
            config, os.path.join(run_dir, "export"), os.path.join(run_dir, f"classifier{suffix}"), seed, args.recipe
        )
        random_accuracy = random_init_accuracy(args, config, model_config, vocab, seed)
        row = {
            "tag": args.tag,
            "seed": seed,
            **{k: v for k, v in vars(args).items() if k not in ("work_dir", "tag", "seeds")},
            "texts": len(texts),
            "teacher_seconds": round(teacher_seconds, 1),
            **distilled,
            "pretrained_accuracy": pretrained_accuracy,
            "random_init_accuracy": random_accuracy,
            "margin_points": round(100 * (pretrained_accuracy - random_accuracy), 1),
            "time": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        }
        print(json.dumps(row), flush=True)
        with open(os.path.join(args.work_dir, "runs.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
