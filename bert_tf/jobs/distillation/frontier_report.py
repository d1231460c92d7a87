"""The frontier's report files: `report.md` (a Markdown table, fastest first) and `frontier.png`."""

from __future__ import annotations

REPORT_JSON, REPORT_MD, PLOT_NAME = "report.json", "report.md", "frontier.png"


def report_markdown(report: dict) -> str:
    """The report as a Markdown table, fastest first."""
    metric = report["metric"]
    machine = report["machine"]
    seeds = report["seeds"]
    several = len(seeds) > 1
    lines = [
        "# Distillation frontier",
        "",
        f"Teacher `{report['teacher_dir']}` ({report['task']}), held-out {metric} on "
        f"{report['num_eval_examples']} examples of `{report['eval_file']}`"
        + (f"; a student's {metric} is the mean over seeds {', '.join(map(str, seeds))}" if several else "")
        + f". Speed: {report['speed']['what']}, {report['speed']['examples']} sequences (max length "
        f"{report['max_seq_length']}, batch {report['speed']['batch_size']}), median of {report['speed']['rounds']} "
        "interleaved rounds.",
        f"Machine: {machine['cpu']} ({machine['instruction_set']}), "
        f"{machine['cpu_count']} CPUs, load average {machine['load_average']} at "
        f"{machine['date']}.",
        "",
        f"| model | layers | form | {metric} | "
        + ("per seed | " if several else "")
        + "change | sequences/s | speed-up |",
        "|---|---:|---|---:|" + ("---|" if several else "") + "---:|---:|---:|",
    ]
    for row in sorted(report["rows"], key=lambda r: -r["sequences_per_second"]):
        per_seed = " / ".join(f"{m:.4f}" for m in row["metric_per_seed"])
        lines.append(
            f"| {row['model']} | {row['num_layers']} | {row['form']} | {row['metric']:.4f} | "
            + (f"{per_seed} | " if several else "")
            + f"{row['metric_change']:+.4f} | {row['sequences_per_second']:.1f} | {row['speedup']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    markers = {"float32": "o", "bfloat16": "s", "int8": "^"}
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for form, marker in markers.items():
        rows = [r for r in report["rows"] if r["form"] == form]
        if not rows:
            continue
        axes.scatter([r["sequences_per_second"] for r in rows], [r["metric"] for r in rows], marker=marker, label=form)
        for r in rows:
            axes.annotate(
                f"{r['model']}",
                (r["sequences_per_second"], r["metric"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    axes.set_xlabel("sequences / s (exported encoder SavedModel)")
    axes.set_ylabel(f"held-out {report['metric']}")
    axes.set_title("Distillation frontier")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
