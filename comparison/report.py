"""
The comparison's report, from its CSV files: ``summary.md`` (:mod:`comparison.summary`) and the plots
(:mod:`comparison.plots`). Everything in it is computed from the CSV files; nothing is typed in by hand.

Statistics follow Agarwal et al. (2021), "Deep Reinforcement Learning at the Edge of the Statistical Precipice"
(:mod:`comparison.statistics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from comparison.plots import plot_learning_curves, plot_regime_returns, plot_replay_attention
from comparison.schema import (
    BASELINES_FILE,
    EVALUATIONS_FILE,
    LEARNING_CURVES_FILE,
    REGIME_RETURNS_FILE,
    REPLAY_ATTENTION_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
)
from comparison.statistics import DEFAULT_BOOTSTRAP, BootstrapSettings
from comparison.summary import write_summary_md
from comparison.tables import has_regime_labels, load_baselines, load_evaluations, load_telemetry


def write_report(
    out_dir: str | Path,
    *,
    command: str,
    seeds: Sequence[int],
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
) -> dict[str, Path]:
    """
    Read ``out_dir/evaluations.csv``, ``out_dir/baselines.csv`` and ``out_dir/telemetry.csv`` if there is one;
    write ``summary.md``, ``learning_curves.png``, ``regime_returns.png`` unless the prices had no regime labels
    (``has_regime_labels``) and, where the telemetry has rows, ``replay_attention.png`` into ``out_dir``.

    :param out_dir: the comparison's output folder
    :param command: the command line that produced the CSV files (recorded in ``summary.md``)
    :param seeds: the seeds given to that command (recorded in ``summary.md``)
    :param bootstrap: resamples and coverage of all CIs
    :param rng: bootstrap seed (each interval of each output draws from its own generator, seeded with it and the
        interval's name: see `comparison.statistics.keyed_generator`)
    :return: ``{"summary": ..., "learning_curves": ...}`` paths, and ``"regime_returns"`` and ``"replay_attention"``
        where written
    :raises FileNotFoundError: if ``evaluations.csv`` or ``baselines.csv`` is missing
    :raises ValueError: if a CSV file is empty or lacks required columns (the message names file and columns)
    """
    out_dir = Path(out_dir)
    evals = load_evaluations(out_dir / EVALUATIONS_FILE)
    baselines = load_baselines(out_dir / BASELINES_FILE)
    # A comparison made before telemetry existed has none; one of untagged runs has no rows.
    telemetry = load_telemetry(out_dir / TELEMETRY_FILE) if (out_dir / TELEMETRY_FILE).is_file() else None
    summary_path = out_dir / SUMMARY_FILE
    write_summary_md(
        evals, baselines, summary_path, command=command, seeds=seeds, bootstrap=bootstrap, rng=rng, telemetry=telemetry
    )
    paths = {
        "summary": summary_path,
        "learning_curves": plot_learning_curves(
            evals, baselines, out_dir / LEARNING_CURVES_FILE, bootstrap=bootstrap, rng=rng
        ),
    }
    if has_regime_labels(telemetry):
        paths["regime_returns"] = plot_regime_returns(
            evals, baselines, out_dir / REGIME_RETURNS_FILE, bootstrap=bootstrap, rng=rng
        )
    else:  # prices without regime labels: the chart would be empty (one left by an earlier report goes too)
        (out_dir / REGIME_RETURNS_FILE).unlink(missing_ok=True)
    if telemetry is not None and not telemetry.empty:
        paths["replay_attention"] = plot_replay_attention(telemetry, out_dir / REPLAY_ATTENTION_FILE)
    return paths
