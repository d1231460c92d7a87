"""The demo's results: the pretraining curves read back, `summary.json`, `curves.png` and the printed summary."""

import os
import textwrap

from bert_tf import text_table

# The summary's lines fit a terminal of this width.
WIDTH = 80
INDENT = "   "


def read_scalars(summary_dir):
    """{tag: [(step, value)]} from the TensorBoard event files in `summary_dir`."""
    import tensorflow as tf

    scalars = {}
    if not os.path.isdir(summary_dir):
        return scalars
    for name in sorted(os.listdir(summary_dir)):
        if not name.startswith("events.out"):
            continue
        for record in tf.data.TFRecordDataset(os.path.join(summary_dir, name)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.HasField("tensor"):
                    number = float(tf.make_ndarray(value.tensor))
                elif value.HasField("simple_value"):
                    number = float(value.simple_value)
                else:
                    continue
                scalars.setdefault(value.tag, []).append((int(event.step), number))
    return scalars


def _last(series):
    return series[-1][1] if series else None


def arrow(series, digits=3):
    return " -> ".join(f"{value:.{digits}f}" for _, value in series)


def summarize(data, pretrained, baseline, classifiers, served, probes, steps, distillation=None, skipped=()):
    """The numbers of `summary.json`: accuracies, the MLM/NSP results with their baselines, the new sentences'
    predictions, the tours' results (the distilled student against its teacher) or the commands that run the
    skipped ones, seconds per step."""
    accuracy = {label: result["test_accuracy"] for label, result in classifiers.items()}
    return {
        "majority_accuracy": baseline["majority_accuracy"],
        "real_weights_accuracy": accuracy.get("real_weights"),
        "random_init_accuracy": accuracy.get("random_init"),
        "from_scratch_accuracy": accuracy.get("from_scratch"),
        "mlm_accuracy": _last(pretrained["eval_mlm_accuracy"]),
        "mlm_unigram_accuracy": data["mlm_unigram_accuracy"],
        "mlm_loss": _last(pretrained["eval_mlm_loss"]),
        "mlm_unigram_loss": data["mlm_unigram_loss"],
        "nsp_accuracy": _last(pretrained["eval_nsp_accuracy"]),
        "nsp_chance_accuracy": 0.5,
        "nsp_majority_accuracy": data["nsp_majority_accuracy"],
        "nsp_loss": _last(pretrained["eval_nsp_loss"]),
        "nsp_prior_loss": data["nsp_prior_loss"],
        "test_examples": baseline["test_examples"],
        "train_examples": baseline["train_examples"],
        "real_weights_packing": classifiers["real_weights"]["packing"],
        "new_sentences": served["predictions"],
        "probe_layers": {label: value for label, value in (probes or {}).items() if label != "seconds"} or None,
        "distillation": {key: value for key, value in (distillation or {}).items() if key != "seconds"} or None,
        "skipped_tours": {s["tour"]: s["command"] for s in skipped},
        "seconds": {step.key: round(step.seconds, 1) for step in steps},
    }


def plot_curves(path, pretrain_dir, summary, classifiers):
    """Pretraining against its baselines, and the classifiers' held-out accuracy, in one PNG."""
    import matplotlib.pyplot as plt

    fig = curves_figure(pretrain_dir, summary, classifiers)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def curves_figure(pretrain_dir, summary, classifiers):
    """The figure of `plot_curves` (a matplotlib Figure, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evaluation = read_scalars(os.path.join(pretrain_dir, "summaries", "eval"))
    train = read_scalars(os.path.join(pretrain_dir, "summaries", "train"))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    panels = (
        (axes[0], "mlm_loss", summary["mlm_unigram_loss"], "MLM loss (nats)", "unigram baseline"),
        (axes[1], "mlm_accuracy", summary["mlm_unigram_accuracy"], "accuracy", "MLM unigram baseline"),
    )
    for ax, tag, baseline, ylabel, baseline_label in panels:
        for source, series, style in (("train", train, "-"), ("held-out", evaluation, "o-")):
            if tag in series:
                ax.plot(*zip(*series[tag]), style, label=f"{source} {tag}")
        ax.axhline(baseline, color="gray", linestyle="--", label=baseline_label)
        ax.set(xlabel="pretraining step", ylabel=ylabel)
    if "nsp_accuracy" in evaluation:
        axes[1].plot(*zip(*evaluation["nsp_accuracy"]), "s-", label="held-out nsp_accuracy")
    axes[1].axhline(0.5, color="black", linestyle=":", label="NSP chance")
    axes[1].axhline(summary["nsp_majority_accuracy"], color="tab:red", linestyle=":", label="NSP majority label")
    axes[0].set_title("Pretraining from scratch: masked LM")
    axes[1].set_title("Pretraining from scratch: accuracy")
    # Two short lines each: one-line labels ran into each other under the bars.
    names = {
        "majority": "training\nmajority class",
        "random_init": "random\ninit",
        "from_scratch": "pretrained\nhere",
        "real_weights": "real\nweights",
    }
    bars = {"majority": summary["majority_accuracy"]}
    bars.update({label: result["test_accuracy"] for label, result in classifiers.items()})
    labels = [label for label in names if label in bars]
    axes[2].bar(
        [names[label] for label in labels],
        [bars[label] for label in labels],
        color=["gray", "tab:orange", "tab:green", "tab:blue"][: len(labels)],
    )
    for i, label in enumerate(labels):
        axes[2].text(i, bars[label] + 0.005, f"{bars[label]:.3f}", ha="center")
    axes[2].set(title="Sentiment fine-tuning: held-out accuracy", ylim=(0.4, 1.0))
    for ax in axes[:2]:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def print_summary(steps, summary, total_seconds, output_dir):
    """Prints the summary, every line at most `WIDTH` (80) columns: a terminal's, or a log's width."""
    print("\n== Summary")
    _print_steps(steps)
    _say(f"held-out accuracy on {summary['test_examples']:,} reviews:")
    rows = (
        ("training majority class, scored on test", summary["majority_accuracy"]),
        ("fine-tuned from a randomly initialised encoder", summary["random_init_accuracy"]),
        ("fine-tuned from the encoder pretrained here", summary["from_scratch_accuracy"]),
        ("fine-tuned from real published weights (all-MiniLM-L6-v2)", summary["real_weights_accuracy"]),
    )
    _print_table(["classifier", "accuracy"], [[name, _accuracy(value)] for name, value in rows])
    _say("new sentences, served by the exported classifier (score: probability of great):")
    _print_table(
        ["sentence", "score", "label"],
        [[p["text"], f"{p['score']:.3f}", p["label"]] for p in summary["new_sentences"]],
    )
    _say(
        f"pretraining from scratch, held-out: MLM accuracy {summary['mlm_accuracy']:.3f} vs "
        f"{summary['mlm_unigram_accuracy']:.3f} unigram, MLM loss {summary['mlm_loss']:.2f} vs "
        f"{summary['mlm_unigram_loss']:.2f} unigram, NSP accuracy {summary['nsp_accuracy']:.3f} vs 0.5 chance "
        f"({summary['nsp_majority_accuracy']:.3f} for always the majority label), NSP loss "
        f"{summary['nsp_loss']:.3f} vs {summary['nsp_prior_loss']:.3f} from the label frequencies"
    )
    probes = summary["probe_layers"]
    names = {"token": "POS tags", "sentence_mean": "reviews, mean", "sentence_cls": "reviews, [CLS]"}
    titles = {"real_weights": "real weights", "from_scratch": "pretrained here"}
    if probes:
        _say(
            "which layer? linear probes on frozen features (test accuracy; real weights: all-MiniLM-L6-v2; "
            "POS tags by each word's first WordPiece, reviews by the mean of their tokens or by [CLS]; best: the "
            "best layer Ln (L0: the embeddings); random: the same model with random weights, its best layer):"
        )
        probe_rows = [
            [
                f"{titles[label]}, {names[key]}",
                f"{row['best_layer'].replace('layer_', 'L')} {row['best_accuracy']:.3f}",
                _accuracy(row["last_layer_accuracy"]),
                _accuracy(row["scalar_mix_accuracy"]),
                _accuracy(row["random_init_best_accuracy"]),
                _accuracy(row["baseline_accuracy"]),
            ]
            for label, result in probes.items()
            for key, row in result.items()
            if key in names
        ]
        _print_table(["model, task", "best", "last", "mix", "random", "baseline"], probe_rows)
        for result in probes.values():
            _say(f"report: {result['report_dir']}/report.md, figure: {result['report_dir']}/layers.png", blank=False)
    d = summary.get("distillation")  # None unless --tours has distillation
    if d:
        _say(
            f"smaller and faster: the real-weights classifier distilled into a {d['student_layers']}-layer "
            f"student (length {d['max_seq_length']}; sequences/s of the exported encoder SavedModels, timed "
            f"interleaved on {d['speed_examples']} held-out reviews):"
        )
        rows = [
            [
                f"{name} ({d[f'{name}_layers']} layers)",
                f"{d[f'{name}_accuracy']:.3f}",
                f"{d[f'{name}_sequences_per_second']:.1f}",
                f"{speedup:.2f}x",
            ]
            for name, speedup in (("teacher", 1.0), ("student", d["speedup"]))
        ]
        _print_table(["model", "held-out accuracy", "sequences/s", "speed-up"], rows)
        _say(f"report: {d['report_dir']}/report.md", blank=False)
    _print_skipped_tours(summary)
    _say(
        f"steps {sum(step.seconds for step in steps):.0f} s in all; this run {total_seconds:.0f} s "
        f"(finished steps are reused). Results: {output_dir}/summary.json, curves: {output_dir}/curves.png, "
        f"TensorBoard: tensorboard --logdir {output_dir}"
    )


def _accuracy(value):
    return "skipped" if value is None else f"{value:.3f}"


def _print_table(header, rows, align=None):
    print("\n".join(text_table.format_table(header, rows, align=align, indent=INDENT, width=WIDTH)))


def _say(text, blank=True):
    """Prints `text` wrapped to `WIDTH`, indented (after a blank line unless `blank=False`)."""
    if blank:
        print()
    # A path longer than a line stays whole (to copy), on a line of its own.
    print("\n".join(_wrap(text, INDENT)))


def _wrap(text, indent):
    """`text` in lines of at most `WIDTH`; a path longer than a line stays whole (to copy), on its own line."""
    return textwrap.wrap(
        text, WIDTH, initial_indent=indent, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _print_steps(steps):
    """Each step's name and time on a line (wrapped names, the times in one column), its result wrapped below."""
    times = [f"{step.seconds:.0f}s" for step in steps]
    time_width = max(len(t) for t in times + ["time"])
    name_width = min(max(len(step.name) for step in steps), WIDTH - len(INDENT) - 2 - time_width)
    print(f"{INDENT}{'step'.ljust(name_width)}  {'time'.rjust(time_width)}")
    print(f"{INDENT}{'-' * name_width}  {'-' * time_width}")
    for step, seconds in zip(steps, times):
        name = textwrap.wrap(step.name, name_width) or [""]
        print(f"{INDENT}{name[0].ljust(name_width)}  {seconds.rjust(time_width)}")
        for line in name[1:]:
            print(f"{INDENT}{line}")
        if step.summary:
            print("\n".join(_wrap(step.summary, INDENT + "   ")))


def _print_skipped_tours(summary):
    """The tours this run skipped, each with the command that adds it (finished steps are reused), whole on a
    line of its own to copy."""
    commands = summary["skipped_tours"]
    if not commands:
        return
    _say(f"skipped tours (options, minutes more each): {', '.join(commands)}. To run them:")
    for command in commands.values():
        print(f"{INDENT}{command}")
