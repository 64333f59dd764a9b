"""Tests of the observation features (envs.features): no look-ahead, hand-checked values, degenerate data."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from envs.features import (
    MARKET_FEATURE_HIGH,
    MARKET_FEATURE_LOW,
    MAX_ABS_HEDGE_RATIO,
    pair_features,
    required_history,
)
from envs.regime_model import BREAK, NORMAL, simulate_path

OBS_AR1 = 4
WINDOWS = {"hedge_window": 60, "zscore_window": 30, "zscore_change_lag": 5, "vol_window": 10, "corr_window": 20}


@pytest.fixture(scope="module")
def path():
    return simulate_path(400, np.random.default_rng(5))


def test_required_history_of_default_windows():
    assert required_history(**WINDOWS) == 60
    assert required_history(hedge_window=10, zscore_window=30, zscore_change_lag=5, vol_window=5, corr_window=8) == 34


def test_features_do_not_look_ahead(path):
    features, beta = pair_features(path.log_a, path.log_b, 60, **WINDOWS)
    for day in (60, 61, 150, 399):
        # Scramble every price after `day`: the features of `day` must not change.
        log_a, log_b = path.log_a.copy(), path.log_b.copy()
        log_a[day + 1 :] += np.random.default_rng(day).normal(0, 0.1, len(log_a) - day - 1)
        log_b[day + 1 :] *= 1.1
        scrambled, scrambled_beta = pair_features(log_a, log_b, 60, **WINDOWS)
        np.testing.assert_allclose(scrambled[day - 60], features[day - 60], rtol=1e-9, atol=1e-12)
        assert scrambled_beta[day - 60] == pytest.approx(beta[day - 60], rel=1e-12)


def test_features_match_a_direct_computation(path):
    day = 200
    features, beta = pair_features(path.log_a, path.log_b, 60, **WINDOWS)
    ra, rb = np.diff(path.log_a[day - 60 : day + 1]), np.diff(path.log_b[day - 60 : day + 1])
    b = np.polyfit(rb, ra, 1)[0]
    assert beta[day - 60] == pytest.approx(b, rel=1e-9)
    spread = path.log_a[: day + 1] - b * path.log_b[: day + 1]
    last30 = spread[-30:]
    z = (last30[-1] - last30.mean()) / last30.std()
    lag30 = spread[-35:-5]
    z_lag = (lag30[-1] - lag30.mean()) / lag30.std()
    moves = np.diff(spread[-61:])
    expected = [
        z,
        z - z_lag,
        moves[-10:].std() / moves.std(),
        np.corrcoef(ra[-20:], rb[-20:])[0, 1],
        np.polyfit(spread[-61:-1], spread[-60:], 1)[0],
    ]
    np.testing.assert_allclose(features[day - 60], expected, rtol=1e-8)


def test_fixed_hedge_ratio_is_used(path):
    _, beta = pair_features(path.log_a, path.log_b, 60, hedge_ratio=1.25, **WINDOWS)
    np.testing.assert_array_equal(beta, 1.25)


def test_rolling_hedge_ratio_tracks_the_true_one_in_calm_regimes():
    rng = np.random.default_rng(9)
    errors = []
    for _ in range(50):
        p = simulate_path(312, rng)
        _, beta = pair_features(p.log_a, p.log_b, 60, **WINDOWS)
        calm = np.array([np.all(p.regime[t - 59 : t + 1] == NORMAL) for t in range(60, 313)])
        errors.extend(beta[calm] - 1.0)
    assert abs(np.mean(errors)) < 0.03 and np.std(errors) < 0.15


def days_all_in(regime: np.ndarray, code: int, days: int, first: int) -> np.ndarray:
    """Mask over days ``first..`` of whether the last ``days`` days were all in regime ``code``."""
    return np.all(sliding_window_view(regime, days)[first - days + 1 :] == code, axis=1)


def test_spread_ar1_feature_is_higher_late_in_breaks():
    rng = np.random.default_rng(10)
    in_break, in_normal = [], []
    for _ in range(300):
        p = simulate_path(312, rng)
        features, _ = pair_features(p.log_a, p.log_b, 60, **WINDOWS)
        in_break.append(features[days_all_in(p.regime, BREAK, 30, 60), OBS_AR1])
        in_normal.append(features[days_all_in(p.regime, NORMAL, 60, 60), OBS_AR1])
    in_break, in_normal = np.concatenate(in_break), np.concatenate(in_normal)
    assert len(in_break) > 100
    assert in_break.mean() > in_normal.mean() + 0.02


@pytest.mark.parametrize("case", ["constant", "constant_b", "wild"])
def test_degenerate_prices_give_finite_bounded_features(case):
    rng = np.random.default_rng(0)
    n = 120
    if case == "constant":
        log_a, log_b = np.zeros(n), np.zeros(n)
    elif case == "constant_b":
        log_a, log_b = np.cumsum(rng.normal(0, 0.01, n)), np.zeros(n)
    else:
        log_a, log_b = np.cumsum(rng.normal(0, 3.0, n)), np.cumsum(rng.normal(0, 1e-9, n))
    features, beta = pair_features(log_a, log_b, 60, **WINDOWS)
    assert np.isfinite(features).all() and np.isfinite(beta).all()
    assert (features >= MARKET_FEATURE_LOW).all() and (features <= MARKET_FEATURE_HIGH).all()
    assert (np.abs(beta) <= MAX_ABS_HEDGE_RATIO).all()


def test_first_day_before_the_look_back_raises(path):
    with pytest.raises(ValueError, match="look-back 60"):
        pair_features(path.log_a, path.log_b, 59, **WINDOWS)
