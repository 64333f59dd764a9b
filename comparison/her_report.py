"""
The goal-conditioned study's report (``comparison/her.py``): per task, the IQM over seeds of each variant's final
success rate and of its mean success rate over the run's evaluations (the area under its curve), with bootstrap
intervals (``comparison.statistics``); prioritized HER against HER, seed by seed (the runs of a seed share its
training envs' seed): the mean difference with its bootstrap interval and the sign test of the split; and the success
curves, the mean over seeds with the bootstrap interval of that mean at each evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from comparison.experiment import write_csv_atomically, write_text_atomically
from comparison.her import EVALUATION_COLUMNS, REFERENCE, TASKS, HerConfig, finished_evaluations
from comparison.statistics import DEFAULT_BOOTSTRAP, keyed_generator, paired_mean_difference_ci, same_seed_comparison
from comparison.study_report import (
    SCORES,
    by_seed,
    collect_rows,
    mean_interval_band,
    plot_task_curves,
    run_scores,
    score_table,
)

SUCCESS_TABLE = "success.csv"
SUMMARY_FILE = "summary.md"
CURVES_FILE = "success_curves.png"
COLORS = {"her": "black", "per_her": "tab:red"}
#: What each task trains, for the report's headings.
ALGORITHMS = {"sac": "SAC", "dqn": "DQN"}


def collect_evaluations(configs: Sequence[HerConfig], out_dir: Path) -> pd.DataFrame:
    """The ``evaluations.csv`` rows of the finished runs of ``configs``, in plan order (none: the columns only)."""
    return collect_rows(configs, out_dir, finished_evaluations, EVALUATION_COLUMNS)


def task_title(task: str) -> str:
    """``task``, its env and its algorithm, e.g. ``fetch_reach (FetchReach-v4, SAC)``."""
    return f"{task} ({TASKS[task].env_id}, {ALGORITHMS[TASKS[task].algorithm]})"


def paired_cells(reference: dict[int, float], compared: dict[int, float], key: tuple[str, ...]) -> list[str]:
    """
    The mean over shared seeds of ``compared - reference`` with its bootstrap interval, and the same-seed split with
    its sign test (``-`` where no seed is shared).
    """
    split = same_seed_comparison(reference, compared)
    if split.seeds == 0:
        return ["-", "-"]
    difference, interval = paired_mean_difference_ci(reference, compared, rng=keyed_generator(0, "paired", *key))
    return [
        f"{difference:+.2f} [{interval[0]:+.2f}, {interval[1]:+.2f}]",
        f"{split.above}/{split.below} (p={split.p_value:.2f})",
    ]


def comparison_table(scores: pd.DataFrame, task: str) -> list[str]:
    """Markdown rows: each other variant against HER on ``task``, seed by seed, for each score (none without HER)."""
    lines = [
        f"| variant vs {REFERENCE} | seeds | final: mean difference [{DEFAULT_BOOTSTRAP.level} CI] | final: same seed "
        f"above/below | over the run: mean difference [{DEFAULT_BOOTSTRAP.level} CI] | over the run: same seed "
        "above/below |",
        "|---|---|---|---|---|---|",
    ]
    reference = {score: by_seed(scores, task, REFERENCE, score) for score in SCORES}
    if not reference["final"]:
        return [*lines, f"| (no {REFERENCE} runs yet) | - | - | - | - | - |"]
    for variant in dict.fromkeys(scores.loc[scores["task"] == task, "variant"]):
        if variant == REFERENCE:
            continue
        cells = []
        for score in SCORES:
            compared = by_seed(scores, task, variant, score)
            cells += paired_cells(reference[score], compared, (score, task, variant))
        shared = len(set(reference["final"]) & set(by_seed(scores, task, variant, "final")))
        lines.append(f"| {variant} | {shared} | {' | '.join(cells)} |")
    return lines


def plot_curves(rows: pd.DataFrame, path: Path) -> None:
    """One panel per task: each variant's success rate against env steps, mean over seeds, its bootstrap interval."""
    plot_task_curves(
        rows,
        path,
        "success_rate",
        mean_interval_band,
        title=f"HER and prioritized HER: deterministic evaluations, mean over seeds, band its {DEFAULT_BOOTSTRAP.level}"
        " bootstrap CI",
        ylabel="success rate",
        panel_titles={task: task_title(task) for task in TASKS},
        colors=COLORS,
        ylim=(-0.03, 1.03),
    )


def task_section(scores: pd.DataFrame, task: str) -> list[str]:
    """Markdown of ``task``: its heading, the variants' scores and the comparison with HER."""
    table = score_table(
        scores, task, final_name="final success rate", auc_name="success rate over the run", digits=2, seed_digits=2
    )
    return ["", f"## {task_title(task)}", "", *table, "", *comparison_table(scores, task)]


def write_report(configs: Sequence[HerConfig], out_dir: Path, command: str) -> Path:
    """
    Write ``success.csv`` (all finished runs), ``success_curves.png`` and ``summary.md`` into ``out_dir``.

    :param configs: the planned runs (the finished ones are reported)
    :param out_dir: the study's folder
    :param command: the command that runs the whole plan, quoted in the summary
    :return: the summary's path
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = collect_evaluations(configs, out_dir)
    write_csv_atomically(rows, out_dir / SUCCESS_TABLE)
    scores = run_scores(rows, "success_rate")
    lines = [
        "# Goal-conditioned tasks: HER with uniform and prioritized replay",
        "",
        "Written by `scripts/her_study.py`; the settings and their sources are in `comparison/her.py`'s docstring.",
        "",
        f"Command: `{command}`",
        "",
        f"Finished runs: {len(scores)} of {len(configs)} planned.",
    ]
    if not rows.empty:
        plot_curves(rows, out_dir / CURVES_FILE)
        lines += ["", f"![success curves]({CURVES_FILE})"]
        for task in dict.fromkeys(scores["task"]):
            lines += task_section(scores, str(task))
    lines += [
        "",
        "Success rate: the share of an evaluation's episodes (deterministic policy, fixed reset seeds) that end in "
        "success. Final: at the last evaluation; over the run: the mean over all evaluations, step 0 included (the "
        "area under the curve). IQM: mean of the middle half of the seeds (with 5 seeds, of the middle 3); "
        f"intervals: percentile bootstrap over seeds, {DEFAULT_BOOTSTRAP.n_resamples} resamples. Mean difference: "
        f"over the seeds both variants ran, of the variant's score minus {REFERENCE}'s on the same seed; same seed: "
        f"on how many of them the variant ends above and below {REFERENCE}, with the sign test's p-value.",
        "",
    ]
    path = out_dir / SUMMARY_FILE
    write_text_atomically("\n".join(lines), path)
    return path
