"""
Per-run tables of a comparison: reading and checking its CSV files, each run's final evaluation and steps to a
threshold, and the summary table of each variant's figures over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from comparison.schema import (
    BASELINE_COLUMNS,
    EVALUATION_COLUMNS,
    METRIC_COLUMNS,
    REGIME_RETURN_COLUMNS,
    TELEMETRY_COLUMNS,
    TELEMETRY_STATS,
    check_columns,
)
from comparison.statistics import DEFAULT_BOOTSTRAP, BootstrapSettings, bootstrap_ci, iqm, keyed_generator
from envs import REGIME_UNKNOWN

#: The learning variant every other variant is compared against.
REFERENCE_VARIANT = "uniform"
#: The baseline whose mean return defines the "steps to threshold" figure.
THRESHOLD_BASELINE = "zscore"


def _as_floats(values: pd.Series, column: str, source: str) -> pd.Series:
    """``values`` as floats (empty cells NaN), or a ``ValueError`` naming ``column`` of ``source``."""
    if pd.api.types.is_numeric_dtype(values):  # as read from a CSV file of numbers: nothing to parse
        return values.astype(float)
    try:
        return pd.to_numeric(values, errors="raise").astype(float)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{source}: column {column!r} is not numeric") from exc


def _coerce_columns(frame: pd.DataFrame, source: str, *, strings: Sequence[str], integers: Sequence[str]) -> None:
    """In place: strings to ``str``, integer columns to ``int64``, other metric columns to float; errors name them."""
    for column in strings:
        if frame[column].isna().any():
            raise ValueError(f"{source}: column {column!r} has empty values")
        frame[column] = frame[column].astype(str)
    for column in (*integers, *METRIC_COLUMNS):
        numeric = _as_floats(frame[column], column, source)
        if column in integers:
            if numeric.isna().any() or not np.all(numeric == np.round(numeric)):
                raise ValueError(f"{source}: column {column!r} must hold integers without gaps")
            frame[column] = numeric.astype("int64")
        else:
            frame[column] = numeric
    if frame["mean_return"].isna().any():
        raise ValueError(f"{source}: column 'mean_return' has empty values")


def validate_evaluations(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """
    :param frame: evaluations as read from a CSV file (``read_table``)
    :param source: what to call them in errors (their file)
    :return: a checked copy (see ``load_evaluations``)
    """
    frame = frame.copy()
    check_columns(frame, EVALUATION_COLUMNS, source)
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
    check_columns(frame, BASELINE_COLUMNS, source)
    _coerce_columns(frame, source, strings=("variant",), integers=())
    duplicated = frame["variant"].duplicated()
    if duplicated.any():
        raise ValueError(f"{source}: duplicated baseline variant(s) {frame.loc[duplicated, 'variant'].tolist()}")
    return frame


def read_table(path: Path) -> pd.DataFrame:
    """
    A CSV file with a header row, as pandas reads it.

    :raises FileNotFoundError: naming ``path``
    :raises ValueError: naming ``path``: it is empty, or a row has more cells than the header
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path} is empty (no header, no rows)") from exc
    except pd.errors.ParserError as exc:
        raise ValueError(f"{path} is not a table of its header's columns: {exc}") from exc


def load_evaluations(path: str | Path) -> pd.DataFrame:
    """
    Read and validate ``evaluations.csv``.

    :param path: the CSV file, with columns :data:`EVALUATION_COLUMNS` (extra columns are kept)
    :return: the evaluations, with ``run``/``variant`` as str, ``seed``/``step`` as int and metrics as float
    :raises ValueError: if the file is empty, lacks a required column, has non-numeric metrics, duplicated
        ``(run, step)`` rows or a run with several variants or seeds (the message names the file and column)
    """
    path = Path(path)
    return validate_evaluations(read_table(path), str(path))


def load_baselines(path: str | Path) -> pd.DataFrame:
    """
    Read and validate ``baselines.csv``.

    :param path: the CSV file, with columns :data:`BASELINE_COLUMNS` (extra columns are kept)
    :return: one row per fixed policy, ``variant`` as str and metrics as float
    :raises ValueError: if the file is empty, lacks a required column, has non-numeric metrics or a duplicated
        variant (the message names the file and column)
    """
    path = Path(path)
    return _validate_baselines(read_table(path), str(path))


def load_telemetry(path: str | Path) -> pd.DataFrame:
    """
    Read and validate ``telemetry.csv``.

    :param path: the CSV file, with columns :data:`TELEMETRY_COLUMNS` (it may have no rows: untagged runs)
    :return: the telemetry, ``variant`` as str, ``seed``/``step``/``tag`` as int, the figures as float
    :raises ValueError: if the file lacks a required column, has gaps in ``seed``/``step``/``tag`` or non-numeric
        figures, or duplicated ``(variant, seed, step, tag)`` rows (the message names the file and column)
    """
    path = Path(path)
    return validate_telemetry(read_table(path), str(path))


def validate_telemetry(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """
    :param frame: telemetry as read from a CSV file (``read_table``)
    :param source: what to call it in errors (its file)
    :return: a checked copy (see ``load_telemetry``)
    """
    frame = frame.copy()
    missing = [column for column in TELEMETRY_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"{source} is missing required column(s) {missing}; expected {list(TELEMETRY_COLUMNS)}")
    frame["variant"] = frame["variant"].astype(str)
    for column in ("seed", "step", "tag", *TELEMETRY_STATS, "is_ess"):
        numeric = _as_floats(frame[column], column, source)
        if column in ("seed", "step", "tag") and numeric.isna().any():
            raise ValueError(f"{source}: column {column!r} must hold integers without gaps")
        frame[column] = numeric.astype("int64") if column in ("seed", "step", "tag") else numeric
    duplicated = frame.duplicated(["variant", "seed", "step", "tag"])
    if duplicated.any():
        raise ValueError(f"{source}: duplicated (variant, seed, step, tag) rows")
    return frame


def has_regime_labels(telemetry: pd.DataFrame | None) -> bool:
    """
    Whether the runs' prices had regime labels: False when every transition their replay stored had none (tag
    ``REGIME_UNKNOWN``: real prices); True where the telemetry cannot tell (None, or no rows).

    :param telemetry: the telemetry (columns :data:`TELEMETRY_COLUMNS`)
    """
    return telemetry is None or telemetry.empty or bool((telemetry["tag"] != REGIME_UNKNOWN).any())


def final_telemetry(telemetry: pd.DataFrame) -> pd.DataFrame:
    """
    The replay's figures at each run's last evaluation, per variant and tag the mean over seeds.

    :param telemetry: the telemetry (columns :data:`TELEMETRY_COLUMNS`)
    :return: columns ``variant``, ``tag``, ``n_seeds``, :data:`TELEMETRY_STATS` and ``is_ess`` (NaN where no seed
        has the figure), variants in :func:`variant_order`, tags ascending
    """
    check_columns(telemetry, TELEMETRY_COLUMNS, "telemetry")
    last = telemetry.groupby(["variant", "seed"])["step"].transform("max")
    final = telemetry.loc[telemetry["step"] == last]
    table = (
        final.groupby(["variant", "tag"], sort=False)
        .agg(n_seeds=("seed", "nunique"), **{stat: (stat, "mean") for stat in (*TELEMETRY_STATS, "is_ess")})
        .reset_index()
    )
    rank = table["variant"].map({variant: i for i, variant in enumerate(variant_order(telemetry["variant"]))})
    return table.assign(_rank=rank).sort_values(["_rank", "tag"]).drop(columns="_rank").reset_index(drop=True)


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
    check_columns(evals, ("run", "variant", "seed", "step", "mean_return"), "evaluations")
    evals = evals.reset_index(drop=True)  # idxmax returns labels: make them unique
    last = evals.groupby("run", sort=False)["step"].idxmax()
    return _sort_runs(evals.loc[last.to_numpy()], variant_order(evals["variant"]))


def shared_steps(evals: pd.DataFrame, low: float | None = None, high: float | None = None) -> list[int]:
    """
    The env steps from ``low`` to ``high`` (inclusive; None: no bound) at which every run was evaluated, ascending.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param low: first env step (None: the first evaluation)
    :param high: last env step (None: the last evaluation)
    :raises ValueError: if ``low > high``, or no step in the range was evaluated by every run
    """
    if low is not None and high is not None and low > high:
        raise ValueError(f"low must be <= high, got low={low}, high={high}")
    check_columns(evals, ("run", "step"), "evaluations")
    runs_per_step = evals.groupby("step")["run"].nunique()
    steps = runs_per_step.index[runs_per_step == evals["run"].nunique()]
    in_range = (steps >= (-math.inf if low is None else low)) & (steps <= (math.inf if high is None else high))
    if not in_range.any():
        raise ValueError(f"no step from low={low} to high={high} was evaluated by every run")
    return sorted(int(step) for step in steps[in_range])


def curve_means(evals: pd.DataFrame, steps: Sequence[int]) -> pd.DataFrame:
    """
    Each run's mean return over its evaluations at ``steps`` (say, :func:`shared_steps`, so that runs of different
    lengths or evaluation schedules are averaged over the same points): the area under each learning curve per
    evaluation, a measure of how fast a run learns rather than where it ends.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param steps: the env steps counted
    :return: columns ``run``, ``variant``, ``seed``, ``mean_return``, one row per run with an evaluation at one of
        ``steps``, sorted by variant then seed
    """
    check_columns(evals, ("run", "variant", "seed", "step", "mean_return"), "evaluations")
    window = evals.loc[evals["step"].isin(steps)]
    table = (
        window.groupby("run", sort=False)
        .agg(variant=("variant", "first"), seed=("seed", "first"), mean_return=("mean_return", "mean"))
        .reset_index()
    )
    return _sort_runs(table, variant_order(evals["variant"]))


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
    check_columns(evals, ("run", "variant", "seed", "step", "mean_return"), "evaluations")
    runs = evals.groupby("run", sort=False)[["variant", "seed"]].first()
    reached = evals.loc[evals["mean_return"] >= threshold].groupby("run", sort=False)["step"].min()
    table = runs.assign(steps_to_threshold=reached.reindex(runs.index).astype(float)).reset_index()
    return _sort_runs(table, variant_order(evals["variant"]))


def censored_steps_to_threshold(evals: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """
    :func:`steps_to_threshold` with the runs that never reach ``threshold`` censored at their last evaluation
    step (a lower bound of their true steps: a comparison of such figures understates how much slower they are).

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param threshold: the return to reach
    :return: columns ``run``, ``variant``, ``seed``, ``steps`` (float), ``reached`` (bool), sorted as
        :func:`steps_to_threshold`
    """
    table = steps_to_threshold(evals, threshold)
    last = evals.groupby("run")["step"].max()
    reached = table["steps_to_threshold"].notna()
    steps = table["steps_to_threshold"].where(reached, table["run"].map(last).astype(float))
    return table[["run", "variant", "seed"]].assign(steps=steps, reached=reached)


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
    *(f"final_{column}" for column in REGIME_RETURN_COLUMNS),
)


def baseline_threshold(baselines: pd.DataFrame, name: str) -> float | None:
    """Mean return of baseline ``name``, or None if there is no such baseline."""
    rows = baselines.loc[baselines["variant"] == name, "mean_return"]
    return None if rows.empty else float(rows.iloc[0])


def summary_table(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    *,
    threshold_baseline: str = THRESHOLD_BASELINE,
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
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
    :param bootstrap: resamples and coverage of the IQM CIs
    :param rng: bootstrap seed; each variant's interval has its own generator (:func:`keyed_generator`)
    :return: columns :data:`SUMMARY_COLUMNS`
    """
    check_columns(evals, EVALUATION_COLUMNS, "evaluations")
    check_columns(baselines, BASELINE_COLUMNS, "baselines")
    final = final_returns(evals)
    threshold = baseline_threshold(baselines, threshold_baseline)
    steps = steps_to_threshold(evals, threshold) if threshold is not None else None
    rows = []
    for variant in variant_order(evals["variant"]):
        runs = final.loc[final["variant"] == variant]
        returns = runs["mean_return"].to_numpy(dtype=float)
        generator = keyed_generator(rng, "final_return_iqm", variant)
        low, high = bootstrap_ci(returns, iqm, bootstrap.n_resamples, bootstrap.confidence, generator)
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
                **{f"final_{column}": float(runs[column].mean()) for column in REGIME_RETURN_COLUMNS},
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
                **{f"final_{column}": float(getattr(baseline, column)) for column in REGIME_RETURN_COLUMNS},
            }
        )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
