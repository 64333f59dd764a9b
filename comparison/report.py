"""Reporting half of the comparison of SAC replay variants: aggregate statistics over seeds, ``summary.md`` and plots.

Inputs are two CSV files written by the comparison runner:

* ``evaluations.csv``: one row per (run, evaluation point), columns :data:`EVALUATION_COLUMNS`;
* ``baselines.csv``: one row per fixed policy evaluated on the same evaluation episodes, columns
  :data:`BASELINE_COLUMNS`.

Statistics follow Agarwal et al. (2021), "Deep Reinforcement Learning at the Edge of the Statistical Precipice":
the interquartile mean (IQM) of the final returns over seeds, with percentile bootstrap confidence intervals over
seeds. Everything in the report is computed from the CSV files; nothing is typed in by hand.

Plots use matplotlib's object API (:class:`matplotlib.figure.Figure` with the Agg canvas), so importing this module
or calling its functions changes no global matplotlib state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

__all__ = [
    "BASELINE_COLUMNS",
    "EVALUATION_COLUMNS",
    "METRIC_COLUMNS",
    "NEAR_ZERO",
    "REFERENCE_VARIANT",
    "REGIMES",
    "SUMMARY_COLUMNS",
    "THRESHOLD_BASELINE",
    "RelativeDifference",
    "bootstrap_ci",
    "final_returns",
    "iqm",
    "load_baselines",
    "load_evaluations",
    "plot_learning_curves",
    "plot_regime_returns",
    "relative_difference_ci",
    "steps_to_threshold",
    "summary_table",
    "variant_order",
    "write_report",
    "write_summary_md",
]

#: Hidden market regimes of the pairs-trading env, in the order they are reported.
REGIMES: tuple[str, ...] = ("normal", "stress", "break")
#: Metric columns shared by ``evaluations.csv`` and ``baselines.csv``.
METRIC_COLUMNS: tuple[str, ...] = (
    "mean_return",
    "std_return",
    "sharpe",
    "max_drawdown",
    "turnover",
    *(f"return_{regime}" for regime in REGIMES),
    "n_episodes",
)
#: Columns of ``evaluations.csv``, in order.
EVALUATION_COLUMNS: tuple[str, ...] = ("run", "variant", "seed", "step", *METRIC_COLUMNS)
#: Columns of ``baselines.csv``, in order.
BASELINE_COLUMNS: tuple[str, ...] = ("variant", *METRIC_COLUMNS)
#: The learning variant every other variant is compared against.
REFERENCE_VARIANT = "uniform"
#: The baseline whose mean return defines the "steps to threshold" figure.
THRESHOLD_BASELINE = "zscore"
#: Below this absolute value of the reference IQM, a relative difference is not reported (absolute difference only).
NEAR_ZERO = 1e-3

EVALUATIONS_FILE = "evaluations.csv"
BASELINES_FILE = "baselines.csv"
SUMMARY_FILE = "summary.md"
LEARNING_CURVES_FILE = "learning_curves.png"
REGIME_RETURNS_FILE = "regime_returns.png"

RngLike = np.random.Generator | int | None
_DASH = "—"


# ----------------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------------


def _finite_1d(values: Iterable[float] | np.ndarray, name: str = "values") -> np.ndarray:
    """Return ``values`` as a non-empty 1-D float array of finite numbers, or raise ``ValueError``."""
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite values: {array.tolist()}")
    return array


def _iqm_rows(matrix: np.ndarray) -> np.ndarray:
    """IQM of each row of a 2-D array (same trimming rule as :func:`iqm`)."""
    n = matrix.shape[1]
    cut = int(0.25 * n)
    return np.sort(matrix, axis=1)[:, cut : n - cut].mean(axis=1)


def iqm(values: Iterable[float] | np.ndarray) -> float:
    """
    Interquartile mean: the mean of the middle 50% of the values.

    Same definition as ``scipy.stats.trim_mean(values, 0.25)`` (used by ``rliable``): sort the ``n`` values, drop
    ``floor(0.25 * n)`` of them from each end, average the rest. So for ``n <= 3`` nothing is trimmed and the IQM
    is the plain mean; ``[1, 2, 3, 4] -> 2.5``; ``[1, 2, 3, 4, 100] -> 3.0``.

    :param values: the sample (e.g. one final return per seed); must be non-empty and finite
    :return: the interquartile mean
    """
    return float(_iqm_rows(_finite_1d(values)[np.newaxis, :])[0])


def _bootstrap_distribution(
    values: np.ndarray,
    statistic: Callable[[np.ndarray], float],
    n_resamples: int,
    generator: np.random.Generator,
) -> np.ndarray:
    """Statistic of ``n_resamples`` resamples (with replacement, same size) of ``values``."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    indices = generator.integers(0, values.size, size=(n_resamples, values.size))
    samples = values[indices]
    if statistic is iqm:
        return _iqm_rows(samples)
    if statistic is np.mean:
        return samples.mean(axis=1)
    return np.array([statistic(sample) for sample in samples], dtype=float)


def _percentile_interval(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    """Central ``confidence`` percentile interval of a bootstrap distribution."""
    alpha = 1.0 - confidence
    low, high = np.quantile(distribution, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def bootstrap_ci(
    values: Iterable[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] = iqm,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> tuple[float, float]:
    """
    Percentile bootstrap confidence interval of ``statistic`` over the values (e.g. one value per seed).

    Draws ``n_resamples`` resamples of the same size with replacement, computes the statistic of each and returns
    the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles. With one value the interval is degenerate
    (``(v, v)``); with two values it is still defined (resamples are drawn from the two).

    :param values: the sample; non-empty and finite
    :param statistic: function of a 1-D array returning a float (:func:`iqm` and ``np.mean`` are vectorised)
    :param n_resamples: number of bootstrap resamples
    :param confidence: coverage of the interval, in (0, 1)
    :param rng: seed or generator; the result is deterministic given a seed (a generator is advanced)
    :return: ``(low, high)``
    """
    _check_confidence(confidence)
    array = _finite_1d(values)
    distribution = _bootstrap_distribution(array, statistic, n_resamples, np.random.default_rng(rng))
    return _percentile_interval(distribution, confidence)


@dataclass(frozen=True)
class RelativeDifference:
    """
    Difference between the IQMs of two samples ``b`` and ``a`` (e.g. PER and uniform final returns), with CIs.

    :param iqm_a: IQM of the reference sample ``a``
    :param iqm_b: IQM of the compared sample ``b``
    :param absolute: ``iqm_b - iqm_a``
    :param absolute_ci: bootstrap CI of the absolute difference
    :param relative: ``(iqm_b - iqm_a) / |iqm_a|``; NaN when ``|iqm_a| < near_zero``
    :param relative_ci: bootstrap CI of the relative difference; ``(NaN, NaN)`` when not defined
    :param near_zero: the threshold on ``|iqm_a|`` below which no relative difference is reported
    :param confidence: coverage of both intervals
    """

    iqm_a: float
    iqm_b: float
    absolute: float
    absolute_ci: tuple[float, float]
    relative: float
    relative_ci: tuple[float, float]
    near_zero: float
    confidence: float

    @property
    def relative_defined(self) -> bool:
        """Whether the relative difference is meaningful (``|iqm_a| >= near_zero``)."""
        return not math.isnan(self.relative)


def relative_difference_ci(
    a_values: Iterable[float] | np.ndarray,
    b_values: Iterable[float] | np.ndarray,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    near_zero: float = NEAR_ZERO,
) -> RelativeDifference:
    """
    Relative and absolute difference of the IQM of ``b`` versus the IQM of ``a``, with percentile bootstrap CIs.

    The relative difference is ``(iqm_b - iqm_a) / |iqm_a|`` (so +0.3 means "30% better than ``a``", also when
    ``iqm_a`` is negative). The seeds of ``a`` and of ``b`` are resampled independently, each resample giving one
    difference. Rule for a near-zero reference: if ``|iqm_a| < near_zero`` the relative figure is meaningless, so
    ``relative`` and ``relative_ci`` are NaN and only the absolute difference should be reported; otherwise, in the
    bootstrap, a resampled ``|iqm_a|`` below ``near_zero`` is replaced by ``near_zero`` (caps the ratio instead of
    dividing by ~0). The absolute difference and its CI are always returned.

    :param a_values: reference sample (e.g. uniform SAC final return per seed)
    :param b_values: compared sample (e.g. PER-SAC final return per seed)
    :param n_resamples: number of bootstrap resamples
    :param confidence: coverage of the intervals, in (0, 1)
    :param rng: seed or generator (deterministic given a seed)
    :param near_zero: threshold on ``|iqm_a|`` below which no relative difference is reported
    :return: the differences and their confidence intervals
    """
    _check_confidence(confidence)
    if not near_zero > 0:
        raise ValueError(f"near_zero must be > 0, got {near_zero}")
    a = _finite_1d(a_values, "a_values")
    b = _finite_1d(b_values, "b_values")
    generator = np.random.default_rng(rng)
    a_boot = _bootstrap_distribution(a, iqm, n_resamples, generator)
    b_boot = _bootstrap_distribution(b, iqm, n_resamples, generator)
    iqm_a, iqm_b = iqm(a), iqm(b)
    absolute = iqm_b - iqm_a
    absolute_ci = _percentile_interval(b_boot - a_boot, confidence)
    if abs(iqm_a) < near_zero:
        relative, relative_ci = math.nan, (math.nan, math.nan)
    else:
        relative = absolute / abs(iqm_a)
        relative_ci = _percentile_interval((b_boot - a_boot) / np.maximum(np.abs(a_boot), near_zero), confidence)
    return RelativeDifference(
        iqm_a=iqm_a,
        iqm_b=iqm_b,
        absolute=absolute,
        absolute_ci=absolute_ci,
        relative=relative,
        relative_ci=relative_ci,
        near_zero=near_zero,
        confidence=confidence,
    )


# ----------------------------------------------------------------------------------------------------------------------
# Input validation
# ----------------------------------------------------------------------------------------------------------------------


def _check_columns(frame: pd.DataFrame, required: Sequence[str], source: str) -> None:
    """Raise ``ValueError`` naming ``source`` and the missing columns if any, or if the frame has no rows."""
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{source} is missing required column(s) {missing}; expected columns {list(required)}, "
            f"found {list(frame.columns)}"
        )
    if frame.empty:
        raise ValueError(f"{source} has no rows")


def _coerce_columns(frame: pd.DataFrame, source: str, *, strings: Sequence[str], integers: Sequence[str]) -> None:
    """In place: strings to ``str``, integer columns to ``int64``, other metric columns to float; errors name them."""
    for column in strings:
        if frame[column].isna().any():
            raise ValueError(f"{source}: column {column!r} has empty values")
        frame[column] = frame[column].astype(str)
    for column in (*integers, *METRIC_COLUMNS):
        try:
            numeric = pd.to_numeric(frame[column], errors="raise").astype(float)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{source}: column {column!r} is not numeric") from exc
        if column in integers:
            if numeric.isna().any() or not np.all(numeric == np.round(numeric)):
                raise ValueError(f"{source}: column {column!r} must hold integers without gaps")
            frame[column] = numeric.astype("int64")
        else:
            frame[column] = numeric
    if frame["mean_return"].isna().any():
        raise ValueError(f"{source}: column 'mean_return' has empty values")


def _validate_evaluations(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    frame = frame.copy()
    _check_columns(frame, EVALUATION_COLUMNS, source)
    _coerce_columns(frame, source, strings=("run", "variant"), integers=("seed", "step"))
    duplicated = frame.duplicated(["run", "step"])
    if duplicated.any():
        rows = frame.loc[duplicated, ["run", "step"]].to_records(index=False).tolist()
        raise ValueError(f"{source}: duplicated (run, step) rows: {rows}")
    inconsistent = frame.groupby("run")[["variant", "seed"]].nunique().max(axis=1) > 1
    if inconsistent.any():
        raise ValueError(
            f"{source}: runs with more than one variant or seed: {inconsistent[inconsistent].index.tolist()}"
        )
    return frame


def _validate_baselines(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    frame = frame.copy()
    _check_columns(frame, BASELINE_COLUMNS, source)
    _coerce_columns(frame, source, strings=("variant",), integers=())
    duplicated = frame["variant"].duplicated()
    if duplicated.any():
        raise ValueError(f"{source}: duplicated baseline variant(s) {frame.loc[duplicated, 'variant'].tolist()}")
    return frame


def _read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path} is empty (no header, no rows)") from exc


def load_evaluations(path: str | Path) -> pd.DataFrame:
    """
    Read and validate ``evaluations.csv``.

    :param path: the CSV file, with columns :data:`EVALUATION_COLUMNS` (extra columns are kept)
    :return: the evaluations, with ``run``/``variant`` as str, ``seed``/``step`` as int and metrics as float
    :raises ValueError: if the file is empty, lacks a required column, has non-numeric metrics, duplicated
        ``(run, step)`` rows or a run with several variants or seeds (the message names the file and column)
    """
    path = Path(path)
    return _validate_evaluations(_read_csv(path), str(path))


def load_baselines(path: str | Path) -> pd.DataFrame:
    """
    Read and validate ``baselines.csv``.

    :param path: the CSV file, with columns :data:`BASELINE_COLUMNS` (extra columns are kept)
    :return: one row per fixed policy, ``variant`` as str and metrics as float
    :raises ValueError: if the file is empty, lacks a required column, has non-numeric metrics or a duplicated
        variant (the message names the file and column)
    """
    path = Path(path)
    return _validate_baselines(_read_csv(path), str(path))


# ----------------------------------------------------------------------------------------------------------------------
# Per-run tables
# ----------------------------------------------------------------------------------------------------------------------


def variant_order(variants: Iterable[str]) -> list[str]:
    """
    Distinct variants in order of first appearance, with :data:`REFERENCE_VARIANT` (``"uniform"``) first if present.

    :param variants: variant names, e.g. the ``variant`` column of the evaluations
    :return: the ordered distinct names
    """
    order = list(dict.fromkeys(str(variant) for variant in variants))
    if REFERENCE_VARIANT in order:
        order.remove(REFERENCE_VARIANT)
        order.insert(0, REFERENCE_VARIANT)
    return order


def _sort_runs(frame: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Rows sorted by variant (in ``order``), seed, run; fresh index."""
    rank = frame["variant"].map({variant: i for i, variant in enumerate(order)})
    return (
        frame.assign(_rank=rank)
        .sort_values(["_rank", "seed", "run"], kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )


def final_returns(evals: pd.DataFrame) -> pd.DataFrame:
    """
    The final evaluation of each run: its row with the largest ``step``.

    Runs need not end at the same step (a shorter run contributes its own last evaluation).

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :return: one row per run, with all its columns (``run``, ``variant``, ``seed``, ``step``, metrics), sorted by
        variant (see :func:`variant_order`) then seed
    """
    _check_columns(evals, ("run", "variant", "seed", "step", "mean_return"), "evaluations")
    evals = evals.reset_index(drop=True)  # idxmax returns labels: make them unique
    last = evals.groupby("run", sort=False)["step"].idxmax()
    return _sort_runs(evals.loc[last.to_numpy()], variant_order(evals["variant"]))


def steps_to_threshold(evals: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """
    For each run, the first evaluation step whose ``mean_return`` is at least ``threshold``.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param threshold: the return to reach (e.g. the z-score baseline's mean return)
    :return: columns ``run``, ``variant``, ``seed``, ``steps_to_threshold`` (float; NaN if the run never reaches
        the threshold), one row per run, sorted by variant then seed
    """
    if math.isnan(threshold):
        raise ValueError("threshold is NaN")
    _check_columns(evals, ("run", "variant", "seed", "step", "mean_return"), "evaluations")
    runs = evals.groupby("run", sort=False)[["variant", "seed"]].first()
    reached = evals.loc[evals["mean_return"] >= threshold].groupby("run", sort=False)["step"].min()
    table = runs.assign(steps_to_threshold=reached.reindex(runs.index).astype(float)).reset_index()
    return _sort_runs(table, variant_order(evals["variant"]))


# ----------------------------------------------------------------------------------------------------------------------
# Summary
# ----------------------------------------------------------------------------------------------------------------------

_REGIME_COLUMNS = tuple(f"return_{regime}" for regime in REGIMES)
SUMMARY_COLUMNS: tuple[str, ...] = (
    "policy",
    "kind",
    "n_seeds",
    "final_return_iqm",
    "final_return_iqm_low",
    "final_return_iqm_high",
    "final_return_mean",
    "final_return_std",
    "steps_to_baseline_median",
    "n_seeds_reached_baseline",
    "final_sharpe_mean",
    *(f"final_{column}" for column in _REGIME_COLUMNS),
)


def _baseline_threshold(baselines: pd.DataFrame, name: str) -> float | None:
    """Mean return of baseline ``name``, or None if there is no such baseline."""
    rows = baselines.loc[baselines["variant"] == name, "mean_return"]
    return None if rows.empty else float(rows.iloc[0])


def summary_table(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    *,
    threshold_baseline: str = THRESHOLD_BASELINE,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> pd.DataFrame:
    """
    One row per learning variant, then one per baseline, with the figures of ``summary.md``.

    For a learning variant (``kind == "learned"``), over its runs' final evaluations (:func:`final_returns`):
    number of seeds, IQM of the final return with its percentile bootstrap CI over seeds, mean and std (ddof=1,
    NaN for one seed) of the final return, median over the seeds that reached it of the env steps to first reach
    ``threshold_baseline``'s mean return and how many seeds reached it, mean final Sharpe and mean final return per
    regime (NaN regime values are skipped). For a baseline (``kind == "baseline"``, a single fixed policy, no seeds)
    the return columns hold its mean return, and seed-related columns are NaN.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param threshold_baseline: the baseline whose mean return is the threshold for the steps column
        (steps columns are NaN if there is no such baseline)
    :param n_resamples: bootstrap resamples for the IQM CIs
    :param confidence: coverage of the CIs
    :param rng: seed or generator for the bootstrap (deterministic given a seed)
    :return: columns :data:`SUMMARY_COLUMNS`
    """
    _check_columns(evals, EVALUATION_COLUMNS, "evaluations")
    _check_columns(baselines, BASELINE_COLUMNS, "baselines")
    generator = np.random.default_rng(rng)
    final = final_returns(evals)
    threshold = _baseline_threshold(baselines, threshold_baseline)
    steps = steps_to_threshold(evals, threshold) if threshold is not None else None
    rows = []
    for variant in variant_order(evals["variant"]):
        runs = final.loc[final["variant"] == variant]
        returns = runs["mean_return"].to_numpy(dtype=float)
        low, high = bootstrap_ci(returns, iqm, n_resamples, confidence, generator)
        if steps is not None:
            reached = steps.loc[steps["variant"] == variant, "steps_to_threshold"].dropna()
            median_steps = float(reached.median()) if len(reached) else math.nan
            n_reached = float(len(reached))
        else:
            median_steps = n_reached = math.nan
        rows.append(
            {
                "policy": variant,
                "kind": "learned",
                "n_seeds": float(len(runs)),
                "final_return_iqm": iqm(returns),
                "final_return_iqm_low": low,
                "final_return_iqm_high": high,
                "final_return_mean": float(returns.mean()),
                "final_return_std": float(returns.std(ddof=1)) if returns.size > 1 else math.nan,
                "steps_to_baseline_median": median_steps,
                "n_seeds_reached_baseline": n_reached,
                "final_sharpe_mean": float(runs["sharpe"].mean()),
                **{f"final_{column}": float(runs[column].mean()) for column in _REGIME_COLUMNS},
            }
        )
    for baseline in baselines.itertuples(index=False):
        rows.append(
            {
                "policy": baseline.variant,
                "kind": "baseline",
                "n_seeds": math.nan,
                "final_return_iqm": float(baseline.mean_return),
                "final_return_iqm_low": math.nan,
                "final_return_iqm_high": math.nan,
                "final_return_mean": float(baseline.mean_return),
                "final_return_std": math.nan,
                "steps_to_baseline_median": math.nan,
                "n_seeds_reached_baseline": math.nan,
                "final_sharpe_mean": float(baseline.sharpe),
                **{f"final_{column}": float(getattr(baseline, column)) for column in _REGIME_COLUMNS},
            }
        )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _signed(value: float, decimals: int = 3) -> str:
    """``+0.123`` style; a dash for NaN; no ``-0.000``."""
    if math.isnan(value):
        return _DASH
    if round(value, decimals) == 0:
        value = 0.0
    return f"{value:+.{decimals}f}"


def _percent(value: float) -> str:
    return _DASH if math.isnan(value) else f"{100.0 * value:+.1f}%"


def _steps(value: float) -> str:
    """Env steps as ``750``, ``12.5k``, ``1.25M``."""
    if math.isnan(value):
        return _DASH
    if abs(value) >= 1e6:
        text, suffix = f"{value / 1e6:.2f}", "M"
    elif abs(value) >= 1e3:
        text, suffix = f"{value / 1e3:.1f}", "k"
    else:
        text, suffix = f"{value:.1f}", ""
    return text.rstrip("0").rstrip(".") + suffix


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table_rows(table: pd.DataFrame, level: str, threshold_baseline: str) -> list[str]:
    header = (
        f"| Policy | Seeds | Final return IQM [{level} CI] | Final return mean ± std "
        f"| Steps to {threshold_baseline} return (median, seeds reached) "
        "| Final Sharpe (mean) | Return normal | Return stress | Return break |"
    )
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in table.itertuples(index=False):
        regimes = [_signed(getattr(row, f"final_{column}")) for column in _REGIME_COLUMNS]
        if row.kind == "learned":
            n_seeds = int(row.n_seeds)
            iqm_text = (
                f"{_signed(row.final_return_iqm)} [{_signed(row.final_return_iqm_low)}, "
                f"{_signed(row.final_return_iqm_high)}]"
            )
            std = _DASH if math.isnan(row.final_return_std) else f"{row.final_return_std:.3f}"
            mean_text = f"{_signed(row.final_return_mean)} ± {std}"
            if math.isnan(row.n_seeds_reached_baseline):
                steps_text = _DASH
            elif row.n_seeds_reached_baseline == 0:
                steps_text = f"never (0/{n_seeds})"
            else:
                steps_text = f"{_steps(row.steps_to_baseline_median)} ({int(row.n_seeds_reached_baseline)}/{n_seeds})"
            cells = [row.policy, str(n_seeds), iqm_text, mean_text, steps_text]
        else:
            value = _signed(row.final_return_iqm)
            cells = [f"{row.policy} (baseline)", _DASH, value, value, _DASH]
        cells += [_signed(row.final_sharpe_mean, 2), *regimes]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return lines


def _difference_line(reference: str, variant: str, diff: RelativeDifference) -> str:
    level = f"{100 * diff.confidence:g}%"
    absolute = (
        f"absolute {_signed(diff.absolute)} [{_signed(diff.absolute_ci[0])}, {_signed(diff.absolute_ci[1])}] "
        f"({level} CI)"
    )
    if diff.relative_defined:
        relative = (
            f"relative {_percent(diff.relative)} [{_percent(diff.relative_ci[0])}, {_percent(diff.relative_ci[1])}] "
            f"({level} CI); "
        )
    else:
        relative = (
            f"relative difference not reported: |IQM({reference})| = {abs(diff.iqm_a):.2g} < {diff.near_zero:g}, "
            "so a ratio to it is meaningless; "
        )
    return f"- **{variant} vs {reference}**, IQM of final return: {relative}{absolute}."


# Below this many seeds a percentile bootstrap interval is little more than the range of the seeds, and
# covers the true value far less often than its nominal level (with 2 seeds it *is* the range).
FEW_SEEDS = 5


def _few_seeds_warning(final: pd.DataFrame) -> list[str]:
    """A warning line when some variant has fewer than ``FEW_SEEDS`` seeds, else nothing."""
    fewest = int(final.groupby("variant")["seed"].nunique().min())
    if fewest >= FEW_SEEDS:
        return []
    return [
        "",
        f"**Only {fewest} seed(s) per variant:** with fewer than {FEW_SEEDS} seeds these intervals are about "
        "the range of the seeds and cover far less than their nominal level; read them as ranges, not as "
        "confidence intervals.",
    ]


def write_summary_md(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    path: str | Path,
    *,
    command: str,
    seeds: Sequence[int],
    threshold_baseline: str = THRESHOLD_BASELINE,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    near_zero: float = NEAR_ZERO,
) -> str:
    """
    Write ``summary.md``: the :func:`summary_table` as Markdown, the difference of each non-uniform variant vs
    uniform (:func:`relative_difference_ci`), definitions, and the command and seeds that produced the data.

    Returns are printed signed with 3 decimals, Sharpe ratios with 2, steps as e.g. ``12.5k``.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param path: where to write the Markdown file
    :param command: the command line that produced the CSV files
    :param seeds: the seeds given to that command (a mismatch with the seeds in ``evals`` is flagged)
    :param threshold_baseline: the baseline whose mean return is the threshold for the steps column
    :param n_resamples: bootstrap resamples for all CIs
    :param confidence: coverage of all CIs
    :param rng: seed or generator for the bootstrap (deterministic given a seed)
    :param near_zero: threshold on ``|IQM(uniform)|`` below which no relative difference is reported
    :return: the Markdown text written
    """
    generator = np.random.default_rng(rng)
    table = summary_table(
        evals,
        baselines,
        threshold_baseline=threshold_baseline,
        n_resamples=n_resamples,
        confidence=confidence,
        rng=generator,
    )
    final = final_returns(evals)
    order = variant_order(evals["variant"])
    level = f"{100 * confidence:g}%"

    final_steps = sorted(final["step"].unique().tolist())
    if len(final_steps) == 1:
        at = f"final evaluation at {_steps(final_steps[0])} env steps"
    else:
        at = f"final evaluations at different steps ({', '.join(_steps(s) for s in final_steps)} env steps)"
    lines = [
        "# SAC replay variants on the pairs env: summary",
        "",
        f"Each learning run's {at}; fixed baselines evaluated on the same evaluation episodes. "
        f"CIs are {level} percentile bootstrap intervals over seeds.",
        *_few_seeds_warning(final),
        "",
        *_table_rows(table, level, threshold_baseline),
        "",
        "## Differences vs uniform",
        "",
    ]
    if REFERENCE_VARIANT not in order:
        lines.append(f"- No {REFERENCE_VARIANT!r} variant in the evaluations: no differences computed.")
    elif len(order) == 1:
        lines.append(f"- Only the {REFERENCE_VARIANT!r} variant is present: no differences computed.")
    else:
        reference = final.loc[final["variant"] == REFERENCE_VARIANT, "mean_return"].to_numpy(dtype=float)
        for variant in order[1:]:
            compared = final.loc[final["variant"] == variant, "mean_return"].to_numpy(dtype=float)
            diff = relative_difference_ci(
                reference,
                compared,
                n_resamples=n_resamples,
                confidence=confidence,
                rng=generator,
                near_zero=near_zero,
            )
            lines.append(_difference_line(REFERENCE_VARIANT, variant, diff))

    threshold = _baseline_threshold(baselines, threshold_baseline)
    threshold_note = (
        f"first evaluation step whose mean return is >= the {threshold_baseline!r} baseline's mean return "
        f"({_signed(threshold)}); median over the seeds that reached it, (seeds reached / seeds)"
        if threshold is not None
        else f"not computed: no {threshold_baseline!r} baseline in baselines.csv"
    )
    lines += [
        "",
        "## Definitions",
        "",
        "- Final return: mean evaluation return of a run's last evaluation.",
        "- IQM: interquartile mean over seeds, the mean after dropping floor(n/4) values at each end "
        "(`scipy.stats.trim_mean(x, 0.25)`); with 3 seeds or fewer nothing is dropped and it equals the mean.",
        f"- CIs: percentile bootstrap over seeds, {n_resamples} resamples, fixed bootstrap seed; for differences the "
        "seeds of each variant are resampled independently.",
        f"- Relative difference: (IQM(variant) - IQM({REFERENCE_VARIANT})) / |IQM({REFERENCE_VARIANT})|; not reported "
        f"when |IQM({REFERENCE_VARIANT})| < {near_zero:g} (only the absolute difference then).",
        "- Std: over seeds, ddof=1. Sharpe and regime returns: mean over seeds of the final evaluation's figures "
        "(regime return: mean per-episode return earned in that hidden regime).",
        f"- Steps to {threshold_baseline} return: {threshold_note}.",
        "- Baseline rows: one fixed policy each (no seeds); figures are over the evaluation episodes.",
        "",
        "## Provenance",
        "",
        "Command:",
        "",
        "```",
        command,
        "```",
        "",
        f"Seeds: {', '.join(str(seed) for seed in seeds)}",
    ]
    data_seeds = sorted(int(seed) for seed in pd.unique(evals["seed"]))
    if sorted(int(seed) for seed in set(seeds)) != data_seeds:
        found = ", ".join(map(str, data_seeds))
        lines.append(f"\n**Warning:** the seeds above differ from the seeds in the evaluations ({found}).")
    text = "\n".join(lines) + "\n"
    Path(path).write_text(text, encoding="utf-8")
    return text


# ----------------------------------------------------------------------------------------------------------------------
# Plots
# ----------------------------------------------------------------------------------------------------------------------


def _new_figure(width: float = 8.0, height: float = 5.0) -> Figure:
    """A figure attached to an Agg canvas (no pyplot, no global state)."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


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
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> Path:
    """
    Learning curves: mean evaluation return against env steps, per variant the mean over seeds at each evaluation
    step with a percentile bootstrap CI band over seeds, and a dashed horizontal line per baseline.

    At each step only the runs evaluated at that step count (a shorter run just stops contributing).

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param path: where to write the PNG
    :param n_resamples: bootstrap resamples per point
    :param confidence: coverage of the bands
    :param rng: seed or generator for the bootstrap (deterministic given a seed)
    :return: the path written
    """
    _check_columns(evals, EVALUATION_COLUMNS, "evaluations")
    _check_columns(baselines, BASELINE_COLUMNS, "baselines")
    generator = np.random.default_rng(rng)
    order = variant_order(evals["variant"])
    colors, baseline_colors = _variant_colors(order, baselines)
    figure = _new_figure()
    ax = figure.subplots()
    level = f"{100 * confidence:g}%"
    for variant in order:
        runs = evals.loc[evals["variant"] == variant]
        steps, means, lows, highs = [], [], [], []
        for step, group in runs.groupby("step", sort=True):
            values = group["mean_return"].to_numpy(dtype=float)
            low, high = bootstrap_ci(values, np.mean, n_resamples, confidence, generator)
            steps.append(step)
            means.append(values.mean())
            lows.append(low)
            highs.append(high)
        color = colors[variant]
        label = f"{variant} (mean of {runs['run'].nunique()} seeds, {level} CI)"
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
    ax.legend(fontsize="small")
    path = Path(path)
    figure.savefig(path, dpi=120)
    return path


def plot_regime_returns(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    path: str | Path,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> Path:
    """
    Grouped bar chart of the final return per hidden regime (normal, stress, break): per learning variant the mean
    over seeds of the final evaluation's regime return with percentile bootstrap CI error bars, and per baseline
    its regime return (hatched, no error bar).

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param path: where to write the PNG
    :param n_resamples: bootstrap resamples per bar
    :param confidence: coverage of the error bars
    :param rng: seed or generator for the bootstrap (deterministic given a seed)
    :return: the path written
    """
    _check_columns(evals, EVALUATION_COLUMNS, "evaluations")
    _check_columns(baselines, BASELINE_COLUMNS, "baselines")
    generator = np.random.default_rng(rng)
    final = final_returns(evals)
    order = variant_order(evals["variant"])
    colors, baseline_colors = _variant_colors(order, baselines)
    n_bars = len(order) + len(baselines)
    width = 0.8 / n_bars
    positions = np.arange(len(REGIMES), dtype=float)
    figure = _new_figure()
    ax = figure.subplots()
    level = f"{100 * confidence:g}%"
    for k, variant in enumerate(order):
        runs = final.loc[final["variant"] == variant]
        means, errors = [], [[], []]
        for column in _REGIME_COLUMNS:
            values = runs[column].dropna().to_numpy(dtype=float)
            if values.size == 0:
                means.append(math.nan)
                errors[0].append(0.0)
                errors[1].append(0.0)
                continue
            mean = float(values.mean())
            low, high = bootstrap_ci(values, np.mean, n_resamples, confidence, generator)
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
            label=f"{variant} (mean of {len(runs)} seeds, {level} CI)",
        )
    for j, baseline in enumerate(baselines.itertuples(index=False)):
        k = len(order) + j
        ax.bar(
            positions + (k - (n_bars - 1) / 2) * width,
            [float(getattr(baseline, column)) for column in _REGIME_COLUMNS],
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
    ax.legend(fontsize="small")
    path = Path(path)
    figure.savefig(path, dpi=120)
    return path


# ----------------------------------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------------------------------


def write_report(
    out_dir: str | Path,
    *,
    command: str,
    seeds: Sequence[int],
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: int = 0,
) -> dict[str, Path]:
    """
    Read ``out_dir/evaluations.csv`` and ``out_dir/baselines.csv``; write ``summary.md``, ``learning_curves.png``
    and ``regime_returns.png`` into ``out_dir``.

    :param out_dir: the comparison's output folder
    :param command: the command line that produced the CSV files (recorded in ``summary.md``)
    :param seeds: the seeds given to that command (recorded in ``summary.md``)
    :param n_resamples: bootstrap resamples for all CIs
    :param confidence: coverage of all CIs
    :param rng: bootstrap seed (each output uses a generator seeded with it, so each is reproducible on its own)
    :return: ``{"summary": ..., "learning_curves": ..., "regime_returns": ...}`` paths
    :raises FileNotFoundError: if a CSV file is missing
    :raises ValueError: if a CSV file is empty or lacks required columns (the message names file and columns)
    """
    out_dir = Path(out_dir)
    evals = load_evaluations(out_dir / EVALUATIONS_FILE)
    baselines = load_baselines(out_dir / BASELINES_FILE)
    options = {"n_resamples": n_resamples, "confidence": confidence, "rng": rng}
    summary_path = out_dir / SUMMARY_FILE
    write_summary_md(evals, baselines, summary_path, command=command, seeds=seeds, **options)
    return {
        "summary": summary_path,
        "learning_curves": plot_learning_curves(evals, baselines, out_dir / LEARNING_CURVES_FILE, **options),
        "regime_returns": plot_regime_returns(evals, baselines, out_dir / REGIME_RETURNS_FILE, **options),
    }
