"""
The comparison's report, from its CSV files: ``summary.md`` (:mod:`comparison.summary`) and the plots
(:mod:`comparison.plots`). Everything in it is computed from the CSV files; nothing is typed in by hand.

Statistics follow Agarwal et al. (2021), "Deep Reinforcement Learning at the Edge of the Statistical Precipice"
(:mod:`comparison.statistics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from comparison.plots import plot_learning_curves, plot_regime_returns
from comparison.schema import (
    BASELINES_FILE,
    EVALUATIONS_FILE,
    LEARNING_CURVES_FILE,
    REGIME_RETURNS_FILE,
    SUMMARY_FILE,
)
from comparison.statistics import DEFAULT_BOOTSTRAP, BootstrapSettings
from comparison.summary import write_summary_md
from comparison.tables import load_baselines, load_evaluations


def write_report(
    out_dir: str | Path,
    *,
    command: str,
    seeds: Sequence[int],
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
) -> dict[str, Path]:
    """
    Read ``out_dir/evaluations.csv`` and ``out_dir/baselines.csv``; write ``summary.md``, ``learning_curves.png``
    and ``regime_returns.png`` into ``out_dir``.

    :param out_dir: the comparison's output folder
    :param command: the command line that produced the CSV files (recorded in ``summary.md``)
    :param seeds: the seeds given to that command (recorded in ``summary.md``)
    :param bootstrap: resamples and coverage of all CIs
    :param rng: bootstrap seed (each output uses a generator seeded with it, so each is reproducible on its own)
    :return: ``{"summary": ..., "learning_curves": ..., "regime_returns": ...}`` paths
    :raises FileNotFoundError: if a CSV file is missing
    :raises ValueError: if a CSV file is empty or lacks required columns (the message names file and columns)
    """
    out_dir = Path(out_dir)
    evals = load_evaluations(out_dir / EVALUATIONS_FILE)
    baselines = load_baselines(out_dir / BASELINES_FILE)
    summary_path = out_dir / SUMMARY_FILE
    write_summary_md(evals, baselines, summary_path, command=command, seeds=seeds, bootstrap=bootstrap, rng=rng)
    return {
        "summary": summary_path,
        "learning_curves": plot_learning_curves(
            evals, baselines, out_dir / LEARNING_CURVES_FILE, bootstrap=bootstrap, rng=rng
        ),
        "regime_returns": plot_regime_returns(
            evals, baselines, out_dir / REGIME_RETURNS_FILE, bootstrap=bootstrap, rng=rng
        ),
    }
