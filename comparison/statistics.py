"""
Statistics over seeds, after Agarwal et al. (2021), "Deep Reinforcement Learning at the Edge of the Statistical
Precipice": the interquartile mean (IQM) and percentile bootstrap confidence intervals.

Pure functions of arrays of numbers (one per seed): nothing here knows of envs, variants or files.

:func:`iqm` and :func:`probability_of_improvement` give rliable's ``aggregate_iqm`` and ``probability_of_improvement``
on one task (the IQM up to the last bits, summed in another order; the tests check both against the scipy formulas
rliable uses), and the intervals are percentile bootstraps stratified as rliable's (each sample resampled on its own).
rliable itself is not a dependency (checked with rliable 1.2.0, December 2026): it requires ``arch<8``, whose last
release (7.2.0) fails on import under pandas 3 (``pandas>=2.0`` here resolves to 3.x), while arch 8 breaks rliable's
bootstrap constructor; where it runs (pandas 2.3), its resampling draws from NumPy's global generator and ignores
``random_state``, so a keyed, reproducible interval would need the global seed set around each call; and it is 400
to 600 times slower per interval (a Python call per resample) than the vectorised resampling here. Relative
differences, same-seed (paired) comparisons and ratios of medians are not in rliable at all.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

RngLike = np.random.Generator | int | None

#: Below this absolute value of the reference IQM, a relative difference is not reported (absolute difference only).
NEAR_ZERO = 1e-3
#: Below this many seeds a percentile bootstrap interval is little more than the range of the seeds, and covers the
#: true value far less often than its nominal level (with 2 seeds it *is* the range).
FEW_SEEDS = 5


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


@dataclass(frozen=True)
class BootstrapSettings:
    """
    How every interval of a report is bootstrapped.

    :param n_resamples: bootstrap resamples per interval
    :param confidence: coverage of the intervals, in (0, 1)
    """

    n_resamples: int = 2000
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if int(self.n_resamples) != self.n_resamples or self.n_resamples < 1:
            raise ValueError(f"n_resamples must be a positive integer, got {self.n_resamples!r}")
        _check_confidence(self.confidence)

    @property
    def level(self) -> str:
        """The confidence as a percentage, e.g. ``"95%"``."""
        return f"{100 * self.confidence:g}%"


#: What a report uses unless told otherwise.
DEFAULT_BOOTSTRAP = BootstrapSettings()


def keyed_generator(seed: int, *key: str) -> np.random.Generator:
    """
    A generator determined by ``seed`` and ``key`` alone (say an interval's figure and the name of what it is over),
    so that a report's interval does not move when the report gains or loses other intervals.

    :param seed: the report's bootstrap seed, >= 0
    :param key: the interval's name, in parts
    """
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    words = [int.from_bytes(hashlib.sha256(part.encode()).digest()[:8], "little") for part in key]
    return np.random.default_rng([int(seed), *words])


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


def _resamples(values: np.ndarray, n_resamples: int, generator: np.random.Generator) -> np.ndarray:
    """``n_resamples`` resamples (rows; with replacement, same size) of ``values``."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    return values[generator.integers(0, values.size, size=(n_resamples, values.size))]


def _bootstrap_distribution(
    values: np.ndarray,
    statistic: Callable[[np.ndarray], float],
    n_resamples: int,
    generator: np.random.Generator,
) -> np.ndarray:
    """Statistic of ``n_resamples`` resamples (with replacement, same size) of ``values``."""
    samples = _resamples(values, n_resamples, generator)
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


def probability_of_improvement(x_values: Iterable[float] | np.ndarray, y_values: Iterable[float] | np.ndarray) -> float:
    """
    Probability that a run of ``x`` scores higher than a run of ``y`` (Agarwal et al. 2021; rliable's
    ``probability_of_improvement`` on one task): the Mann-Whitney U statistic of ``x`` over ``y`` divided by
    ``n * m``, i.e. the share of the ``n * m`` pairs in which ``x`` wins, ties counting half.

    :param x_values: one score per seed of ``x`` (e.g. PER's final returns)
    :param y_values: one score per seed of ``y`` (e.g. uniform's final returns)
    :return: P(X > Y) + P(X = Y) / 2, in [0, 1]
    """
    x = _finite_1d(x_values, "x_values")
    y = _finite_1d(y_values, "y_values")
    return float(_improvement_rows(x[np.newaxis, :], y[np.newaxis, :])[0])


def _improvement_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`probability_of_improvement` of each row of ``x`` over the same row of ``y``."""
    wins = x[:, :, np.newaxis] > y[:, np.newaxis, :]
    ties = x[:, :, np.newaxis] == y[:, np.newaxis, :]
    return (wins + 0.5 * ties).mean(axis=(1, 2))


def probability_of_improvement_ci(
    x_values: Iterable[float] | np.ndarray,
    y_values: Iterable[float] | np.ndarray,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> tuple[float, tuple[float, float]]:
    """
    :func:`probability_of_improvement` with its stratified percentile bootstrap CI: each resample redraws the
    seeds of ``x`` and of ``y`` independently (the two variants are the strata), as rliable does.

    :param x_values: one score per seed of ``x``
    :param y_values: one score per seed of ``y``
    :param n_resamples: number of bootstrap resamples
    :param confidence: coverage of the interval, in (0, 1)
    :param rng: seed or generator (deterministic given a seed)
    :return: ``(probability, (low, high))``
    """
    _check_confidence(confidence)
    x = _finite_1d(x_values, "x_values")
    y = _finite_1d(y_values, "y_values")
    generator = np.random.default_rng(rng)
    x_boot, y_boot = _resamples(x, n_resamples, generator), _resamples(y, n_resamples, generator)
    return probability_of_improvement(x, y), _percentile_interval(_improvement_rows(x_boot, y_boot), confidence)


@dataclass(frozen=True)
class SameSeedComparison:
    """
    A compared sample against a reference on the seeds both have: on how many it ends above and below, and
    the two-sided sign test of that split (ties dropped; 1.0 when every shared seed is a tie or none is shared).

    :param above: shared seeds where the compared score is higher
    :param below: shared seeds where it is lower
    :param ties: shared seeds where the two are equal
    :param p_value: the sign test's two-sided p-value (exact binomial, p = 1/2), uncorrected for multiple tests
    """

    above: int
    below: int
    ties: int
    p_value: float

    @property
    def seeds(self) -> int:
        """Number of shared seeds."""
        return self.above + self.below + self.ties


def _paired_differences(reference: Mapping[int, float], compared: Mapping[int, float]) -> np.ndarray:
    """``compared[seed] - reference[seed]`` over the seeds both hold, ascending by seed (empty if none is shared)."""
    shared = sorted(set(reference) & set(compared))
    if not shared:
        return np.empty(0)
    return _finite_1d([compared[seed] - reference[seed] for seed in shared], "score differences")


def same_seed_comparison(reference: Mapping[int, float], compared: Mapping[int, float]) -> SameSeedComparison:
    """
    Compare two samples seed by seed, on the seeds both hold: meaningful where runs of one seed are paired
    (e.g. drawn from the same training env seed), unlike :func:`probability_of_improvement`, which pairs every
    seed of one with every seed of the other.

    :param reference: score per seed of the reference (e.g. uniform's final returns)
    :param compared: score per seed of the compared sample
    :return: the counts and the sign test's p-value
    """
    differences = _paired_differences(reference, compared)
    if differences.size == 0:
        return SameSeedComparison(above=0, below=0, ties=0, p_value=1.0)
    above, below = int(np.sum(differences > 0)), int(np.sum(differences < 0))
    p_value = binomtest(above, above + below, 0.5).pvalue if above + below else 1.0
    return SameSeedComparison(above=above, below=below, ties=differences.size - above - below, p_value=float(p_value))


def paired_mean_difference_ci(
    reference: Mapping[int, float],
    compared: Mapping[int, float],
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> tuple[float, tuple[float, float]]:
    """
    Mean over the seeds both hold of ``compared[seed] - reference[seed]``, with its percentile bootstrap CI (the
    seeds resampled with their pairs): the paired counterpart of :func:`relative_difference_ci`'s absolute
    difference, for runs of one seed that share their training env's seed.

    :param reference: score per seed of the reference (e.g. uniform's mean return over its evaluations)
    :param compared: score per seed of the compared sample
    :param n_resamples: number of bootstrap resamples
    :param confidence: coverage of the interval, in (0, 1)
    :param rng: seed or generator (deterministic given a seed)
    :return: ``(mean difference, (low, high))``
    :raises ValueError: if the two share no seed
    """
    differences = _paired_differences(reference, compared)
    if differences.size == 0:
        raise ValueError(
            f"reference and compared share no seed (reference: {sorted(reference)}, compared: {sorted(compared)})"
        )
    interval = bootstrap_ci(differences, np.mean, n_resamples=n_resamples, confidence=confidence, rng=rng)
    return float(differences.mean()), interval


def median_ratio_ci(
    a_values: Iterable[float] | np.ndarray,
    b_values: Iterable[float] | np.ndarray,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
) -> tuple[float, tuple[float, float]]:
    """
    Ratio of the medians ``median(b) / median(a)`` (e.g. PER's env steps to a return over uniform's), with its
    stratified percentile bootstrap CI (the seeds of ``a`` and ``b`` resampled independently).

    :param a_values: the reference sample, > 0 (e.g. uniform's steps per seed)
    :param b_values: the compared sample, >= 0
    :param n_resamples: number of bootstrap resamples
    :param confidence: coverage of the interval, in (0, 1)
    :param rng: seed or generator (deterministic given a seed)
    :return: ``(ratio, (low, high))``
    """
    _check_confidence(confidence)
    a = _finite_1d(a_values, "a_values")
    b = _finite_1d(b_values, "b_values")
    if np.any(a <= 0) or np.any(b < 0):
        raise ValueError(f"a_values must be > 0 and b_values >= 0, got {a.tolist()} and {b.tolist()}")
    generator = np.random.default_rng(rng)
    a_boot, b_boot = _resamples(a, n_resamples, generator), _resamples(b, n_resamples, generator)
    ratios = np.median(b_boot, axis=1) / np.median(a_boot, axis=1)
    return float(np.median(b) / np.median(a)), _percentile_interval(ratios, confidence)


def normalised_iqm_ci(
    tasks: Sequence[tuple[Iterable[float] | np.ndarray, Iterable[float] | np.ndarray]],
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: RngLike = 0,
    near_zero: float = NEAR_ZERO,
) -> tuple[float, tuple[float, float]]:
    """
    IQM across tasks of scores normalised by a reference's IQM on each task (rliable's aggregate IQM, with the
    reference measured here rather than fixed), with its percentile bootstrap CI: each resample draws every task's
    runs from that task alone (stratified, as rliable's) and every task's reference runs too, so that the interval
    carries the reference's uncertainty as well as the runs'.

    :param tasks: per task, ``(reference values, values)`` (e.g. uniform's final returns and a variant's, one per
        seed); each reference's IQM must be at least ``near_zero``
    :param n_resamples: number of bootstrap resamples
    :param confidence: coverage of the interval, in (0, 1)
    :param rng: seed or generator (deterministic given a seed)
    :param near_zero: the smallest reference IQM taken (> 0); a resampled one below it is raised to it
    :return: ``(IQM of the normalised values of all tasks, (low, high))``
    :raises ValueError: no task, ``near_zero`` not above 0, an empty or non-finite sample, or a task whose reference
        IQM is below ``near_zero`` (named by its position in ``tasks``)
    """
    _check_confidence(confidence)
    if not near_zero > 0:
        raise ValueError(f"near_zero must be > 0, got {near_zero}")
    if not tasks:
        raise ValueError("tasks must hold at least one (reference values, values) pair, got none")
    pairs = [(_finite_1d(reference, "reference values"), _finite_1d(values)) for reference, values in tasks]
    references = [iqm(reference) for reference, _ in pairs]
    for position, reference_iqm in enumerate(references):
        if reference_iqm < near_zero:
            raise ValueError(
                f"task {position}'s reference IQM must be >= near_zero={near_zero:g}, got {reference_iqm:g}"
            )
    point = iqm(np.concatenate([values / scale for (_, values), scale in zip(pairs, references, strict=True)]))
    generator = np.random.default_rng(rng)
    parts = []
    for reference, values in pairs:
        scales = np.maximum(_iqm_rows(_resamples(reference, n_resamples, generator)), near_zero)
        parts.append(_resamples(values, n_resamples, generator) / scales[:, np.newaxis])
    return point, _percentile_interval(_iqm_rows(np.concatenate(parts, axis=1)), confidence)
