"""The layer-probing report: `report.json` (every number), `report.md` (a table per task), `layers.png`."""

from __future__ import annotations

import json
import os

from bert_tf import file_io

SECTIONS = ("token", "sentence_mean", "sentence_cls")
TITLES = {
    "token": "Token level: one tag per word",
    "sentence_mean": "Sentence level: mean over real tokens",
    "sentence_cls": "Sentence level: [CLS]",
}
COMBINATIONS = ("second_to_last", "last", "mean_last_four", "concat_last_four", "scalar_mix")
ROW_NAMES = {
    "second_to_last": "second-to-last hidden",
    "last": "last hidden",
    "mean_last_four": "mean of the last four",
    "concat_last_four": "concatenation of the last four",
    "scalar_mix": "scalar mix of all layers",
    "fine_tuned": "whole encoder fine-tuned (reference)",
}


def layer_names(section: dict) -> list:
    return sorted((name for name in section["rows"] if name.startswith("layer_")), key=lambda n: int(n[6:]))


def write_report(output_dir: str, report: dict) -> None:
    """Writes the three files, each atomically."""
    os.makedirs(output_dir, exist_ok=True)
    file_io.write_text(os.path.join(output_dir, "report.json"), json.dumps(report, indent=2, sort_keys=True) + "\n")
    file_io.write_text(os.path.join(output_dir, "report.md"), markdown(report))
    with file_io.atomic_path(os.path.join(output_dir, "layers.png")) as tmp_path:
        plot(report, tmp_path)


def _fmt(value) -> str:
    return "" if value is None else f"{value:.4f}"


def _delta(value, best) -> str:
    return "" if value is None else f"{value - best:+.4f}"


def markdown(report: dict) -> str:
    model = report["model"]
    lines = [
        "# Which layer? A probing report",
        "",
        f"Model: `{model['model_dir'] or model['checkpoint']}` ({model['num_hidden_layers']} layers, "
        f"hidden size {model['hidden_size']}). Layer 0 is the embedding output, layer {model['num_hidden_layers']} "
        "the last Transformer layer. Accuracy on the test file; Δ is the difference from the best single layer; "
        "'random init' is the same architecture with random weights under the same probes.",
        "",
    ]
    for key in SECTIONS:
        if key not in report:
            continue
        section = report[key]
        rows, best_name = section["rows"], section["best_layer"]
        best = rows[best_name]
        random_rows = section.get("random_init", {}).get("rows", {})
        lines += [
            f"## {TITLES[key]}",
            "",
            "| row | accuracy | Δ best layer | random init |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name in layer_names(section):
            label = f"{name} (embeddings)" if name == "layer_0" else name
            if name == best_name:
                label = f"**{label}** (best layer)"
            lines.append(
                f"| {label} | {_fmt(rows[name])} | {_delta(rows[name], best)} | {_fmt(random_rows.get(name))} |"
            )
        for name in COMBINATIONS + ("fine_tuned",):
            if name in rows:
                label = ROW_NAMES[name]
                if name == "scalar_mix":
                    label += f" (expected layer {section['scalar_mix']['expected_layer']:.2f})"
                lines.append(
                    f"| {label} | {_fmt(rows[name])} | {_delta(rows[name], best)} | {_fmt(random_rows.get(name))} |"
                )
        baseline = section["baseline"]
        lines.append(
            f"| non-contextual baseline ({baseline['name']}) | {_fmt(baseline['accuracy'])} | "
            f"{_delta(baseline['accuracy'], best)} | |"
        )
        weights = ", ".join(f"{w:.3f}" for w in section["scalar_mix"]["weights"])
        lines += ["", f"Scalar-mix weights, layer 0 first: {weights} (scale {section['scalar_mix']['scale']:.3f}).", ""]
    data = report["data"]
    lines += ["## Data and recipe", ""]
    for task, summary in data.items():
        counts = ", ".join(f"{k} {v}" for k, v in summary.items() if isinstance(v, int))
        lines.append(f"- {task}: `{summary['train_file']}` / `{summary['test_file']}`: {counts}.")
        unseen = summary.get("unseen_test_labels")
        if unseen:
            shown = ", ".join(f"{label} {count}" for label, count in unseen.items())
            lines.append(
                f"  {sum(unseen.values())} test {'words' if task == 'token' else 'texts'} carry labels that the "
                f"training file never has ({shown}): no probe can predict them, so they count as errors in every row."
            )
    for name, recipe in report["recipe"].items():
        if recipe is not None:
            lines.append(f"- {name}: {recipe}")
    seconds = ", ".join(f"{k} {v:.0f} s" for k, v in report["seconds"].items())
    lines += [f"- seconds: {seconds}", ""]
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    """Accuracy per layer for each task (pretrained and random init), combinations as lines, mix weights as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [key for key in SECTIONS if key in report]
    figure, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 4.2), squeeze=False)
    for axis, key in zip(axes[0], keys):
        section = report[key]
        names = layer_names(section)
        layers = list(range(len(names)))
        weights_axis = axis.twinx()
        weights_axis.bar(layers, section["scalar_mix"]["weights"], color="0.85", width=0.6, label="scalar-mix weight")
        weights_axis.set_ylim(0, max(1.0, max(section["scalar_mix"]["weights"]) * 1.1))
        weights_axis.set_ylabel("scalar-mix weight")
        axis.set_zorder(weights_axis.get_zorder() + 1)
        axis.patch.set_visible(False)
        axis.plot(layers, [section["rows"][n] for n in names], "o-", color="C0", label="pretrained")
        if "random_init" in section:
            axis.plot(
                layers, [section["random_init"]["rows"][n] for n in names], "s--", color="C3", label="random init"
            )
        styles = {"mean_last_four": "C1", "concat_last_four": "C2", "scalar_mix": "C4", "fine_tuned": "k"}
        for name, color in styles.items():
            if name in section["rows"]:
                axis.axhline(section["rows"][name], color=color, linestyle=":", label=ROW_NAMES[name])
        axis.axhline(section["baseline"]["accuracy"], color="0.5", linestyle="-.", label="non-contextual baseline")
        axis.set_xticks(layers)
        axis.set_xlabel("layer (0 = embeddings)")
        axis.set_ylabel("test accuracy")
        axis.set_title(TITLES[key], fontsize=10)
        axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=110)
    plt.close(figure)
