"""Synthetic cointegrated pair whose spread switches between hidden regimes (pure numpy).

Time is in trading days and prices are in logs. A hidden 3-state Markov chain selects the regime that governs
each daily move:

- ``NORMAL``: the spread is an Ornstein-Uhlenbeck (OU) process with a half-life drawn once per path from
  ``half_life_normal_range``; calm spread and leg-B volatility.
- ``STRESS`` (volatility spike): slower mean reversion, higher spread and leg-B volatility.
- ``BREAK`` (cointegration lost): the spread is a random walk with a drift of ``±U(break_drift_range)`` per day and the
  hedge ratio is multiplied by ``1 ± U(break_hedge_jump_range)``, both drawn at each break onset. When the break
  ends the hedge ratio returns to its base value and the OU mean re-anchors at the spread's current level.

Leg B is a driftless random walk; leg A moves as ``hedge_ratio * (leg-B move) + (spread move)``, i.e.
``log A = const + hedge_ratio * log B + spread`` while the hedge ratio is unchanged.

Nothing here knows about trading or Gymnasium: :func:`simulate_path` turns a :class:`RegimeParams` and a
``np.random.Generator`` into a :class:`PairPath`, deterministically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

NORMAL, STRESS, BREAK = 0, 1, 2
REGIME_NAMES: tuple[str, str, str] = ("normal", "stress", "break")
N_REGIMES = len(REGIME_NAMES)

DEFAULT_TRANSITION_MATRIX: tuple[tuple[float, float, float], ...] = (
    (0.990, 0.008, 0.002),
    (0.040, 0.950, 0.010),
    (0.030, 0.003, 0.967),
)


def _check_range(name: str, value: tuple[float, float], low: float, high: float = math.inf) -> tuple[float, float]:
    """Return ``value`` as a float pair after checking ``low <= value[0] <= value[1] < high``."""
    pair = tuple(float(v) for v in value)
    if len(pair) != 2 or not (low <= pair[0] <= pair[1] < high):
        raise ValueError(f"{name} must be a pair (lo, hi) with {low} <= lo <= hi < {high}, got {value!r}")
    return pair  # type: ignore[return-value]


def _check_per_regime(name: str, value: tuple[float, ...]) -> tuple[float, float, float]:
    """Return ``value`` as a triple of finite non-negative floats (one per regime)."""
    triple = tuple(float(v) for v in value)
    if len(triple) != N_REGIMES or not all(math.isfinite(v) and v >= 0.0 for v in triple):
        raise ValueError(
            f"{name} must be {N_REGIMES} finite non-negative floats (normal, stress, break), got {value!r}"
        )
    return triple  # type: ignore[return-value]


def stationary_distribution(transition_matrix: np.ndarray) -> np.ndarray:
    """Return the stationary distribution ``pi`` of a row-stochastic matrix (``pi @ P = pi``, ``sum(pi) = 1``).

    :param transition_matrix: (n, n) row-stochastic matrix.
    :return: (n,) probabilities; for a reducible chain, the least-squares solution.
    """
    p = np.asarray(transition_matrix, dtype=np.float64)
    n = p.shape[0]
    system = np.vstack([p.T - np.eye(n), np.ones((1, n))])
    target = np.zeros(n + 1)
    target[-1] = 1.0
    pi = np.linalg.lstsq(system, target, rcond=None)[0]
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def ou_coefficient(half_life: float) -> float:
    """Return the daily AR(1) coefficient ``phi = 0.5 ** (1 / half_life)`` of an OU process with that half-life."""
    return 0.5 ** (1.0 / half_life)


@dataclass(frozen=True)
class RegimeParams:
    """Parameters of the regime-switching pair model (all volatilities and drifts are per day, in log units).

    :param half_life_normal_range: the normal-regime half-life (days) is drawn ``U(lo, hi)`` once per path.
    :param half_life_stress: half-life (days) of the spread in the stress regime.
    :param spread_vol: daily volatility of the spread innovations in (normal, stress, break).
    :param leg_b_vol: daily volatility of leg B's log returns in (normal, stress, break).
    :param break_drift_range: the spread drift of a break is ``±U(lo, hi)`` per day, sign and size drawn at onset.
    :param break_hedge_jump_range: during a break the hedge ratio is ``hedge_ratio * (1 ± U(lo, hi))``.
    :param hedge_ratio: base hedge ratio of leg A on leg B (in log returns).
    :param initial_price_a: price of leg A on the first day.
    :param initial_price_b: price of leg B on the first day.
    :param transition_matrix: 3x3 row-stochastic matrix of daily regime transitions (rows: from, columns: to).
    :param initial_regime: regime of the first day; ``None`` draws it from the chain's stationary distribution.
    """

    half_life_normal_range: tuple[float, float] = (5.0, 30.0)
    half_life_stress: float = 20.0
    spread_vol: tuple[float, float, float] = (0.010, 0.025, 0.015)
    leg_b_vol: tuple[float, float, float] = (0.015, 0.030, 0.020)
    break_drift_range: tuple[float, float] = (0.002, 0.005)
    break_hedge_jump_range: tuple[float, float] = (0.1, 0.3)
    hedge_ratio: float = 1.0
    initial_price_a: float = 100.0
    initial_price_b: float = 100.0
    transition_matrix: tuple[tuple[float, ...], ...] = DEFAULT_TRANSITION_MATRIX
    initial_regime: int | None = None
    # Derived arrays, computed once in __post_init__ so that simulation does no linear algebra.
    _transition: np.ndarray = field(init=False, repr=False, compare=False)
    _initial_cdf: np.ndarray = field(init=False, repr=False, compare=False)
    _jump_cdfs: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "half_life_normal_range", _check_range("half_life_normal_range", self.half_life_normal_range, 1e-3))
        if not (math.isfinite(self.half_life_stress) and self.half_life_stress > 0):
            raise ValueError(f"half_life_stress must be a positive number of days, got {self.half_life_stress!r}")
        set_(self, "spread_vol", _check_per_regime("spread_vol", self.spread_vol))
        set_(self, "leg_b_vol", _check_per_regime("leg_b_vol", self.leg_b_vol))
        set_(self, "break_drift_range", _check_range("break_drift_range", self.break_drift_range, 0.0))
        set_(
            self,
            "break_hedge_jump_range",
            _check_range("break_hedge_jump_range", self.break_hedge_jump_range, 0.0, 1.0),
        )
        if not math.isfinite(self.hedge_ratio):
            raise ValueError(f"hedge_ratio must be finite, got {self.hedge_ratio!r}")
        for name in ("initial_price_a", "initial_price_b"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite price, got {value!r}")
        matrix = np.asarray(self.transition_matrix, dtype=np.float64)
        if (
            matrix.shape != (N_REGIMES, N_REGIMES)
            or not np.isfinite(matrix).all()
            or (matrix < 0).any()
            or not np.allclose(matrix.sum(axis=1), 1.0, atol=1e-9)
        ):
            raise ValueError(
                f"transition_matrix must be a {N_REGIMES}x{N_REGIMES} non-negative matrix whose rows sum to 1, "
                f"got {self.transition_matrix!r}"
            )
        if self.initial_regime is not None and self.initial_regime not in range(N_REGIMES):
            raise ValueError(f"initial_regime must be None or one of 0, 1, 2, got {self.initial_regime!r}")
        matrix = matrix / matrix.sum(axis=1, keepdims=True)
        set_(self, "transition_matrix", tuple(tuple(float(v) for v in row) for row in matrix))
        set_(self, "_transition", matrix)
        if self.initial_regime is None:
            initial = stationary_distribution(matrix)
        else:
            initial = np.eye(N_REGIMES)[self.initial_regime]
        set_(self, "_initial_cdf", np.cumsum(initial))
        off_diagonal = matrix * (1.0 - np.eye(N_REGIMES))
        leave = off_diagonal.sum(axis=1, keepdims=True)
        set_(self, "_jump_cdfs", np.cumsum(np.divide(off_diagonal, leave, where=leave > 0, out=off_diagonal), axis=1))

    @property
    def stationary(self) -> np.ndarray:
        """Stationary probabilities of (normal, stress, break)."""
        return stationary_distribution(self._transition)

    @property
    def expected_durations(self) -> np.ndarray:
        """Expected length in days of a spell in each regime, ``1 / (1 - P[i, i])`` (``inf`` if absorbing)."""
        with np.errstate(divide="ignore"):
            return 1.0 / (1.0 - np.diag(self._transition))


@dataclass(frozen=True)
class PairPath:
    """A simulated path of ``n_steps + 1`` daily points (index 0 is the starting day).

    ``regime[t]`` is the regime that governed the move from day ``t - 1`` to day ``t`` (``regime[0]`` is the
    starting regime), and ``hedge_ratio[t]`` the true hedge ratio of that move.
    """

    log_a: np.ndarray
    log_b: np.ndarray
    spread: np.ndarray
    regime: np.ndarray
    hedge_ratio: np.ndarray
    half_life_normal: float

    @property
    def prices(self) -> np.ndarray:
        """(n_steps + 1, 2) array of prices (leg A, leg B)."""
        return np.exp(np.column_stack([self.log_a, self.log_b]))


def _draw_index(cdf: np.ndarray, u: float) -> int:
    """Return the index of the category that uniform draw ``u`` falls in, for cumulative probabilities ``cdf``."""
    return min(int(np.searchsorted(cdf, u, side="right")), len(cdf) - 1)


def simulate_regime_spells(
    n_points: int, rng: np.random.Generator, params: RegimeParams
) -> tuple[np.ndarray, np.ndarray]:
    """Simulate the hidden Markov chain as spells: the regime of each spell and its length in days.

    Holding times are geometric with success probability ``1 - P[i, i]`` and the next regime is drawn from the
    off-diagonal row, which is equivalent in law to stepping the chain day by day but draws ~2 numbers per spell.

    :param n_points: total number of days to cover.
    :param rng: random generator (the only source of randomness).
    :param params: model parameters.
    :return: ``(regimes, lengths)``, int arrays with ``lengths.sum() == n_points`` and no two consecutive spells in
        the same regime.
    """
    if n_points < 1:
        raise ValueError(f"n_points must be >= 1, got {n_points!r}")
    stay = np.diag(params._transition).tolist()
    regimes: list[int] = []
    lengths: list[int] = []
    regime = _draw_index(params._initial_cdf, rng.random())
    remaining = n_points
    while remaining > 0:
        length = remaining if stay[regime] >= 1.0 else min(int(rng.geometric(1.0 - stay[regime])), remaining)
        regimes.append(regime)
        lengths.append(length)
        remaining -= length
        if remaining > 0:
            regime = _draw_index(params._jump_cdfs[regime], rng.random())
    return np.asarray(regimes, dtype=np.int64), np.asarray(lengths, dtype=np.int64)


def simulate_regimes(n_points: int, rng: np.random.Generator, params: RegimeParams | None = None) -> np.ndarray:
    """Return the daily regime sequence (int8 array of length ``n_points``) of the hidden Markov chain.

    :param n_points: number of days.
    :param rng: random generator.
    :param params: model parameters (defaults if ``None``).
    """
    regimes, lengths = simulate_regime_spells(n_points, rng, params or RegimeParams())
    return np.repeat(regimes, lengths).astype(np.int8)


def _ou_and_break_spread(
    regime: list[int], shock: list[float], drift: list[float], phi: tuple[float, float, float], start: float
) -> list[float]:
    """Return the spread path: OU toward an anchor outside breaks, a drifting random walk inside them.

    The anchor starts at 0 and re-anchors at the current spread when a break ends.
    """
    spread = [start]
    level, anchor, previous = start, 0.0, regime[0]
    for t in range(1, len(regime)):
        current = regime[t]
        if current == BREAK:
            level = level + drift[t] + shock[t]
        else:
            if previous == BREAK:
                anchor = level
            level = anchor + phi[current] * (level - anchor) + shock[t]
        spread.append(level)
        previous = current
    return spread


def simulate_path(n_steps: int, rng: np.random.Generator, params: RegimeParams | None = None) -> PairPath:
    """Simulate ``n_steps`` daily moves (``n_steps + 1`` points) of the regime-switching pair.

    The same generator state gives the same path bit for bit; ``rng`` is the only source of randomness.

    :param n_steps: number of daily moves (>= 1).
    :param rng: random generator, e.g. a Gymnasium env's ``np_random``.
    :param params: model parameters (defaults if ``None``).
    :return: the simulated :class:`PairPath`.
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}")
    params = params or RegimeParams()
    n_points = int(n_steps) + 1
    spell_regimes, spell_lengths = simulate_regime_spells(n_points, rng, params)
    regime = np.repeat(spell_regimes, spell_lengths)

    is_break = spell_regimes == BREAK
    n_breaks = int(is_break.sum())
    drift_signs = np.where(rng.random(n_breaks) < 0.5, -1.0, 1.0)
    drifts = drift_signs * rng.uniform(*params.break_drift_range, size=n_breaks)
    jump_signs = np.where(rng.random(n_breaks) < 0.5, -1.0, 1.0)
    jumps = 1.0 + jump_signs * rng.uniform(*params.break_hedge_jump_range, size=n_breaks)
    spell_drift = np.zeros(len(spell_regimes))
    spell_drift[is_break] = drifts
    spell_hedge = np.full(len(spell_regimes), params.hedge_ratio)
    spell_hedge[is_break] *= jumps
    drift = np.repeat(spell_drift, spell_lengths)
    hedge_ratio = np.repeat(spell_hedge, spell_lengths)

    half_life_normal = float(rng.uniform(*params.half_life_normal_range))
    phi = (ou_coefficient(half_life_normal), ou_coefficient(params.half_life_stress), 1.0)
    spread_noise = rng.standard_normal(n_points)
    leg_b_noise = rng.standard_normal(n_points)

    # Start from the normal regime's stationary distribution around the anchor 0.
    start = params.spread_vol[NORMAL] / math.sqrt(1.0 - phi[NORMAL] ** 2) * float(spread_noise[0])
    shock = np.asarray(params.spread_vol)[regime] * spread_noise
    spread = np.asarray(_ou_and_break_spread(regime.tolist(), shock.tolist(), drift.tolist(), phi, start))

    leg_b_return = np.asarray(params.leg_b_vol)[regime] * leg_b_noise
    leg_b_return[0] = 0.0
    leg_a_return = hedge_ratio * leg_b_return
    leg_a_return[1:] += np.diff(spread)
    log_a = math.log(params.initial_price_a) + np.cumsum(leg_a_return)
    log_b = math.log(params.initial_price_b) + np.cumsum(leg_b_return)
    return PairPath(
        log_a=log_a,
        log_b=log_b,
        spread=spread,
        regime=regime.astype(np.int8),
        hedge_ratio=hedge_ratio,
        half_life_normal=half_life_normal,
    )
