r"""A student's gap to its teacher over teacher seeds: a teacher fine-tuned per seed, a student distilled from each.

    python -m experiments.demo --output_dir=runs/demo                     # once: its step 4 converts the encoder
    python -m experiments.export --model_dir=runs/demo/real_weights/model --export_dir=runs/minilm_export
    python benchmarks/distillation_gap.py --export_dir=runs/minilm_export --work_dir=runs/gap
    python benchmarks/distillation_gap.py --export_dir=... --work_dir=... --seeds=1,2,3 --student_num_layers=3 \
        --distill_flags="--intermediate_num_layers=4 --alpha=1 --temperature=1"

Why several teachers: a teacher is itself a draw. The main job's fine-tuning of all-MiniLM-L6-v2, run
twice with the same command and seed, can score most of a point apart on the held-out reviews (training on a
CPU is not bit-reproducible; benchmarks/RESULTS.md), about the gap a student is asked to keep. A student
measured against one teacher inherits that teacher's luck on the test set; the mean over seeds of (student -
its teacher) does not.
`experiments.distill_frontier` answers the user's question for the one teacher they have; this script measures
the recipe.

For each seed s, every step a fresh process, a finished step reused when the command is run again:

1. the teacher, `work_dir/teacher_seed_<s>/task_model`: `experiments.classify_with_hub` with the main job's former
   recipe (before it fine-tuned with `experiments.finetune --packing`: the encoder SavedModel of `--export_dir`
   through `hub.KerasLayer`, the bundled 4,000 training reviews, length 128, one epoch, batch 32, peak 1e-4 with
   10% warm-up, batches grouped by length) and `--seed=s`;
2. the student, `work_dir/student_seed_<s>`: `experiments.distill --student_num_layers=N` from that teacher on
   the same data (length 128, three epochs, peak 1e-4, batch 32), `--seed=s`, plus `--distill_flags`.

Both are scored on the 1,000 held-out reviews. The table (teacher, student and gap per seed, and their means)
goes to stdout and, unless --no-write, into the `distillation_gap` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common

SECTION = "distillation_gap"
TRAIN_FILE = os.path.join(_common.ROOT, "data", "fine_foods_train.tsv")
EVAL_FILE = os.path.join(_common.ROOT, "data", "fine_foods_test.tsv")
# The main job's former real-weights recipe, through hub.KerasLayer (it now runs experiments.finetune --packing).
TEACHER_FLAGS = [
    "--num_train_epochs=1",
    "--learning_rate=1e-4",
    "--warmup_proportion=0.1",
    "--max_train_examples=0",
    "--max_eval_examples=0",
    "--label_names=other,great",
    "--group_by_length",
]
STUDENT_FLAGS = [
    "--text_a_column=text",
    "--label_column=label",
    "--max_seq_length=128",
    "--num_train_epochs=3",
    "--learning_rate=1e-4",
    "--eval_batch_size=64",
]


def _run(module: str, flags: list, log_path: str, timeout: int) -> None:
    command = [sys.executable, "-m", module, *flags]
    print("$ " + shlex.join(["python", "-m", module, *flags]), flush=True)
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(
            command, cwd=_common.ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False
        )
    if proc.returncode:
        raise RuntimeError(f"{module} exited {proc.returncode}; its output: {log_path}")


def teacher_accuracy(work_dir: str, seed: int, export_dir: str, timeout: int) -> tuple[float, str]:
    """Fine-tunes (or reuses) seed `seed`'s teacher; returns (its held-out accuracy, its model directory)."""
    teacher_dir = os.path.join(work_dir, f"teacher_seed_{seed}")
    results_path = os.path.join(teacher_dir, "classifier", "results.json")
    task_model_dir = os.path.join(teacher_dir, "task_model")
    if not os.path.exists(results_path):
        if os.path.exists(teacher_dir):
            raise RuntimeError(f"{teacher_dir} holds an unfinished teacher; delete it to train it again.")
        os.makedirs(teacher_dir)
        flags = [
            f"--export_dir={os.path.abspath(export_dir)}",
            f"--train_file={TRAIN_FILE}",
            f"--eval_file={EVAL_FILE}",
            f"--output_dir={os.path.join(teacher_dir, 'classifier')}",
            f"--task_model_dir={task_model_dir}",
            f"--seed={seed}",
            *TEACHER_FLAGS,
        ]
        _run("experiments.classify_with_hub", flags, os.path.join(work_dir, f"teacher_seed_{seed}.log"), timeout)
    with open(results_path, encoding="utf-8") as f:
        return json.load(f)["test_accuracy"], task_model_dir


def student_accuracy(
    work_dir: str, seed: int, teacher_dir: str, num_layers: int, extra_flags: list, timeout: int
) -> float:
    """Distils (or resumes) seed `seed`'s student from `teacher_dir`; returns its held-out accuracy."""
    student_dir = os.path.join(work_dir, f"student_seed_{seed}")
    flags = [
        f"--teacher_dir={teacher_dir}",
        f"--output_dir={student_dir}",
        f"--train_file={TRAIN_FILE}",
        f"--eval_file={EVAL_FILE}",
        f"--student_num_layers={num_layers}",
        f"--seed={seed}",
        *STUDENT_FLAGS,
        *extra_flags,
    ]
    # A finished student is resumed: it restores its last checkpoint, trains nothing and is scored again.
    _run("experiments.distill", flags, os.path.join(work_dir, f"student_seed_{seed}.log"), timeout)
    with open(os.path.join(student_dir, "distillation_results.json"), encoding="utf-8") as f:
        return json.load(f)["student"]["accuracy"]


def table(rows: list, num_layers: int) -> list:
    """The Markdown table of `rows` ({"seed", "teacher", "student"}), with the means; gaps in points."""
    lines = [
        f"| seed | teacher (6 layers) | student ({num_layers} layers) | gap (points) |",
        "|---:|---:|---:|---:|",
    ]
    for row in rows:
        gap = 100 * (row["student"] - row["teacher"])
        lines.append(f"| {row['seed']} | {row['teacher']:.3f} | {row['student']:.3f} | {gap:+.1f} |")
    if rows:
        teacher = statistics.fmean(r["teacher"] for r in rows)
        student = statistics.fmean(r["student"] for r in rows)
        lines.append(f"| **mean** | **{teacher:.3f}** | **{student:.3f}** | **{100 * (student - teacher):+.1f}** |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--export_dir",
        required=True,
        help="experiments.export's directory of all-MiniLM-L6-v2 (encoder/, preprocess/).",
    )
    parser.add_argument("--work_dir", required=True, help="Teachers, students and logs; a rerun reuses them.")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--student_num_layers", type=int, default=3)
    parser.add_argument("--distill_flags", default="", help="More experiments.distill flags, one string.")
    parser.add_argument("--timeout", type=int, default=3600, help="Seconds for one teacher or student.")
    parser.add_argument("--no-write", dest="write", action="store_false")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: a comma-separated list of integers, got {args.seeds!r}")
    if not os.path.isfile(os.path.join(args.export_dir, "encoder", "saved_model.pb")):
        parser.error(f"--export_dir: no encoder/saved_model.pb in {args.export_dir} (experiments.export writes it)")
    os.makedirs(args.work_dir, exist_ok=True)
    extra_flags = shlex.split(args.distill_flags)
    load_before, commit = _common.load_average(), _common.git_commit()
    rows = []
    for seed in seeds:
        teacher, teacher_dir = teacher_accuracy(args.work_dir, seed, args.export_dir, args.timeout)
        student = student_accuracy(args.work_dir, seed, teacher_dir, args.student_num_layers, extra_flags, args.timeout)
        rows.append({"seed": seed, "teacher": teacher, "student": student})
        print(f"seed {seed}: teacher {teacher:.4f}, student {student:.4f}", flush=True)
    command = "python benchmarks/distillation_gap.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    header = _common.header_lines(command, load_before, _common.load_average(), {}, commit)
    recipe = (
        f"Teacher per seed: the main job's step 6 (`experiments.classify_with_hub`, {' '.join(TEACHER_FLAGS)}); "
        f"student per seed: `experiments.distill --student_num_layers={args.student_num_layers} "
        f"{' '.join(STUDENT_FLAGS + extra_flags)}` from that teacher with the same seed. Accuracy on the 1,000 "
        "held-out reviews."
    )
    _common.publish(
        SECTION,
        f"distillation_gap: a {args.student_num_layers}-layer student against its teacher, over teacher seeds",
        header + ["", recipe, ""] + table(rows, args.student_num_layers),
        args.write,
    )


if __name__ == "__main__":
    main()
