"""The sections of `bert_tf.jobs.probe_layers`' report.json: the recipe, each task's data, each model's rows.

`bert_tf.probing.report` writes them out (report.json, report.md, layers.png).
"""

from __future__ import annotations

from bert_tf.data.finetuning_readers import count_unseen_labels
from bert_tf.jobs.probe_layers.config import ProbeLayersConfig
from bert_tf.jobs.probe_layers.fine_tuned_row import finetune_steps
from bert_tf.probing import data as data_lib


def recipe(config: ProbeLayersConfig, num_train_items: dict) -> dict:
    """How every row was computed, in words ({task: training items} gives the fine-tuned row's epochs)."""
    from bert_tf.probing import probes

    def fine_tuned_steps():
        return "; ".join(
            f"{task} {steps} steps ({steps * config.finetune_batch_size / n:.1f} epochs)"
            for task, n in num_train_items.items()
            for steps in [finetune_steps(config, n)]
        )

    return {
        "linear_probe": "standardised features, multinomial logistic regression (scikit-learn, L2, lbfgs); "
        f"C chosen from {list(probes.STRENGTHS)} by accuracy on a {config.dev_fraction:.0%} development split "
        "of the training file; accuracy on the test file",
        "scalar_mix": "standardised layers, softmax-weighted sum times a scale, then a dense softmax layer, "
        f"trained with Adam (learning rate {probes.MIX_LEARNING_RATE}, batch {probes.MIX_BATCH_SIZE} or fewer rows "
        f"for at least {probes.MIX_MIN_STEPS_PER_EPOCH} steps an epoch); the best "
        f"of {probes.MIX_EPOCHS} epochs on the development split",
        "word": f"{config.word_piece} WordPiece of each word",
        "sentence_mean": "mean over real tokens ([CLS] and [SEP] included)",
        "sentence_cls": "the [CLS] position",
        "fine_tuned": (
            f"bert_tf.jobs.finetuning.job.run_finetuning, {config.finetune_epochs:g} epoch(s) and at least "
            f"{config.finetune_min_steps} steps ({fine_tuned_steps()}), peak learning rate "
            f"{config.finetune_learning_rate:g}, batch {config.finetune_batch_size} (as {config.finetune_microbatches} "
            "micro-batches), 10% warm-up then linear decay"
            if config.finetune
            else None
        ),
        "max_seq_length": config.max_seq_length,
        "seed": config.seed,
    }


def data_summary(task, train, test, files) -> dict:
    """A task's files, their sizes and labels, and the test labels the training file never has."""
    summary = {"train_file": files[1], "test_file": files[2]}
    unseen = count_unseen_labels(data_lib.task_labels(task, test), set(data_lib.task_labels(task, train)))
    if unseen:
        summary["unseen_test_labels"] = unseen
    if task == data_lib.TOKEN:
        summary.update(
            train_sentences=len(train.sentences),
            train_words=train.num_words,
            test_sentences=len(test.sentences),
            test_words=test.num_words,
            labels=sorted(set(data_lib.task_labels(task, train))),
        )
    else:
        summary.update(train_texts=len(train.texts), test_texts=len(test.texts), labels=sorted(set(train.labels)))
    return summary


def model_section(results: dict) -> dict:
    """The JSON of one model's rows: accuracies, the chosen strengths, the scalar mix, the best single layer."""
    layers = {name: r for name, r in results.items() if name.startswith("layer_")}
    best = max(layers, key=lambda name: (layers[name].test_accuracy, -int(name.split("_")[1])))
    mix = results["scalar_mix"]
    return {
        "rows": {name: r.test_accuracy for name, r in results.items()},
        "dev_accuracy": {name: r.dev_accuracy for name, r in results.items()},
        "strength": {name: r.strength for name, r in results.items() if r.strength is not None},
        "best_layer": best,
        "scalar_mix": {
            "weights": list(mix.mix_weights),
            "scale": mix.mix_scale,
            "expected_layer": mix.expected_layer,
        },
    }
