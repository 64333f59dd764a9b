"""The comparison's ``summary.md``: the summary table as Markdown, the differences to uniform, definitions."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from comparison.schema import REGIME_RETURN_COLUMNS, tag_name
from comparison.statistics import (
    DEFAULT_BOOTSTRAP,
    FEW_SEEDS,
    NEAR_ZERO,
    BootstrapSettings,
    RelativeDifference,
    SameSeedComparison,
    iqm,
    keyed_generator,
    median_ratio_ci,
    paired_mean_difference_ci,
    probability_of_improvement_ci,
    relative_difference_ci,
    same_seed_comparison,
)
from comparison.tables import (
    REFERENCE_VARIANT,
    THRESHOLD_BASELINE,
    baseline_threshold,
    censored_steps_to_threshold,
    curve_means,
    final_returns,
    final_telemetry,
    has_regime_labels,
    shared_steps,
    summary_table,
    variant_order,
)

_DASH = "—"
_NOT_APPLICABLE = "n/a"


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


def _table_rows(table: pd.DataFrame, level: str, threshold_baseline: str, regime_labels: bool) -> list[str]:
    header = (
        f"| Policy | Seeds | Final return IQM [{level} CI] | Final return mean ± std "
        f"| Steps to {threshold_baseline} return (median, seeds reached) "
        "| Final Sharpe (mean) | Return normal | Return stress | Return break |"
    )
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in table.itertuples(index=False):
        regimes = [
            _signed(getattr(row, f"final_{column}")) if regime_labels else _NOT_APPLICABLE
            for column in REGIME_RETURN_COLUMNS
        ]
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


def _steps_ratio_line(
    steps: pd.DataFrame, variant: str, threshold_baseline: str, bootstrap: BootstrapSettings, rng: int
) -> str:
    """The line comparing a variant's censored steps to the threshold with the reference's."""
    reference = steps.loc[steps["variant"] == REFERENCE_VARIANT]
    compared = steps.loc[steps["variant"] == variant]
    medians = f"median {_steps(compared['steps'].median())} vs {_steps(reference['steps'].median())}"
    shares = (
        f"reached by {int(compared['reached'].sum())}/{len(compared)} vs "
        f"{int(reference['reached'].sum())}/{len(reference)} seeds"
    )
    head = f"- Steps to {threshold_baseline} return, {variant} / {REFERENCE_VARIANT}: {medians} ({shares})"
    if (reference["steps"] <= 0).any():
        return f"{head}; ratio not reported ({REFERENCE_VARIANT} reaches it at step 0)."
    ratio, (low, high) = median_ratio_ci(
        reference["steps"],
        compared["steps"],
        n_resamples=bootstrap.n_resamples,
        confidence=bootstrap.confidence,
        rng=keyed_generator(rng, "steps_ratio", variant),
    )
    return f"{head}; ratio {ratio:.2f} [{low:.2f}, {high:.2f}] ({bootstrap.level} CI)."


def _same_seed_line(
    variant: str, comparison: SameSeedComparison, figure: str = "final return", detail: str = ""
) -> str:
    """
    The line counting the seeds on which a variant's ``figure`` is above and below the reference's run of that
    seed, ``detail`` appended.
    """
    head = f"- Same seed, {variant} vs {REFERENCE_VARIANT}, {figure}"
    if not comparison.seeds:
        return f"{head}: no seed in common."
    ties = f", level on {comparison.ties}" if comparison.ties else ""
    return (
        f"{head}: below on {comparison.below}, above on {comparison.above}{ties} of {comparison.seeds} seeds; "
        f"sign test p = {comparison.p_value:.3g}{detail}."
    )


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


def _share(value: float) -> str:
    return _DASH if math.isnan(value) else f"{100.0 * value:.1f}%"


def _telemetry_rows(telemetry: pd.DataFrame) -> list[str]:
    """The replay-attention section: per variant and regime the final shares, TD error and IS ESS."""
    lines = [
        "## Where each replay's attention goes",
        "",
        "At each run's last evaluation, mean over seeds: the regime's share of the stored transitions, of the "
        "priority mass (prioritized buffers), of the transitions sampled, the mean |TD error| of its sampled "
        "transitions, and the IS weights' effective sample size (PER's IS-weighted variants). Where the actor "
        "trains on batches of its own (la3p, per_critic_only), Sampled counts the critic's and the actor's "
        "together; each run's progress.csv logs them apart (replay/tag_k_critic_sample_share, "
        "replay/tag_k_actor_sample_share). Over training: replay_attention.png.",
        "",
        "| Variant | Regime | Stored | Priority mass | Sampled | Mean abs TD error | IS ESS |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    previous = None
    for row in final_telemetry(telemetry).itertuples(index=False):
        first = row.variant != previous
        previous = row.variant
        td_error = _DASH if math.isnan(row.td_error) else f"{row.td_error:.3g}"
        is_ess = (_DASH if math.isnan(row.is_ess) else f"{row.is_ess:.3f}") if first else ""
        cells = [row.variant if first else "", tag_name(row.tag), _share(row.buffer_share)]
        cells += [_share(row.priority_share), _share(row.sample_share), td_error, is_ess]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return ["", *lines]


def _few_seeds_warning(table: pd.DataFrame) -> list[str]:
    """A warning line naming the variants of :func:`summary_table` with fewer than ``FEW_SEEDS`` seeds, else nothing."""
    learned = table.loc[table["kind"] == "learned"]
    few = learned.loc[learned["n_seeds"] < FEW_SEEDS]
    if few.empty:
        return []
    counts = ", ".join(f"{row.policy} {int(row.n_seeds)}" for row in few.itertuples(index=False))
    return [
        "",
        f"**Fewer than {FEW_SEEDS} seeds** (seeds: {counts}): these variants' intervals are about the range of "
        "their seeds and cover far less than their nominal level; read them as ranges, not as confidence "
        "intervals.",
    ]


def headline(evals: pd.DataFrame, baselines: pd.DataFrame) -> list[str]:
    """
    A few lines for the terminal: each variant's IQM of final return over its seeds, and each baseline's return.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    """
    final = final_returns(evals)
    order = variant_order(evals["variant"])
    width = max(len(name) for name in [*order, *baselines["variant"]])
    lines = ["Final return, IQM over seeds:"]
    for variant in order:
        returns = final.loc[final["variant"] == variant, "mean_return"]
        seeds = f"{len(returns)} seed{'s' if len(returns) != 1 else ''}"
        lines.append(f"  {variant:<{width}}  {_signed(iqm(returns))}  ({seeds})")
    lines += [
        f"  {row.variant:<{width}}  {_signed(row.mean_return)}  (baseline)" for row in baselines.itertuples(index=False)
    ]
    return lines


def returns_by_seed(runs: pd.DataFrame) -> dict[str, dict[int, float]]:
    """
    ``{variant: {seed: mean_return}}`` from one row per run (:func:`final_returns`'s or :func:`curve_means`'s),
    each variant's seeds in the rows' order (the order its bootstrap intervals resample).

    :raises ValueError: if two runs of one variant share a seed (their runs could not be told apart)
    """
    repeated = runs[runs.duplicated(["variant", "seed"])]
    if not repeated.empty:
        variant, seed = repeated.iloc[0][["variant", "seed"]]
        raise ValueError(f"two runs of variant {variant!r} have seed {seed}: the report needs one run per seed")
    return {
        variant: dict(zip(rows["seed"].astype(int), rows["mean_return"].astype(float), strict=True))
        for variant, rows in runs.groupby("variant", sort=False)
    }


def curve_gap_lines(
    evals: pd.DataFrame,
    *,
    low: float | None = None,
    high: float | None = None,
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
) -> list[str]:
    """
    One line per non-reference variant: the mean over shared seeds of its runs' :func:`curve_means` minus the
    reference's run of the same seed, with a paired bootstrap CI (:func:`paired_mean_difference_ci`), and on how
    many seeds it is above and below (:func:`same_seed_comparison`).

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param low: first env step counted (None: the first evaluation)
    :param high: last env step counted (None: the last evaluation)
    :param bootstrap: resamples and coverage of the intervals
    :param rng: bootstrap seed (each variant's interval has its own generator, :func:`keyed_generator`)
    :return: the Markdown lines; none without a reference variant
    :raises ValueError: as :func:`shared_steps`
    """
    steps = shared_steps(evals, low, high)
    by_seed = returns_by_seed(curve_means(evals, steps))
    if REFERENCE_VARIANT not in by_seed:
        return []
    counted = f"the {len(steps)} evaluations from {_steps(steps[0])} to" if len(steps) > 1 else "the evaluation at"
    figure = f"mean return over {counted} {_steps(steps[-1])} env steps"
    lines = []
    for variant in variant_order(evals["variant"])[1:]:
        shared = same_seed_comparison(by_seed[REFERENCE_VARIANT], by_seed[variant])
        detail = ""
        if shared.seeds:
            gap, (gap_low, gap_high) = paired_mean_difference_ci(
                by_seed[REFERENCE_VARIANT],
                by_seed[variant],
                n_resamples=bootstrap.n_resamples,
                confidence=bootstrap.confidence,
                rng=keyed_generator(rng, "curve_gap", variant),
            )
            detail = (
                f"; difference {_signed(gap, 4)} [{_signed(gap_low, 4)}, {_signed(gap_high, 4)}] ({bootstrap.level} CI)"
            )
        lines.append(_same_seed_line(variant, shared, figure, detail))
    return lines


def write_summary_md(
    evals: pd.DataFrame,
    baselines: pd.DataFrame,
    path: str | Path,
    *,
    command: str,
    seeds: Sequence[int],
    threshold_baseline: str = THRESHOLD_BASELINE,
    bootstrap: BootstrapSettings = DEFAULT_BOOTSTRAP,
    rng: int = 0,
    near_zero: float = NEAR_ZERO,
    telemetry: pd.DataFrame | None = None,
) -> str:
    """
    Write ``summary.md``: the :func:`summary_table` as Markdown, the difference of each non-uniform variant vs
    uniform (:func:`relative_difference_ci`), where each replay's attention goes (with ``telemetry``),
    definitions, and the command and seeds that produced the data.

    Returns are printed signed with 3 decimals, Sharpe ratios with 2, steps as e.g. ``12.5k``.

    :param evals: the evaluations (columns :data:`EVALUATION_COLUMNS`)
    :param baselines: the baselines (columns :data:`BASELINE_COLUMNS`)
    :param path: where to write the Markdown file
    :param command: the command line that produced the CSV files
    :param seeds: the seeds given to that command (a mismatch with the seeds in ``evals`` is flagged)
    :param threshold_baseline: the baseline whose mean return is the threshold for the steps column
    :param bootstrap: resamples and coverage of all CIs
    :param rng: bootstrap seed; each interval has its own generator (:func:`keyed_generator`), so that adding
        or removing a variant leaves the other variants' intervals as they were
    :param near_zero: threshold on ``|IQM(uniform)|`` below which no relative difference is reported
    :param telemetry: the runs' telemetry (columns :data:`TELEMETRY_COLUMNS`); None or no rows: no such section.
        Where it shows that the prices had no regime labels (``has_regime_labels``), the regime returns read n/a
    :return: the Markdown text in ``path``: an existing file that differs only in its command is left as it is,
        so that rebuilding an unchanged report (``--report-only``) rewrites nothing, and the command that produced
        the figures stays their record
    """
    table = summary_table(
        evals,
        baselines,
        threshold_baseline=threshold_baseline,
        bootstrap=bootstrap,
        rng=rng,
    )
    final = final_returns(evals)
    by_seed = returns_by_seed(final)
    order = variant_order(evals["variant"])
    level = bootstrap.level
    threshold = baseline_threshold(baselines, threshold_baseline)
    regime_labels = has_regime_labels(telemetry)

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
        *_few_seeds_warning(table),
        "",
        *_table_rows(table, level, threshold_baseline, regime_labels),
        "",
        "## Differences vs uniform",
        "",
    ]
    if REFERENCE_VARIANT not in order:
        lines.append(f"- No {REFERENCE_VARIANT!r} variant in the evaluations: no differences computed.")
    elif len(order) == 1:
        lines.append(f"- Only the {REFERENCE_VARIANT!r} variant is present: no differences computed.")
    else:
        scores = {variant: np.fromiter(seeds.values(), dtype=float) for variant, seeds in by_seed.items()}
        reference = scores[REFERENCE_VARIANT]
        for variant in order[1:]:
            diff = relative_difference_ci(
                reference,
                scores[variant],
                n_resamples=bootstrap.n_resamples,
                confidence=bootstrap.confidence,
                rng=keyed_generator(rng, "relative_difference", variant),
                near_zero=near_zero,
            )
            lines.append(_difference_line(REFERENCE_VARIANT, variant, diff))
        lines += ["", f"## Over seeds, against {REFERENCE_VARIANT} (rliable)", ""]
        for variant in order[1:]:
            p, (low, high) = probability_of_improvement_ci(
                scores[variant],
                reference,
                n_resamples=bootstrap.n_resamples,
                confidence=bootstrap.confidence,
                rng=keyed_generator(rng, "probability_of_improvement", variant),
            )
            lines.append(
                f"- P({variant} > {REFERENCE_VARIANT}), final return: {p:.2f} [{low:.2f}, {high:.2f}] ({level} CI)."
            )
        for variant in order[1:]:
            lines.append(_same_seed_line(variant, same_seed_comparison(by_seed[REFERENCE_VARIANT], by_seed[variant])))
        if threshold is not None:
            steps = censored_steps_to_threshold(evals, threshold)
            for variant in order[1:]:
                lines.append(_steps_ratio_line(steps, variant, threshold_baseline, bootstrap, rng))
        lines += curve_gap_lines(evals, bootstrap=bootstrap, rng=rng)

    if telemetry is not None and not telemetry.empty:
        lines += _telemetry_rows(telemetry)

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
        f"- CIs: percentile bootstrap over seeds, {bootstrap.n_resamples} resamples; each interval's generator is "
        "seeded by a fixed bootstrap seed and the interval's name (figure and variant), so an interval does not move "
        "when the report gains or loses other variants; for differences the seeds of each variant are resampled "
        "independently.",
        f"- Relative difference: (IQM(variant) - IQM({REFERENCE_VARIANT})) / |IQM({REFERENCE_VARIANT})|; not reported "
        f"when |IQM({REFERENCE_VARIANT})| < {near_zero:g} (only the absolute difference then).",
        "- Std: over seeds, ddof=1. Sharpe and regime returns: mean over seeds of the final evaluation's figures "
        "(regime return: mean per-episode return earned in that hidden regime"
        + ("" if regime_labels else "; n/a here: these prices have no regime labels")
        + ").",
        f"- Steps to {threshold_baseline} return: {threshold_note}.",
        f"- P(variant > {REFERENCE_VARIANT}): probability that a seed of the variant ends with a higher final return "
        f"than a seed of {REFERENCE_VARIANT} (Mann-Whitney U / (n m), ties half; Agarwal et al. 2021). Its CI, the IQM "
        "CIs and the ratio CIs are stratified bootstraps as rliable's on one task: each variant's seeds resampled on "
        "their own.",
        f"- Same seed: each seed that both the variant and {REFERENCE_VARIANT} ran, compared run against run (paired, "
        "as runs of one seed share the training env's seed); sign test: two-sided exact binomial test of the seeds "
        "below against those above (ties dropped), uncorrected for the number of variants compared.",
        f"- Steps ratio: median over all seeds of the variant's env steps to the {threshold_baseline} return over "
        f"{REFERENCE_VARIANT}'s; a seed that never reaches it is censored at its last evaluation step (so the ratio "
        "understates how much slower a variant whose seeds fail is); not reported when a "
        f"{REFERENCE_VARIANT} seed reaches it at step 0.",
        "- Mean return over the evaluations: a run's mean return averaged over the evaluation steps that every run "
        "of the report has (the area under its learning curve, per evaluation: how fast it learns, not where it ends); "
        f"difference: its mean over the seeds both ran of the variant's run minus {REFERENCE_VARIANT}'s, CI a "
        "bootstrap of those paired differences.",
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
    path = Path(path)
    if path.is_file() and _without_command(path.read_text(encoding="utf-8")) == _without_command(text):
        return path.read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    return text


# The command block of the Provenance section (see write_summary_md).
_COMMAND_BLOCK = re.compile(r"^Command:\n\n```\n.*?\n```\n", re.MULTILINE | re.DOTALL)


def _without_command(summary: str) -> str:
    """A ``summary.md`` text without its command block, to compare two reports on their figures."""
    return _COMMAND_BLOCK.sub("", summary, count=1)
