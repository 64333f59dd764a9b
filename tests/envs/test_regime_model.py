"""Tests of the synthetic regime-switching pair model (envs.regime_model)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from envs.regime_model import (
    BREAK,
    DEFAULT_TRANSITION_MATRIX,
    NORMAL,
    STRESS,
    RegimeParams,
    simulate_path,
    simulate_regimes,
    stationary_distribution,
)

LONG_RUN = 300_000


@pytest.fixture(scope="module")
def long_path():
    return simulate_path(LONG_RUN, np.random.default_rng(12345))


def run_lengths(regime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (regime of each run, length of each run) of consecutive equal values, dropping the censored last run."""
    starts = np.flatnonzero(np.diff(regime)) + 1
    bounds = np.concatenate([[0], starts, [len(regime)]])
    return regime[bounds[:-2]], np.diff(bounds)[:-1]


def test_default_chain_matches_the_issue():
    params = RegimeParams()
    np.testing.assert_allclose(params.expected_durations, [100.0, 20.0, 1 / 0.033])
    np.testing.assert_allclose(params.stationary, [0.7826, 0.1304, 0.0870], atol=1e-4)
    switch_rate = float(params.stationary @ (1 - np.diag(np.asarray(DEFAULT_TRANSITION_MATRIX))))
    assert switch_rate == pytest.approx(0.017, abs=0.001)


def test_stationary_distribution_is_invariant():
    matrix = np.asarray(DEFAULT_TRANSITION_MATRIX)
    pi = stationary_distribution(matrix)
    np.testing.assert_allclose(pi @ matrix, pi, atol=1e-12)
    assert pi.sum() == pytest.approx(1.0)


def test_regime_frequencies_close_to_stationary(long_path):
    frequencies = np.bincount(long_path.regime, minlength=3) / len(long_path.regime)
    np.testing.assert_allclose(frequencies, RegimeParams().stationary, atol=0.02)
    switches = np.mean(np.diff(long_path.regime) != 0)
    assert switches == pytest.approx(0.017, abs=0.002)


def test_regime_durations_close_to_expected(long_path):
    regimes, lengths = run_lengths(long_path.regime)
    expected = RegimeParams().expected_durations
    for regime in (NORMAL, STRESS, BREAK):
        observed = lengths[regimes == regime].mean()
        assert observed == pytest.approx(expected[regime], rel=0.12), (regime, observed)


def within_spell_ar1(paths, min_length: int = 20) -> dict[int, float]:
    """Return, per regime, the pooled AR(1) coefficient of the spread with one intercept per spell.

    Uses the pairs (s[t-1], s[t]) of spells of at least ``min_length`` days; a spell-specific intercept absorbs the
    OU anchor (which moves after each break) and a break's drift.
    """
    previous: dict[int, list[np.ndarray]] = {NORMAL: [], STRESS: [], BREAK: []}
    current: dict[int, list[np.ndarray]] = {NORMAL: [], STRESS: [], BREAK: []}
    for path in paths:
        regime, spread = path.regime, path.spread
        bounds = np.concatenate([[0], np.flatnonzero(np.diff(regime)) + 1, [len(regime)]])
        for start, stop in itertools.pairwise(bounds):
            if start == 0 or stop - start < min_length:
                continue
            x, y = spread[start - 1 : stop - 1], spread[start:stop]
            previous[regime[start]].append(x - x.mean())
            current[regime[start]].append(y - y.mean())
    return {
        code: float(
            np.dot(np.concatenate(previous[code]), np.concatenate(current[code]))
            / np.sum(np.concatenate(previous[code]) ** 2)
        )
        for code in previous
    }


def test_break_loses_mean_reversion():
    rng = np.random.default_rng(2024)
    ar = within_spell_ar1(simulate_path(312, rng) for _ in range(600))
    assert ar[BREAK] == pytest.approx(1.0, abs=0.02)
    assert ar[NORMAL] < 0.95
    assert ar[STRESS] < 0.95
    assert ar[BREAK] - max(ar[NORMAL], ar[STRESS]) > 0.04


def test_break_drift_and_hedge_jump_are_drawn_per_spell(long_path):
    regime, hedge, spread = long_path.regime, long_path.hedge_ratio, long_path.spread
    np.testing.assert_array_equal(hedge[regime != BREAK], 1.0)
    jump = np.abs(hedge[regime == BREAK] - 1.0)
    assert jump.min() >= 0.1 and jump.max() <= 0.3
    assert (hedge[regime == BREAK] > 1).mean() == pytest.approx(0.5, abs=0.1)
    # Mean daily spread move of each (long enough) break spell lies in ±[0.2%, 0.5%] up to noise.
    regimes, lengths = run_lengths(regime)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    drifts = [
        np.diff(spread[start - 1 : start + length]).mean()
        for code, start, length in zip(regimes, starts, lengths, strict=True)
        if code == BREAK and length >= 60 and start > 0
    ]
    magnitudes = np.abs(drifts)
    assert len(magnitudes) > 20
    assert 0.002 - 0.004 < magnitudes.mean() < 0.005 + 0.004
    assert np.mean((magnitudes > 0.0005) & (magnitudes < 0.008)) > 0.9


def test_leg_a_is_hedged_leg_b_plus_spread():
    path = simulate_path(2_000, np.random.default_rng(3))
    np.testing.assert_allclose(
        np.diff(path.log_a), path.hedge_ratio[1:] * np.diff(path.log_b) + np.diff(path.spread), atol=1e-12
    )
    assert path.log_a[0] == pytest.approx(np.log(100.0))
    assert path.prices.shape == (2_001, 2)


def test_spread_reanchors_after_a_break():
    # Without noise the spread is flat at 0 in calm regimes and drifts linearly in breaks.
    params = RegimeParams(spread_vol=(0.0, 0.0, 0.0), initial_regime=NORMAL)
    path = simulate_path(20_000, np.random.default_rng(7), params)
    regime, spread = path.regime, path.spread
    assert np.all(spread[: np.argmax(regime == BREAK)] == 0.0)
    steps = np.diff(spread)
    in_break = regime[1:] == BREAK
    assert np.all(np.abs(steps[in_break]) >= 0.002) and np.all(np.abs(steps[in_break]) <= 0.005)
    # After a break the spread stays where the break left it (anchor = current level), it does not decay to 0.
    np.testing.assert_array_equal(steps[~in_break], 0.0)
    assert np.abs(spread).max() > 0.05


def test_same_generator_state_same_path_bit_for_bit():
    first = simulate_path(500, np.random.default_rng(42))
    second = simulate_path(500, np.random.default_rng(42))
    for name in ("log_a", "log_b", "spread", "regime", "hedge_ratio"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    other = simulate_path(500, np.random.default_rng(43))
    assert not np.array_equal(first.log_a, other.log_a)


def test_half_life_is_drawn_per_path_in_range():
    draws = [simulate_path(10, np.random.default_rng(seed)).half_life_normal for seed in range(200)]
    assert 5.0 <= min(draws) < 6.5 and 28.5 < max(draws) <= 30.0


def test_identity_chain_never_switches():
    params = RegimeParams(transition_matrix=np.eye(3).tolist(), initial_regime=STRESS)
    np.testing.assert_array_equal(simulate_regimes(1_000, np.random.default_rng(0), params), STRESS)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"half_life_normal_range": (30.0, 5.0)}, "half_life_normal_range"),
        ({"half_life_normal_range": (0.0, 5.0)}, "half_life_normal_range"),
        ({"half_life_stress": -1.0}, "half_life_stress"),
        ({"half_life_stress": float("nan")}, "half_life_stress"),
        ({"spread_vol": (0.01, 0.02)}, "spread_vol"),
        ({"leg_b_vol": (0.01, -0.02, 0.02)}, "leg_b_vol"),
        ({"break_drift_range": (-0.1, 0.1)}, "break_drift_range"),
        ({"break_hedge_jump_range": (0.1, 1.0)}, "break_hedge_jump_range"),
        ({"hedge_ratio": float("inf")}, "hedge_ratio"),
        ({"initial_price_a": 0.0}, "initial_price_a"),
        ({"initial_price_b": -5.0}, "initial_price_b"),
        ({"transition_matrix": ((0.5, 0.5, 0.1), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))}, "transition_matrix"),
        ({"transition_matrix": ((1.5, -0.5, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))}, "transition_matrix"),
        ({"transition_matrix": ((1.0, 0.0), (0.0, 1.0))}, "transition_matrix"),
        ({"initial_regime": 3}, "initial_regime"),
    ],
)
def test_invalid_params_raise_naming_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        RegimeParams(**kwargs)


@pytest.mark.parametrize("n_steps", [0, -3, 2.5, True])
def test_invalid_n_steps_raise(n_steps):
    with pytest.raises(ValueError, match="n_steps"):
        simulate_path(n_steps, np.random.default_rng(0))
