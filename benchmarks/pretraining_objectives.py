r"""Pretraining objectives side by side: the same small model, the same steps, the bundled corpus.

    python benchmarks/pretraining_objectives.py --seeds=3 --work_dir=/tmp/objectives --write

Writes pretraining TFRecords from data/austen_corpus.txt (training documents from the start of the
corpus, held-out documents from its end) with `bert_tf.pretraining_data`, then pretrains one small
BERT with `bert_tf.jobs.pretrain.run_pretraining` for each choice:

    bert          MLM + NSP, token masking (BERT)
    full_sent     MLM only on full sentences (RoBERTa's FULL-SENTENCES, --sentence_task=none)
    whole_word    MLM + NSP, whole-word masking
    span          MLM + NSP, SpanBERT spans (--masking=span)
    phrase        MLM + NSP, ERNIE's phrase masking (--masking=phrase) with the collocations learned from
                  the training text (`bert_tf.tokenization.phrase_learning`, its default thresholds)
    entity        MLM + NSP, ERNIE's entity masking (--masking=entity) with a list of the runs of
                  capitalised words not at a sentence start, seen at least 3 times in the cased training
                  text (the vocabulary is uncased, so the heuristic runs on the text, here)
    ernie         MLM + NSP, ERNIE's stages by dynamic masking of unmasked records that carry both units:
                  --masking_schedule=token:0.3,phrase:0.3,entity:0.4 (a new mask every batch, where the
                  other rows reuse their records' --dupe_factor=3 masks)
    sop           MLM + sentence-order prediction (ALBERT, --sentence_task=sop)
    albert        MLM + NSP with ALBERT's factorised embedding (E = H / 4) and one shared block
    lamb          MLM + NSP with LAMB at --lamb_batch_multiplier times the batch (--optimizer=lamb)

and reports, as the mean (and spread) over --seeds seeds: masked-LM accuracy on ONE shared held-out set
(held-out text written as BERT's NSP pairs with token masking, masked once, the same for every model),
the sentence task's held-out accuracy where the model has one (on held-out records of its own task),
training sequences/s (the last inner loop of each run) and the parameters. With --write, the table goes
to benchmarks/RESULTS.md between the `pretraining_objectives` markers.

The vocabulary is tests/fixtures/pretraining/vocab.txt (1,091 WordPieces: a fifth of the tokens are
`##` pieces, so whole-word and span masking differ from token masking).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _common  # noqa: E402

ROOT = _common.ROOT
CORPUS = os.path.join(ROOT, "data", "austen_corpus.txt")
VOCAB = os.path.join(ROOT, "tests", "fixtures", "pretraining", "vocab.txt")

# name -> (records' sentence task, records' masking, ALBERT-style model, optimizer); LAMB trains at
# --lamb_batch_multiplier times the batch.
CHOICES = {
    "bert": ("nsp", "token", False, "adamw"),
    "full_sent": ("none", "token", False, "adamw"),
    "whole_word": ("nsp", "whole_word", False, "adamw"),
    "span": ("nsp", "span", False, "adamw"),
    "phrase": ("nsp", "phrase", False, "adamw"),
    "entity": ("nsp", "entity", False, "adamw"),
    "ernie": ("nsp", "ernie", False, "adamw"),
    "sop": ("sop", "token", False, "adamw"),
    "albert": ("nsp", "token", True, "adamw"),
    "lamb": ("nsp", "token", False, "lamb"),
}
DESCRIPTIONS = {
    "bert": "BERT: MLM + NSP, token masking",
    "full_sent": "RoBERTa full sentences: MLM only",
    "whole_word": "MLM + NSP, whole-word masking",
    "span": "MLM + NSP, SpanBERT spans",
    "phrase": "MLM + NSP, ERNIE phrases (learned)",
    "entity": "MLM + NSP, ERNIE entities (capitalised runs)",
    "ernie": "MLM + NSP, ERNIE stages token/phrase/entity (dynamic)",
    "sop": "ALBERT's SOP: MLM + sentence order",
    "albert": "ALBERT-shared (E = H/4, one block), MLM + NSP",
    "lamb": "LAMB at a larger batch, MLM + NSP",
}


# ERNIE's stages, for the "ernie" choice (whose records are unmasked and carry the units of both modes).
ERNIE_SCHEDULE = "token:0.3,phrase:0.3,entity:0.4"


def split_corpus(work_dir: str, train_bytes: int, eval_bytes: int) -> tuple[str, str]:
    """Whole documents from the corpus' start (training) and end (held out)."""
    with open(CORPUS, encoding="utf-8") as f:
        documents = f.read().strip("\n").split("\n\n")
    train, size = [], 0
    while size < train_bytes and len(train) < len(documents) - 1:
        train.append(documents[len(train)])
        size += len(train[-1])
    held_out, size = [], 0
    while size < eval_bytes and len(train) + len(held_out) < len(documents):
        held_out.append(documents[len(documents) - 1 - len(held_out)])
        size += len(held_out[-1])
    paths = []
    for name, docs in (("train", train), ("held_out", held_out[::-1])):
        path = os.path.join(work_dir, f"{name}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n\n".join(docs) + "\n")
        paths.append(path)
    return paths[0], paths[1]


def entity_list(text: str, min_count: int = 3) -> list:
    """Runs of capitalised words (longer than one letter) not at a line's start, seen `min_count` times."""
    import collections

    counts = collections.Counter()
    for line in open(text, encoding="utf-8"):
        words = [w.strip(".,;:!?\"'()_") for w in line.split()]
        run = []
        for i, word in enumerate(words + [""]):
            if i > 0 and len(word) > 1 and word[0].isupper() and word.isalpha():
                run.append(word)
                continue
            if run:
                counts[" ".join(run)] += 1
            run = []
    return sorted(name for name, count in counts.items() if count >= min_count)


def unit_tables(text: str, work_dir: str, masking: str) -> dict:
    """The units of "phrase" (learned from `text`) and "entity" (`entity_list`) masking; written once."""
    from bert_tf.pretraining_data import knowledge_units
    from bert_tf.tokenization import phrase_learning

    if masking not in knowledge_units.KNOWLEDGE_MASKING:
        return {}
    path = os.path.join(work_dir, f"{masking}-units.txt")
    if not os.path.exists(path):
        if masking == "phrase":
            phrase_learning.write_phrases(phrase_learning.learn_phrases(phrase_learning.corpus_lines([text])), path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(name + "\n" for name in entity_list(text)))
    return {masking: knowledge_units.read_phrase_file(path, VOCAB, True)}


def write_records(text: str, path: str, args, sentence_task: str, masking: str, dupe_factor: int, seed: int) -> str:
    from bert_tf.pretraining_data import InstanceConfig, write_pretraining_data

    if not os.path.exists(path):
        ernie = masking == "ernie"
        config = InstanceConfig(
            max_seq_length=args.max_seq_length,
            max_predictions_per_seq=args.max_predictions,
            dupe_factor=dupe_factor,
            sentence_task=sentence_task,
            masking="phrase" if ernie else masking,
            do_masking=not ernie,
        )
        directory = os.path.dirname(path)
        units = unit_tables(text, directory, masking)
        if ernie:
            units = {**unit_tables(text, directory, "phrase"), **unit_tables(text, directory, "entity")}
        summary = write_pretraining_data([text], [path], VOCAB, config, seed=seed, num_workers=1, units=units)
        if units and not ernie:
            print(path, summary.format().splitlines()[4], flush=True)  # the units masked
    return path


def model_config(args, albert: bool = False):
    from bert_tf import BertConfig
    from bert_tf.tokenization import load_vocab

    return BertConfig(
        vocab_size=len(load_vocab(VOCAB)),
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_layers,
        num_attention_heads=max(1, args.hidden_size // 64),
        intermediate_size=4 * args.hidden_size,
        max_position_embeddings=args.max_seq_length,
        embedding_size=args.hidden_size // 4 if albert else None,
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout,
        share_layer_weights=albert,
    )


def held_out_metrics(model, path: str, args, sentence_task: str) -> dict:
    """Masked-LM accuracy (and the sentence task's) over every record of `path`, weighted per prediction."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.data.pretraining_dataset import pretraining_dataset
    from bert_tf.models.bert_pretrainer import sparse_cross_entropy_with_hits

    dataset = pretraining_dataset(
        path,
        64,
        args.max_seq_length,
        args.max_predictions,
        training=False,
        drop_remainder=False,
        sentence_task=sentence_task,
    )
    names = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")

    @tf.function
    def forward(batch):
        outputs = model({name: batch[name] for name in names}, training=False)
        _, hits = sparse_cross_entropy_with_hits(batch["masked_lm_ids"], tf.cast(outputs["mlm_logits"], tf.float32))
        return hits * batch["masked_lm_weights"], batch["masked_lm_weights"], outputs["sentence_logits"]

    hits = weights = 0.0
    correct = count = 0
    label = {"nsp": "next_sentence_labels", "sop": "sentence_order_labels"}.get(sentence_task)
    for batch in dataset:
        batch_hits, batch_weights, logits = forward(batch)
        hits += float(tf.reduce_sum(batch_hits))
        weights += float(tf.reduce_sum(batch_weights))
        if label:
            correct += int(np.sum(np.argmax(logits.numpy(), axis=-1) == batch[label].numpy()))
            count += len(batch[label])
    return {"mlm_accuracy": hits / max(weights, 1.0), "sentence_accuracy": correct / count if count else None}


def baselines(records: dict, args) -> dict:
    """What ignoring the input scores: the unigram MLM accuracy on the shared set, each label's majority."""
    import numpy as np

    from bert_tf.data.pretraining_dataset import pretraining_dataset
    from bert_tf.data.unigram_baseline import unigram_baseline
    from bert_tf.tokenization import load_vocab

    result = {
        "mlm_accuracy": unigram_baseline(
            records[("nsp", "token")],
            records["held_out_shared"],
            args.max_seq_length,
            args.max_predictions,
            len(load_vocab(VOCAB)),
        ).accuracy
    }
    for task, label in (("nsp", "next_sentence_labels"), ("sop", "sentence_order_labels")):
        dataset = pretraining_dataset(
            records[("held_out", task)],
            256,
            args.max_seq_length,
            args.max_predictions,
            training=False,
            drop_remainder=False,
            sentence_task=task,
        )
        labels = np.concatenate([batch[label].numpy() for batch in dataset])
        result[task] = float(max(labels.mean(), 1 - labels.mean()))
    return result


def run_choice(name: str, seed: int, records: dict, args) -> dict:
    from bert_tf.jobs.pretrain import PretrainingDataConfig, run_pretraining
    from bert_tf.training import RuntimeConfig, TrainingConfig

    sentence_task, masking, albert, optimizer = CHOICES[name]
    batch = args.batch_size * (args.lamb_batch_multiplier if optimizer == "lamb" else 1)
    output_dir = os.path.join(args.work_dir, "runs", f"{name}-{seed}")
    shutil.rmtree(output_dir, ignore_errors=True)  # a fresh run, not a resumed one
    data = PretrainingDataConfig(
        input_file=records[(sentence_task, masking)],
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions,
        train_batch_size=batch,
        shuffle_buffer_size=1000,
        dynamic_masking=masking == "ernie",
        masking_schedule=ERNIE_SCHEDULE if masking == "ernie" else "",
    )
    training_config = TrainingConfig(
        num_train_steps=args.steps,
        learning_rate=args.lamb_learning_rate if optimizer == "lamb" else args.learning_rate,
        num_warmup_steps=args.steps // 10,
        optimizer=optimizer,
        steps_per_loop=args.steps_per_loop,
        save_checkpoints_steps=args.steps,
        keep_checkpoint_max=1,
    )
    config = model_config(args, albert=albert)
    result = run_pretraining(
        output_dir, config, data, training_config, RuntimeConfig(seed=seed, deterministic=True), vocab_file=VOCAB
    )
    shared = held_out_metrics(result.model, records["held_out_shared"], args, "nsp")
    own = shared
    if sentence_task != "nsp":
        own = held_out_metrics(result.model, records[("held_out", sentence_task)], args, sentence_task)
    return {
        "mlm_accuracy": shared["mlm_accuracy"],
        "own_mlm_accuracy": own["mlm_accuracy"],
        "sentence_accuracy": own["sentence_accuracy"] if sentence_task != "none" else None,
        "sentence_task": sentence_task,
        "sequences_per_second": result.train_metrics["examples_per_second"],
        "parameters": result.model.encoder.count_params(),
        "batch": batch,
    }


def _mean(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    spread = f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.3f}{spread}"


def table(results: dict, baseline: dict) -> list:
    lines = [
        "| choice | held-out MLM acc. (shared set) | sentence task acc. | batch | sequences/s | encoder parameters |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| baseline: no context (unigram MLM; majority label) | {baseline['mlm_accuracy']:.3f} | "
        f"NSP: {baseline['nsp']:.3f}, SOP: {baseline['sop']:.3f} | - | - | - |",
    ]
    for name, runs in results.items():
        sentence = _mean([r["sentence_accuracy"] for r in runs])
        task = {"nsp": "NSP", "sop": "SOP", "none": "none"}[runs[0]["sentence_task"]]
        lines.append(
            f"| {DESCRIPTIONS[name]} | {_mean([r['mlm_accuracy'] for r in runs])} | "
            f"{task}: {sentence} | {runs[0]['batch']} | "
            f"{statistics.mean(r['sequences_per_second'] for r in runs):,.0f} | {runs[0]['parameters']:,} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work_dir", required=True, help="records and runs go here (reused when present)")
    parser.add_argument("--choices", default=",".join(CHOICES), help="comma-separated subset of " + ",".join(CHOICES))
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--steps_per_loop", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--max_predictions", type=int, default=10)
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--num_layers", type=int, default=2)
    # experiments/demo's: at 1e-3 this model stays on the unigram plateau in some runs.
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--lamb_learning_rate", type=float, default=1e-3)
    parser.add_argument("--dropout", type=float, default=0.0, help="dropout while pretraining (short runs: off)")
    parser.add_argument("--lamb_batch_multiplier", type=int, default=2)
    parser.add_argument("--train_mb", type=float, default=1.0, help="megabytes of training text")
    parser.add_argument("--held_out_mb", type=float, default=0.1, help="megabytes of held-out text")
    parser.add_argument("--write", action="store_true", help="write the table into benchmarks/RESULTS.md")
    args = parser.parse_args()
    choices = [c for c in args.choices.split(",") if c]
    unknown = sorted(set(choices) - set(CHOICES))
    if unknown:
        parser.error(f"unknown --choices {unknown}")

    os.makedirs(args.work_dir, exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=30
    ).stdout.strip()
    load_before = _common.load_average()
    start = time.time()
    train_text, held_out_text = split_corpus(
        args.work_dir, int(args.train_mb * (1 << 20)), int(args.held_out_mb * (1 << 20))
    )
    records = {}
    for sentence_task, masking in {CHOICES[c][:2] for c in choices} | {("nsp", "token")}:
        records[(sentence_task, masking)] = write_records(
            train_text,
            os.path.join(args.work_dir, f"train-{sentence_task}-{masking}.tfrecord"),
            args,
            sentence_task,
            masking,
            dupe_factor=3,
            seed=1,
        )
    records["held_out_shared"] = write_records(
        held_out_text, os.path.join(args.work_dir, "held_out-nsp-token.tfrecord"), args, "nsp", "token", 1, 2
    )
    for sentence_task in ("nsp", "sop", "none"):
        records[("held_out", sentence_task)] = write_records(
            held_out_text,
            os.path.join(args.work_dir, f"held_out-{sentence_task}-token.tfrecord"),
            args,
            sentence_task,
            "token",
            1,
            2,
        )

    baseline = baselines(records, args)
    results = {}
    for name in choices:
        results[name] = [run_choice(name, seed, records, args) for seed in range(1, args.seeds + 1)]
        print(name, results[name], flush=True)
        if args.write:  # after every choice, so that a long run stopped early leaves what it measured
            write_results(results, baseline, choices, commit, load_before, start, args)
    print("\n".join(table(results, baseline)))


def write_results(results, baseline, choices, commit, load_before, start, args) -> None:
    command = "python benchmarks/pretraining_objectives.py " + " ".join(sys.argv[1:])
    missing = [name for name in choices if name not in results]
    body = [
        f"- Command: `{command}`",
        f"- Commit: {commit}",
        *_common.header_lines(command, load_before, _common.load_average(), {})[:3],
        f"- Wall time: {time.time() - start:,.0f} s. The machine was shared with other agents' work while it ran:"
        " sequences/s are indicative only (ratios within this run).",
        f"- Model: L={args.num_layers}, H={args.hidden_size}, seq {args.max_seq_length}, {args.steps} steps, "
        f"batch {args.batch_size} (LAMB {args.lamb_batch_multiplier * args.batch_size}), "
        f"lr {args.learning_rate} (LAMB {args.lamb_learning_rate}), 10% warm-up, dropout {args.dropout}; "
        f"{args.train_mb} MB of "
        f"training text, {args.held_out_mb} MB held out; mean ± sd over {args.seeds} seeds.",
        *([f"- Not run (the run was stopped first): {', '.join(missing)}."] if missing else []),
        "",
        *table(results, baseline),
    ]
    _common.write_section("pretraining_objectives", "Pretraining objectives side by side", body)


if __name__ == "__main__":
    main()
