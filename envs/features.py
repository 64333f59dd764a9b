"""Observation features of a pair, computed for a whole episode at once from trailing windows (no look-ahead).

Every feature at day ``t`` uses prices of days ``<= t`` only, and one hedge ratio ``beta_t`` for the whole look-back
window (the spread a trader at day ``t`` would plot is ``log A - beta_t * log B``).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

# Market features, in observation order; the env appends the position (and optionally the regime).
MARKET_FEATURE_NAMES: tuple[str, ...] = ("zscore", "zscore_change", "vol_ratio", "leg_correlation", "spread_ar1")
MARKET_FEATURE_LOW = np.array([-10.0, -10.0, 0.0, -1.0, -1.0], dtype=np.float32)
MARKET_FEATURE_HIGH = np.array([10.0, 10.0, 10.0, 1.0, 2.0], dtype=np.float32)
# Bound on the estimated hedge ratio, so that a degenerate window cannot create a huge leg-B position.
MAX_ABS_HEDGE_RATIO = 5.0


def required_history(
    hedge_window: int, zscore_window: int, zscore_change_lag: int, vol_window: int, corr_window: int
) -> int:
    """Return how many days before ``t`` the features at day ``t`` look back (the minimum warm-up).

    :param hedge_window: returns used for the rolling hedge ratio, the long volatility and the AR(1) estimate.
    :param zscore_window: days in the z-score's mean and standard deviation.
    :param zscore_change_lag: days between the z-scores differenced by ``zscore_change``.
    :param vol_window: returns in the short spread volatility (at most ``hedge_window``).
    :param corr_window: returns in the legs' rolling correlation.
    """
    return max(hedge_window, vol_window, zscore_window + zscore_change_lag - 1, corr_window)


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray, default: float, min_denominator: float) -> np.ndarray:
    """Return ``numerator / denominator``, or ``default`` where ``|denominator| <= min_denominator``."""
    out = np.full(np.shape(numerator), default, dtype=np.float64)
    return np.divide(numerator, denominator, out=out, where=np.abs(denominator) > min_denominator)


def _centered(x: np.ndarray) -> np.ndarray:
    """Return each row of ``x`` minus its mean."""
    return x - x.mean(axis=1, keepdims=True)


def row_regression_slope(y: np.ndarray, x: np.ndarray, default: float) -> np.ndarray:
    """Return, per row, the OLS slope (with intercept) of ``y`` on ``x``, or ``default`` where ``x`` is constant."""
    xc = _centered(x)
    return _safe_divide((xc * _centered(y)).sum(axis=1), (xc * xc).sum(axis=1), default, 1e-16)


def row_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Return, per row, the Pearson correlation of ``x`` and ``y`` (0 where either is constant)."""
    xc, yc = _centered(x), _centered(y)
    scale = np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    return _safe_divide((xc * yc).sum(axis=1), scale, 0.0, 1e-16)


def zscore_of_last(window: np.ndarray) -> np.ndarray:
    """Return, per row, the last value's z-score within its row (0 where the row is constant)."""
    return _safe_divide(window[:, -1] - window.mean(axis=1), window.std(axis=1), 0.0, 1e-12)


def pair_features(
    log_a: np.ndarray,
    log_b: np.ndarray,
    first: int,
    *,
    hedge_ratio: float | None = None,
    hedge_window: int = 60,
    zscore_window: int = 30,
    zscore_change_lag: int = 5,
    vol_window: int = 10,
    corr_window: int = 20,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the market features and hedge ratios of days ``first .. len(log_a) - 1``.

    Features (columns, clipped to ``MARKET_FEATURE_LOW/HIGH``):

    - ``zscore``: z-score of today's spread within the last ``zscore_window`` days;
    - ``zscore_change``: ``zscore`` minus the z-score ``zscore_change_lag`` days ago (same hedge ratio);
    - ``vol_ratio``: std of daily spread changes over ``vol_window`` days / over ``hedge_window`` days;
    - ``leg_correlation``: correlation of the legs' daily log returns over ``corr_window`` days;
    - ``spread_ar1``: AR(1) coefficient of the spread over ``hedge_window`` days (near 1: no mean reversion).

    :param log_a: log prices of leg A, shape (n,).
    :param log_b: log prices of leg B, shape (n,).
    :param first: first day to compute; must be >= :func:`required_history` of the windows.
    :param hedge_ratio: fixed hedge ratio; ``None`` estimates it each day as the OLS slope of A's daily log returns
        on B's over ``hedge_window`` days, clipped to ``±MAX_ABS_HEDGE_RATIO``.
    :return: ``(features, hedge_ratios)`` of shapes ``(n - first, 5)`` (float64) and ``(n - first,)``.
    """
    lookback = required_history(hedge_window, zscore_window, zscore_change_lag, vol_window, corr_window)
    if first < lookback:
        raise ValueError(f"first must be >= the feature look-back {lookback}, got {first}")
    # Log prices relative to the first day keep the window statistics well conditioned.
    windows_a = sliding_window_view(log_a - log_a[0], lookback + 1)[first - lookback :]
    windows_b = sliding_window_view(log_b - log_b[0], lookback + 1)[first - lookback :]
    returns_a, returns_b = np.diff(windows_a, axis=1), np.diff(windows_b, axis=1)

    if hedge_ratio is None:
        beta = row_regression_slope(returns_a[:, -hedge_window:], returns_b[:, -hedge_window:], default=0.0)
        beta = np.clip(beta, -MAX_ABS_HEDGE_RATIO, MAX_ABS_HEDGE_RATIO)
    else:
        beta = np.full(len(windows_a), float(hedge_ratio))

    spread = windows_a - beta[:, None] * windows_b
    zscore = zscore_of_last(spread[:, -zscore_window:])
    lagged = spread[:, -zscore_window - zscore_change_lag : -zscore_change_lag]
    spread_change = np.diff(spread, axis=1)
    features = np.column_stack(
        [
            zscore,
            zscore - zscore_of_last(lagged),
            _safe_divide(
                spread_change[:, -vol_window:].std(axis=1), spread_change[:, -hedge_window:].std(axis=1), 1.0, 1e-12
            ),
            row_correlation(returns_a[:, -corr_window:], returns_b[:, -corr_window:]),
            row_regression_slope(spread[:, -hedge_window:], spread[:, -hedge_window - 1 : -1], default=1.0),
        ]
    )
    np.clip(features, MARKET_FEATURE_LOW, MARKET_FEATURE_HIGH, out=features)
    return features, beta
