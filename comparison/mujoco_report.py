"""
The MuJoCo study's report (``comparison/mujoco.py``): per task, the IQM over seeds of each variant's final evaluation
return and of its area under the curve (the mean evaluation return over all evaluations), with bootstrap intervals
(``comparison.statistics``); each prioritized variant against uniform replay (relative difference of the IQMs, same-seed
split); across the tasks without reward noise, each variant's scores normalised by uniform's IQM on the same task; the
published figures beside them; and the learning curves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from comparison.checkpoints import resumed_notes
from comparison.experiment import write_csv_atomically, write_text_atomically
from comparison.mujoco import (
    EVALUATION_COLUMNS,
    SETTINGS_FILE,
    TASKS,
    MuJoCoConfig,
    differing_settings,
    finished_evaluations,
)
from comparison.statistics import (
    DEFAULT_BOOTSTRAP,
    NEAR_ZERO,
    iqm,
    keyed_generator,
    normalised_iqm_ci,
    relative_difference_ci,
    same_seed_comparison,
)
from comparison.study import run_dir
from comparison.study_report import (
    SCORES,
    by_seed,
    collect_rows,
    interval_cell,
    min_max_band,
    plot_task_curves,
    run_scores,
    score_table,
)

RETURNS_TABLE = "returns.csv"
SUMMARY_FILE = "summary.md"
CURVES_FILE = "learning_curves.png"
#: The reference variant of every comparison.
REFERENCE = "uniform"
COLORS = {"uniform": "black", "per": "tab:red", "relo": "tab:blue", "la3p": "tab:green"}
#: Published figures to read ours against (text only: other tasks, lengths and seeds than ours).
PUBLISHED = (
    (
        "LA3P authors (Saglam et al., JAIR 2023)",
        "SAC, MuJoCo, 10 seeds, 1M steps",
        "return relative to SAC: PER 0.94, LAP 1.09, LA3P 1.31",
    ),
    (
        "ReLo authors (Sujit et al., NeurIPS 2023)",
        "SAC, DeepMind Control Suite, 5 seeds, 1M steps",
        "IQM relative to uniform SAC: ReLo 1.039 [1.023, 1.051], PER 1.004",
    ),
    (
        "Panahi et al. (RLJ 2024)",
        "control tasks",
        "no prioritized variant consistently beats uniform replay",
    ),
)


def collect_evaluations(configs: Sequence[MuJoCoConfig], out_dir: Path) -> pd.DataFrame:
    """The ``evaluations.csv`` rows of the finished runs of ``configs``, in plan order (none: the columns only)."""
    return collect_rows(configs, out_dir, finished_evaluations, EVALUATION_COLUMNS)


def percent_cell(value: float, interval: tuple[float, float]) -> str:
    """A fraction as ``+12.3% [-4.0%, +30.1%]``."""
    return f"{value:+.1%} [{interval[0]:+.1%}, {interval[1]:+.1%}]"


def comparison_cells(reference: dict[int, float], compared: dict[int, float], key: tuple[str, ...]) -> list[str]:
    """The relative difference of the IQMs with its interval, and the same-seed split with its sign test."""
    difference = relative_difference_ci(
        list(reference.values()), list(compared.values()), rng=keyed_generator(0, "relative", *key)
    )
    split = same_seed_comparison(reference, compared)
    relative = percent_cell(difference.relative, difference.relative_ci) if difference.relative_defined else "-"
    return [relative, f"{split.above}/{split.below} (p={split.p_value:.2f})"]


def comparison_table(scores: pd.DataFrame, task: str) -> list[str]:
    """Markdown rows: each prioritized variant against uniform on ``task``, for each score (none without uniform)."""
    lines = [
        "| variant vs uniform | final: IQM difference, relative [CI] | final: same seed above/below | "
        "AUC: IQM difference, relative [CI] | AUC: same seed above/below |",
        "|---|---|---|---|---|",
    ]
    reference = {score: by_seed(scores, task, REFERENCE, score) for score in SCORES}
    if not reference["final"]:
        return [*lines, "| (no uniform runs yet) | - | - | - | - |"]
    for variant in dict.fromkeys(scores.loc[scores["task"] == task, "variant"]):
        if variant == REFERENCE:
            continue
        cells = []
        for score in SCORES:
            compared = by_seed(scores, task, variant, score)
            cells += comparison_cells(reference[score], compared, (score, task, variant))
        lines.append(f"| {variant} | {' | '.join(cells)} |")
    return lines


def normalised_tasks(scores: pd.DataFrame) -> list[str]:
    """
    The tasks of ``scores`` without reward noise (those of the published comparisons; the noisy ones have their own
    tables) where uniform has run and its IQM of every score is at least ``NEAR_ZERO``, in the order of ``scores``.
    """
    kept = []
    for task, rows in scores.groupby("task", sort=False):
        uniform = rows[rows["variant"] == REFERENCE]
        if TASKS[str(task)].noisy or uniform.empty:
            continue
        if min(iqm(uniform[score]) for score in SCORES) >= NEAR_ZERO:
            kept.append(str(task))
    return kept


def normalised_table(scores: pd.DataFrame) -> list[str]:
    """
    Markdown rows: each variant's IQM, over its runs on the tasks of ``normalised_tasks``, of its scores divided by
    uniform's IQM on the same task, with a stratified bootstrap interval that resamples uniform's runs too
    (``normalised_iqm_ci``); then the tasks left out.
    """
    tasks = normalised_tasks(scores)
    lines = [
        f"| variant | tasks | runs | final / uniform IQM: IQM [{DEFAULT_BOOTSTRAP.level} CI] | "
        f"AUC / uniform IQM: IQM [{DEFAULT_BOOTSTRAP.level} CI] |",
        "|---|---|---|---|---|",
    ]
    kept = scores[scores["task"].isin(tasks)]
    for variant, rows in kept.groupby("variant", sort=False):
        ran = [task for task in tasks if (rows["task"] == task).any()]
        cells = []
        for score in SCORES:
            pairs = [
                (
                    kept.loc[(kept["task"] == task) & (kept["variant"] == REFERENCE), score],
                    rows.loc[rows["task"] == task, score],
                )
                for task in ran
            ]
            value, interval = normalised_iqm_ci(
                pairs,
                n_resamples=DEFAULT_BOOTSTRAP.n_resamples,
                confidence=DEFAULT_BOOTSTRAP.confidence,
                rng=keyed_generator(0, "all", score, str(variant)),
            )
            cells.append(interval_cell(value, interval, digits=3))
        lines.append(f"| {variant} | {len(ran)} | {len(rows)} | {cells[0]} | {cells[1]} |")
    skipped = [task for task in dict.fromkeys(scores["task"]) if task not in tasks]
    if skipped:
        lines += [
            "",
            f"Left out (reward noise, no uniform runs, or uniform's IQM below {NEAR_ZERO:g}): {', '.join(skipped)}.",
        ]
    return lines


def settings_notes(configs: Sequence[MuJoCoConfig], out_dir: Path) -> list[str]:
    """
    Whether the finished runs ``configs`` trained with the settings of the code that writes the report: their
    ``settings.json`` against ``recorded_settings``; a line for each run that recorded others, or one line saying
    that all did.
    """
    from comparison.mujoco_training import recorded_settings  # torch and SB3: only when runs have finished

    notes = []
    for config in configs:
        path = run_dir(out_dir, config) / SETTINGS_FILE
        if not path.exists():
            notes.append(f"- {config.run_name}: none recorded (trained before runs recorded their settings)")
            continue
        differing = differing_settings(json.loads(path.read_text()), recorded_settings(config))
        if differing:
            notes.append(f"- {config.run_name}: other than the code's now at {', '.join(differing)}")
    if not notes:
        return [f"Every finished run recorded the settings of the code that wrote this report ({SETTINGS_FILE})."]
    return [f"Runs whose {SETTINGS_FILE} does not record the settings of the code that wrote this report:", "", *notes]


def published_table() -> list[str]:
    """Markdown rows: the published figures (other settings than ours)."""
    lines = ["| source | setting | figure |", "|---|---|---|"]
    return lines + [f"| {source} | {setting} | {figure} |" for source, setting, figure in PUBLISHED]


def plot_curves(returns: pd.DataFrame, path: Path) -> None:
    """One panel per task: each variant's evaluation return against env steps, mean over seeds, min-max band."""
    plot_task_curves(
        returns,
        path,
        "eval_return_mean",
        min_max_band,
        title="sb3_per SAC on MuJoCo: deterministic evaluations, mean over seeds, band min-max",
        ylabel="evaluation return",
        panel_titles={task: f"{task} ({TASKS[task].env_id})" for task in TASKS},
        colors=COLORS,
    )


def noise_notes(configs: Sequence[MuJoCoConfig]) -> list[str]:
    """A line for each task of ``configs`` with reward noise."""
    return [
        f"{name}: `{TASKS[name].env_id}` with N(0, {TASKS[name].reward_noise_std:g}^2) added to each training reward "
        "(the training returns logged and the evaluations are the task's own); no published figures."
        for name in dict.fromkeys(config.task for config in configs)
        if TASKS[name].noisy
    ]


def write_report(configs: Sequence[MuJoCoConfig], out_dir: Path, command: str) -> Path:
    """
    Write ``returns.csv`` (all finished runs), ``learning_curves.png`` and ``summary.md`` into ``out_dir``.

    :param configs: the planned runs (the finished ones are reported)
    :param out_dir: the study's folder
    :param command: the command that runs the whole plan, quoted in the summary
    :return: the summary's path
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    returns = collect_evaluations(configs, out_dir)
    write_csv_atomically(returns, out_dir / RETURNS_TABLE)
    scores = run_scores(returns, "eval_return_mean")
    lines = [
        "# MuJoCo: sb3_per's SAC with uniform replay, PER, ReLo and LA3P",
        "",
        "Written by `scripts/mujoco_study.py`; the settings and their deviations from the papers are in "
        "`comparison/mujoco.py`'s docstring.",
        "",
        f"Command: `{command}`",
        "",
        f"Finished runs: {len(scores)} of {len(configs)} planned.",
    ]
    for note in noise_notes(configs):
        lines += ["", note]
    finished = set(zip(scores["task"], scores["variant"], scores["seed"], strict=True))
    finished_configs = [config for config in configs if (config.task, config.variant, config.seed) in finished]
    resumed = resumed_notes({config.run_name: run_dir(out_dir, config) for config in finished_configs})
    if resumed:
        lines += ["", "Runs resumed from a checkpoint (not bit-identical to an uninterrupted run):", "", *resumed]
    if finished_configs:
        lines += ["", *settings_notes(finished_configs, out_dir)]
    if not returns.empty:
        plot_curves(returns, out_dir / CURVES_FILE)
        lines += ["", f"![learning curves]({CURVES_FILE})"]
        for task in dict.fromkeys(scores["task"]):
            lines += ["", f"## {task}", "", *score_table(scores, task), "", *comparison_table(scores, task)]
        lines += ["", "## Tasks without reward noise, normalised by uniform's IQM", "", *normalised_table(scores)]
    lines += [
        "",
        "## Published figures (other tasks, lengths and seeds than ours: to read ours against, not to match)",
        "",
        *published_table(),
        "",
        "IQM: mean of the middle half of the seeds (with 5 seeds, of the middle 3); intervals: percentile bootstrap "
        f"over seeds, {DEFAULT_BOOTSTRAP.n_resamples} resamples; across tasks, each task's runs resampled on their "
        "own and uniform's runs too, so that the interval carries the uncertainty of the score it is normalised by. "
        "Relative difference: (IQM of the variant - IQM of uniform) / |IQM of uniform|; same seed: on how many shared "
        "seeds the variant ends above and below uniform, with the sign test's p-value (with 5 seeds it cannot fall "
        "below 0.0625).",
        "",
    ]
    path = out_dir / SUMMARY_FILE
    write_text_atomically("\n".join(lines), path)
    return path
