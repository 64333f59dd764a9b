"""
The MinAtar study's report (``comparison.minatar.MinAtarStudy.report``): learning curves, scores at fixed frames with
IQMs and bootstrap intervals (``comparison.statistics``), same-seed comparisons against DQN, and a verdict on whether
the ReLo authors' released results are reproduced.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from comparison.checkpoints import resumed_notes
from comparison.experiment import write_atomically, write_csv_atomically, write_text_atomically
from comparison.minatar import GAMES, RETURN_COLUMNS, MinAtarConfig, finished_returns
from comparison.statistics import (
    DEFAULT_BOOTSTRAP,
    FEW_SEEDS,
    bootstrap_ci,
    iqm,
    keyed_generator,
    paired_mean_difference_ci,
    relative_difference_ci,
    same_seed_comparison,
)
from comparison.study import run_dir
from comparison.study_report import collect_rows

RETURNS_TABLE = "returns.csv"
SUMMARY_FILE = "summary.md"
CURVES_FILE = "learning_curves.png"
#: The reference variant of every comparison.
REFERENCE = "dqn"
#: The ReLo authors' released MinAtar results (``MinAtar/results/baseline_avg_return.jsonl``): mean over their 5 seeds
#: of the moving average of training returns, by game, variant and frame ("rho_dqn" there is ReLo).
PUBLISHED: dict[tuple[str, str], dict[int, float]] = {
    ("breakout", "dqn"): {500_000: 6.94, 1_000_000: 7.87, 2_000_000: 8.58},
    ("breakout", "per"): {500_000: 8.91, 1_000_000: 10.40, 2_000_000: 10.58},
    ("breakout", "relo"): {500_000: 6.10, 1_000_000: 7.16, 2_000_000: 7.58},
    ("seaquest", "dqn"): {500_000: 0.90, 1_000_000: 3.10, 2_000_000: 14.02},
    ("seaquest", "per"): {500_000: 0.63, 1_000_000: 0.49, 2_000_000: 1.62},
    ("seaquest", "relo"): {500_000: 0.80, 1_000_000: 1.33, 2_000_000: 7.27},
}
#: The metrics the report compares: the authors' (the moving average of training returns) and the greedy evaluation.
METRICS = {"train_return_ema": "training return, EMA 0.99 (theirs)", "eval_return_mean": "greedy evaluation return"}
COLORS = {"dqn": "black", "per": "tab:red", "relo": "tab:blue"}


def scores_at(returns: pd.DataFrame, frame: int, metric: str) -> dict[tuple[str, str], dict[int, float]]:
    """``metric`` at ``frame`` of each (game, variant), by seed."""
    rows = returns[returns["frame"] == frame]
    return {
        (str(game), str(variant)): dict(zip(group["seed"].astype(int), group[metric].astype(float), strict=True))
        for (game, variant), group in rows.groupby(["game", "variant"], sort=False)
    }


def direction_verdict(low: float, high: float, expected_sign: int, n_seeds: int) -> str:
    """
    Whether an interval of a difference shows the published direction: ``"reproduced"`` if it lies wholly on the
    side of ``expected_sign`` (+1 or -1), ``"contradicted"`` if wholly on the other, ``"undecided"`` if it holds 0.
    With fewer than ``FEW_SEEDS`` seeds a bootstrap interval is about the seeds' range (one seed's is a point), so
    there is no verdict yet: ``"too few seeds (n of FEW_SEEDS)"``.

    :param n_seeds: the seeds behind the interval (the smaller count of the two variants compared)
    """
    if expected_sign not in (1, -1):
        raise ValueError(f"expected_sign must be 1 or -1, got {expected_sign!r}")
    if n_seeds < FEW_SEEDS:
        return f"too few seeds ({n_seeds} of {FEW_SEEDS})"
    if low > 0 or high < 0:
        return "reproduced" if (low > 0) == (expected_sign > 0) else "contradicted"
    return "undecided"


def _cell(value: float, interval: tuple[float, float]) -> str:
    return f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def score_table(returns: pd.DataFrame, frame: int, metric: str, seed: int = 0) -> list[str]:
    """Markdown rows: each game and variant's seeds, IQM with its bootstrap interval, mean, and published mean."""
    lines = [
        f"| game | variant | seeds | IQM [{DEFAULT_BOOTSTRAP.level} CI] | mean | per seed | published mean |",
        "|---|---|---|---|---|---|---|",
    ]
    for (game, variant), by_seed in scores_at(returns, frame, metric).items():
        values = np.array([by_seed[s] for s in sorted(by_seed)])
        interval = bootstrap_ci(values, iqm, rng=keyed_generator(seed, game, variant, metric, str(frame)))
        published = PUBLISHED.get((game, variant), {}).get(frame)
        reference = f"{published:.2f}" if published is not None and metric == "train_return_ema" else "-"
        per_seed = ", ".join(f"{by_seed[s]:.1f}" for s in sorted(by_seed))
        lines.append(
            f"| {game} | {variant} | {len(values)} | {_cell(iqm(values), interval)} | {values.mean():.2f} "
            f"| {per_seed} | {reference} |"
        )
    return lines


def comparison_table(returns: pd.DataFrame, frame: int, metric: str, seed: int = 0) -> list[str]:
    """
    Markdown rows: each variant against DQN on the same game: IQM difference (relative) with intervals, the
    same-seed split and sign test, the paired mean difference, and, for the authors' metric at a frame they
    published, the verdict on their direction.
    """
    scores = scores_at(returns, frame, metric)
    lines = [
        "| game | variant vs dqn | IQM difference [CI] | relative [CI] | same seed: above/below (sign test p) "
        "| paired mean difference [CI] | published difference | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (game, variant), by_seed in scores.items():
        reference = scores.get((game, REFERENCE))
        if variant == REFERENCE or reference is None:
            continue
        key = (game, variant, metric, str(frame))
        difference = relative_difference_ci(
            list(reference.values()), list(by_seed.values()), rng=keyed_generator(seed, "iqm", *key)
        )
        split = same_seed_comparison(reference, by_seed)
        shared = set(reference) & set(by_seed)
        paired = (
            _cell(*paired_mean_difference_ci(reference, by_seed, rng=keyed_generator(seed, "paired", *key)))
            if shared
            else "-"
        )
        published = PUBLISHED.get((game, variant), {}).get(frame)
        published_reference = PUBLISHED.get((game, REFERENCE), {}).get(frame)
        if metric == "train_return_ema" and published is not None and published_reference is not None:
            gap = published - published_reference
            published_text = f"{gap:+.2f}"
            verdict = direction_verdict(
                *difference.absolute_ci,
                expected_sign=1 if gap > 0 else -1,
                n_seeds=min(len(reference), len(by_seed)),
            )
        else:
            published_text, verdict = "-", "-"
        relative = _cell(difference.relative, difference.relative_ci) if difference.relative_defined else "-"
        lines.append(
            f"| {game} | {variant} | {_cell(difference.absolute, difference.absolute_ci)} | {relative} "
            f"| {split.above}/{split.below} (p={split.p_value:.3f}) | {paired} | {published_text} | {verdict} |"
        )
    return lines


def plot_curves(returns: pd.DataFrame, path: Path) -> None:
    """
    One column per game: the moving average of training returns (top) and the greedy evaluation (bottom) against
    frames, each variant's mean over seeds with its min-max band, and the published means as points.
    """
    games = list(dict.fromkeys(returns["game"]))
    fig = Figure(figsize=(5.5 * len(games), 7))
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(games), squeeze=False)
    for column, game in enumerate(games):
        for row, (metric, label) in enumerate(METRICS.items()):
            ax = axes[row][column]
            for variant, group in returns[returns["game"] == game].groupby("variant", sort=False):
                curves = group.pivot(index="frame", columns="seed", values=metric)
                color = COLORS.get(str(variant))
                ax.plot(curves.index, curves.mean(axis=1), color=color, label=f"{variant} ({curves.shape[1]} seeds)")
                ax.fill_between(curves.index, curves.min(axis=1), curves.max(axis=1), color=color, alpha=0.15)
                published = PUBLISHED.get((game, str(variant)), {})
                shown = {frame: value for frame, value in published.items() if frame <= curves.index.max()}
                if row == 0 and shown:
                    ax.plot(list(shown), list(shown.values()), "o", mfc="none", color=color)
            ax.set(title=f"{game}: {label}", xlabel="frames", ylabel="return")
            ax.title.set_fontsize(9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("sb3_per DQN on MinAtar: mean over seeds, band min-max; circles: the ReLo authors' released means")
    fig.tight_layout()
    write_atomically(path, lambda partial: fig.savefig(partial, dpi=110, format="png"))


def write_report(configs: Sequence[MinAtarConfig], out_dir: Path, command: str) -> Path:
    """
    Write ``returns.csv`` (all finished runs), ``learning_curves.png`` and ``summary.md`` into ``out_dir``.

    :param configs: the planned runs (the finished ones are reported)
    :param out_dir: the study's directory
    :param command: the command that reproduces the study, quoted in the summary
    :return: the summary's path
    """
    out_dir = Path(out_dir)
    returns = collect_rows(configs, out_dir, finished_returns, RETURN_COLUMNS)
    write_csv_atomically(returns, out_dir / RETURNS_TABLE)
    finished = returns[["game", "variant", "seed"]].drop_duplicates()
    lines = [
        "# MinAtar: sb3_per's DQN and PER-DQN against the ReLo authors' released results",
        "",
        "Written by `scripts/minatar_study.py`; the settings and their deviations are in `comparison/minatar.py`'s "
        "docstring and in README.md here.",
        "",
        f"Command: `{command}`",
        "",
        f"Finished runs: {len(finished)} of {len(configs)} planned.",
    ]
    for name in dict.fromkeys(config.game for config in configs):
        game = GAMES[name]
        if game.noisy:
            lines += [
                "",
                f"{name}: `{game.env_id}` with N(0, {game.reward_noise_std:g}^2) added to each training reward (the "
                "returns logged and the greedy evaluations are the game's own); no published figures.",
            ]
    done = set(finished.itertuples(index=False, name=None))
    resumed = resumed_notes(
        {
            config.run_name: run_dir(out_dir, config)
            for config in configs
            if (config.game, config.variant, config.seed) in done
        }
    )
    if resumed:
        lines += ["", "Runs resumed from a checkpoint (not bit-identical to an uninterrupted run):", "", *resumed]
    if returns.empty:
        write_text_atomically("\n".join([*lines, ""]), out_dir / SUMMARY_FILE)
        return out_dir / SUMMARY_FILE
    plot_curves(returns, out_dir / CURVES_FILE)
    lines += ["", f"![learning curves]({CURVES_FILE})"]
    last = int(returns["frame"].max())
    frames = sorted({frame for published in PUBLISHED.values() for frame in published if frame < last} | {last})
    for metric, label in METRICS.items():
        for frame in frames:
            lines += ["", f"## {label} at {frame:,} frames", "", *score_table(returns, frame, metric)]
            lines += ["", *comparison_table(returns, frame, metric)]
    lines += [
        "",
        "IQM: mean of the middle half of the seeds (with 5 seeds, of the middle 3); intervals: percentile bootstrap "
        f"over seeds, {DEFAULT_BOOTSTRAP.n_resamples} resamples. Verdict: 'reproduced' when the interval of the IQM "
        "difference lies wholly on the published side of 0, 'contradicted' on the other, 'undecided' when it holds 0; "
        f"none with fewer than {FEW_SEEDS} seeds of either variant.",
        "",
    ]
    path = out_dir / SUMMARY_FILE
    write_text_atomically("\n".join(lines), path)
    return path
