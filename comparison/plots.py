"""
The comparison's plots: learning curves, final return per regime, and where each replay's attention goes.

Plots use matplotlib's object API (:class:`matplotlib.figure.Figure` with the Agg canvas), so importing this module
or calling its functions changes no global matplotlib state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter

from comparison.schema import (
    BASELINE_COLUMNS,
    EVALUATION_COLUMNS,
    REGIME_RETURN_COLUMNS,
    REGIMES,
    TELEMETRY_COLUMNS,
    check_columns,
    tag_name,
)
from comparison.statistics import DEFAULT_BOOTSTRAP, FEW_SEEDS, BootstrapSettings, bootstrap_ci, keyed_generator
from comparison.tables import final_returns, variant_order


def _new_figure(width: float, height: float = 5.0) -> Figure:
    """A figure attached to an Agg canvas (no pyplot, no global state)."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _legend_beside(ax: Axes) -> None:
    """The axes' legend to the right of the plot, where its long labels cover no data."""
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _interval_legend(n_seeds: int, level: str, mark: str) -> str:
    """What a variant's legend says of its interval: a CI, or with few seeds only about their range (as summary.md)."""
    if n_seeds < FEW_SEEDS:
        return f"mean of {n_seeds} seeds; {mark}: about their range, too few seeds for a CI"
    return f"mean of {n_seeds} seeds, {level} CI"


def _variant_colors(order: Sequence[str], baselines: pd.DataFrame) -> tuple[dict[str, str], dict[str, str]]:
    """Consistent colours across plots: learning variants first in the default cycle, then baselines."""
    variants = {variant: f"C{i}" for i, variant in enumerate(order)}
    base = {name: f"C{(len(order) + j) % 10}" for j, name in enumerate(baselines["variant"])}
    return variants, base


def plot_learning_curves(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    path: str | Path,
    *,
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
) -> Path:
    """
    Write :func:`learning_curves_figure` as a PNG.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param path: where to write the PNG
    :param bootstrap: resamples and coverage of the bands
    :param rng: bootstrap seed; each variant's bands have their own generator (:func:`keyed_generator`)
    :return: the path written
    """
    path = Path(path)
    learning_curves_figure(evals, baselines, bootstrap=bootstrap, rng=rng).savefig(path, dpi=120)
    return path


def learning_curves_figure(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    *,
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
) -> Figure:
    """
    Learning curves: mean evaluation return against env steps, per variant the mean over seeds at each evaluation
    step with a percentile bootstrap CI band over seeds, and a dashed horizontal line per baseline.

    At each step only the runs evaluated at that step count (a shorter run just stops contributing).

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param bootstrap: resamples and coverage of the bands
    :param rng: bootstrap seed; each variant's bands have their own generator (:func:`keyed_generator`)
    :return: the figure (on an Agg canvas)
    """
    check_columns(evals, EVALUATION_COLUMNS, "evaluations")
    check_columns(baselines, BASELINE_COLUMNS, "baselines")
    order = variant_order(evals["variant"])
    colors, baseline_colors = _variant_colors(order, baselines)
    figure = _new_figure(11.0)
    ax = figure.subplots()
    level = bootstrap.level
    for variant in order:
        runs = evals.loc[evals["variant"] == variant]
        generator = keyed_generator(rng, "learning_curve", variant)
        steps, means, lows, highs = [], [], [], []
        for step, group in runs.groupby("step", sort=True):
            values = group["mean_return"].to_numpy(dtype=float)
            low, high = bootstrap_ci(values, np.mean, bootstrap.n_resamples, bootstrap.confidence, generator)
            steps.append(step)
            means.append(values.mean())
            lows.append(low)
            highs.append(high)
        color = colors[variant]
        label = f"{variant} ({_interval_legend(runs['run'].nunique(), level, 'band')})"
        ax.plot(steps, means, color=color, marker="o" if len(steps) <= 30 else None, markersize=3, label=label)
        ax.fill_between(steps, lows, highs, color=color, alpha=0.2, linewidth=0)
    for baseline in baselines.itertuples(index=False):
        ax.axhline(
            baseline.mean_return,
            color=baseline_colors[baseline.variant],
            linestyle="--",
            linewidth=1.2,
            label=f"{baseline.variant} baseline",
        )
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel("Environment steps")
    ax.set_ylabel("Mean evaluation return")
    ax.set_title("Learning curves: " + " vs ".join(order))
    ax.grid(alpha=0.3)
    _legend_beside(ax)
    return figure


def plot_regime_returns(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    path: str | Path,
    *,
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
) -> Path:
    """
    Write :func:`regime_returns_figure` as a PNG.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param path: where to write the PNG
    :param bootstrap: resamples and coverage of the error bars
    :param rng: bootstrap seed; each variant's error bars have their own generator (:func:`keyed_generator`)
    :return: the path written
    """
    path = Path(path)
    regime_returns_figure(evals, baselines, bootstrap=bootstrap, rng=rng).savefig(path, dpi=120)
    return path


def regime_returns_figure(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    *,
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
) -> Figure:
    """
    Grouped bar chart of the final return per hidden regime (normal, stress, break): per learning variant the mean
    over seeds of the final evaluation's regime return with percentile bootstrap CI error bars, and per baseline
    its regime return (hatched, no error bar).

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param bootstrap: resamples and coverage of the error bars
    :param rng: bootstrap seed; each variant's error bars have their own generator (:func:`keyed_generator`)
    :return: the figure (on an Agg canvas)
    """
    check_columns(evals, EVALUATION_COLUMNS, "evaluations")
    check_columns(baselines, BASELINE_COLUMNS, "baselines")
    final = final_returns(evals)
    order = variant_order(evals["variant"])
    colors, baseline_colors = _variant_colors(order, baselines)
    n_bars = len(order) + len(baselines)
    width = 0.8 / n_bars
    positions = np.arange(len(REGIMES), dtype=float)
    figure = _new_figure(11.0)
    ax = figure.subplots()
    level = bootstrap.level
    for k, variant in enumerate(order):
        runs = final.loc[final["variant"] == variant]
        generator = keyed_generator(rng, "regime_returns", variant)
        means: list[float] = []
        errors: list[list[float]] = [[], []]
        for column in REGIME_RETURN_COLUMNS:
            values = runs[column].dropna().to_numpy(dtype=float)
            if values.size == 0:
                means.append(math.nan)
                errors[0].append(0.0)
                errors[1].append(0.0)
                continue
            mean = float(values.mean())
            low, high = bootstrap_ci(values, np.mean, bootstrap.n_resamples, bootstrap.confidence, generator)
            means.append(mean)
            errors[0].append(max(mean - low, 0.0))
            errors[1].append(max(high - mean, 0.0))
        ax.bar(
            positions + (k - (n_bars - 1) / 2) * width,
            means,
            width,
            yerr=np.array(errors),
            capsize=3,
            color=colors[variant],
            label=f"{variant} ({_interval_legend(len(runs), level, 'bars')})",
        )
    for j, baseline in enumerate(baselines.itertuples(index=False)):
        k = len(order) + j
        ax.bar(
            positions + (k - (n_bars - 1) / 2) * width,
            [float(getattr(baseline, column)) for column in REGIME_RETURN_COLUMNS],
            width,
            color=baseline_colors[baseline.variant],
            hatch="//",
            edgecolor="black",
            linewidth=0.5,
            label=f"{baseline.variant} baseline",
        )
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(positions, list(REGIMES))
    ax.set_xlabel("Hidden regime")
    ax.set_ylabel("Final mean per-episode return in regime")
    ax.set_title("Final return per regime")
    ax.grid(axis="y", alpha=0.3)
    _legend_beside(ax)
    return figure


# How each share is drawn in the replay-attention panels: (column, label, line style, line width).
_SHARE_STYLES: tuple[tuple[str, str, Literal["-", "--", ":"], float], ...] = (
    ("sample_share", "sampled", "-", 1.8),
    ("priority_share", "priority mass", "--", 1.4),
    ("buffer_share", "stored", ":", 1.4),
)


def plot_replay_attention(telemetry: pd.DataFrame, path: str | Path) -> Path:
    """
    Write :func:`replay_attention_figure` as a PNG.

    :param telemetry: the telemetry (columns :data:`TELEMETRY_COLUMNS`), with rows
    :param path: where to write the PNG
    :return: the path written
    """
    path = Path(path)
    replay_attention_figure(telemetry).savefig(path, dpi=120)
    return path


def replay_attention_figure(telemetry: pd.DataFrame) -> Figure:
    """
    Where each replay's attention goes: per variant a panel with, per regime (tag), its share of the sampled
    transitions (solid), of the priority mass (dashed; prioritized buffers only) and of the stored transitions
    (dotted) against env steps, each the mean over seeds at each evaluation step.

    :param telemetry: the telemetry (columns :data:`TELEMETRY_COLUMNS`), with rows
    :return: the figure (on an Agg canvas)
    """
    check_columns(telemetry, TELEMETRY_COLUMNS, "telemetry")
    order = variant_order(telemetry["variant"])
    tags = sorted(telemetry["tag"].unique().tolist())
    colors = {tag: f"C{i}" for i, tag in enumerate(tags)}
    n_columns = min(len(order), 3)
    n_rows = math.ceil(len(order) / n_columns)
    figure = _new_figure(4.2 * n_columns, 3.3 * n_rows + 0.6)
    axes = np.atleast_1d(figure.subplots(n_rows, n_columns, sharex=True, sharey=True, squeeze=False)).ravel()
    means = telemetry.groupby(["variant", "tag", "step"], sort=True).mean(numeric_only=True)
    for ax, variant in zip(axes, order, strict=False):
        n_seeds = telemetry.loc[telemetry["variant"] == variant, "seed"].nunique()
        for tag in tags:
            if (variant, tag) not in means.index.droplevel("step"):
                continue
            curves = means.loc[(variant, tag)]
            for column, _, style, width in _SHARE_STYLES:
                ax.plot(curves.index, curves[column], color=colors[tag], linestyle=style, linewidth=width)
        ax.set_title(f"{variant} (mean of {n_seeds} seed{'s' if n_seeds != 1 else ''})", fontsize="medium")
        ax.set_ylim(0.0, 1.0)
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    for ax in axes[len(order) :]:
        ax.set_visible(False)
    for ax in axes[(n_rows - 1) * n_columns :]:
        ax.set_xlabel("Environment steps")
    for ax in axes[::n_columns]:
        ax.set_ylabel("Share")
    handles = [Line2D([], [], color=colors[tag], linewidth=3, label=tag_name(tag)) for tag in tags]
    handles += [Line2D([], [], color="gray", linestyle=s, linewidth=w, label=label) for _, label, s, w in _SHARE_STYLES]
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize="small")
    figure.suptitle("Where each replay's attention goes, per regime", fontsize="medium")
    return figure
