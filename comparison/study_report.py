"""
What the reports of the studies of ``comparison.study`` share (``comparison/mujoco_report.py``,
``comparison/her_report.py``; ``comparison/minatar_report.py`` takes the result rows only): the finished runs' result
rows, one score row per run, the table of each variant's scores with bootstrap intervals over seeds, and the learning
curves, a panel per task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from comparison.experiment import write_atomically
from comparison.statistics import DEFAULT_BOOTSTRAP, bootstrap_ci, iqm, keyed_generator
from comparison.study import run_dir

#: The scores of a run: its final evaluation, and the area under its curve (the mean over its evaluations).
SCORES = ("final", "auc")
#: A curve's band: from a frame of one variant's curves on one task (a row per step, a column per seed), the lower
#: and upper edge at each step.
Band = Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray]]


def collect_rows(
    configs: Sequence[Any],
    out_dir: Path,
    finished_rows: Callable[[Any, Path], pd.DataFrame | None],
    columns: Sequence[str],
) -> pd.DataFrame:
    """
    The result rows of the finished runs of ``configs``, in plan order (none: the columns only).

    :param configs: the plan
    :param out_dir: the study's folder
    :param finished_rows: a run's rows from its config and folder, None if it has not finished
    :param columns: the columns of the result rows
    """
    frames = [finished_rows(config, run_dir(out_dir, config)) for config in configs]
    kept = [frame for frame in frames if frame is not None]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=list(columns))


def run_scores(rows: pd.DataFrame, value: str) -> pd.DataFrame:
    """
    One row per run (task, variant, seed), in the order of ``rows`` (each run's rows in step order): the ``value``
    of its last evaluation (``final``) and its mean over the run's evaluations (``auc``).
    """
    runs = rows.groupby(["task", "variant", "seed"], sort=False)[value]
    return pd.DataFrame({"final": runs.last(), "auc": runs.mean()}).reset_index()


def by_seed(scores: pd.DataFrame, task: str, variant: str, score: str) -> dict[int, float]:
    """``score`` of each seed of ``variant`` on ``task``."""
    rows = scores[(scores["task"] == task) & (scores["variant"] == variant)]
    return dict(zip(rows["seed"].astype(int), rows[score].astype(float), strict=True))


def interval_cell(value: float, interval: tuple[float, float], digits: int = 1) -> str:
    """``value [low, high]``, with ``digits`` decimals."""
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def score_table(
    scores: pd.DataFrame,
    task: str,
    final_name: str = "final return",
    auc_name: str = "AUC",
    digits: int = 1,
    seed_digits: int = 0,
) -> list[str]:
    """
    Markdown rows: each variant's seeds on ``task`` and the IQM of each score with its bootstrap interval.

    :param scores: ``run_scores``'s rows
    :param task: the task
    :param final_name: what the final score is called in the header
    :param auc_name: what the area under the curve is called in the header
    :param digits: decimals of the IQMs and intervals
    :param seed_digits: decimals of the final score of each seed
    """
    lines = [
        f"| variant | seeds | {final_name} IQM [{DEFAULT_BOOTSTRAP.level} CI] | {auc_name} IQM "
        f"[{DEFAULT_BOOTSTRAP.level} CI] | {final_name} per seed |",
        "|---|---|---|---|---|",
    ]
    for variant in dict.fromkeys(scores.loc[scores["task"] == task, "variant"]):
        cells = []
        for score in SCORES:
            values = list(by_seed(scores, task, variant, score).values())
            rng = keyed_generator(0, score, task, variant)
            cells.append(interval_cell(iqm(values), bootstrap_ci(values, iqm, rng=rng), digits))
        final = by_seed(scores, task, variant, "final")
        per_seed = ", ".join(f"{final[seed]:.{seed_digits}f}" for seed in sorted(final))
        lines.append(f"| {variant} | {len(final)} | {cells[0]} | {cells[1]} | {per_seed} |")
    return lines


def min_max_band(curves: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The lowest and highest seed at each step."""
    return curves.min(axis=1).to_numpy(), curves.max(axis=1).to_numpy()


def mean_interval_band(curves: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The percentile bootstrap interval (``DEFAULT_BOOTSTRAP``) of the mean over seeds at each step."""
    intervals = [
        bootstrap_ci(values.to_numpy(), np.mean, rng=keyed_generator(0, "curve", str(step)))
        for step, values in curves.iterrows()
    ]
    low, high = np.array(intervals).reshape(-1, 2).T
    return low, high


def plot_task_curves(
    rows: pd.DataFrame,
    path: Path,
    value: str,
    band: Band,
    *,
    title: str,
    ylabel: str,
    panel_titles: Mapping[str, str],
    colors: Mapping[str, str],
    ylim: tuple[float, float] | None = None,
) -> None:
    """
    One panel per task: each variant's ``value`` against env steps, the mean over seeds with a band around it.

    :param rows: result rows of finished runs (``task``, ``variant``, ``seed``, ``step`` and ``value``)
    :param path: the PNG written
    :param value: the column plotted
    :param band: the band around each mean (``min_max_band``, ``mean_interval_band``)
    :param title: the figure's title
    :param ylabel: the label of the y axes
    :param panel_titles: each task's panel title (the task's name where missing)
    :param colors: each variant's colour (matplotlib's next where missing)
    :param ylim: the range of the y axes (None: matplotlib's)
    """
    tasks = list(dict.fromkeys(rows["task"]))
    fig = Figure(figsize=(5.5 * len(tasks), 4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(tasks), squeeze=False)[0]
    for ax, task in zip(axes, tasks, strict=True):
        for variant, group in rows[rows["task"] == task].groupby("variant", sort=False):
            curves = group.pivot(index="step", columns="seed", values=value)
            color = colors.get(str(variant))
            ax.plot(curves.index, curves.mean(axis=1), color=color, label=f"{variant} ({curves.shape[1]} seeds)")
            ax.fill_between(curves.index, *band(curves), color=color, alpha=0.15)
        ax.set(title=panel_titles.get(task, task), xlabel="env steps", ylabel=ylabel)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    write_atomically(path, lambda partial: fig.savefig(partial, dpi=110, format="png"))
