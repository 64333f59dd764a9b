"""``PairsTrading-v0``: trade the spread of a cointegrated pair whose regime shifts without warning."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .features import (
    MARKET_FEATURE_HIGH,
    MARKET_FEATURE_LOW,
    MARKET_FEATURE_NAMES,
    pair_features,
    required_history,
)
from .price_data import load_prices_csv, validate_prices
from .regime_model import N_REGIMES, REGIME_NAMES, RegimeParams, simulate_path
from .rendering import render_pair_image

# Observation columns.
OBS_ZSCORE, OBS_ZSCORE_CHANGE, OBS_VOL_RATIO, OBS_CORRELATION, OBS_SPREAD_AR1 = range(len(MARKET_FEATURE_NAMES))
OBS_POSITION = len(MARKET_FEATURE_NAMES)
OBS_REGIME = OBS_POSITION + 1  # first of the 3 one-hot regime columns (only with ``observe_regime=True``)
FEATURE_NAMES: tuple[str, ...] = (*MARKET_FEATURE_NAMES, "position")
REGIME_FEATURE_NAMES: tuple[str, ...] = tuple(f"regime_{name}" for name in REGIME_NAMES)

REGIME_UNKNOWN = -1  # ``info["regime"]`` on real price data, which has no regime labels
TRADING_DAYS_PER_YEAR = 252
MIN_STEP_GROWTH = 1e-9  # equity floor factor of one step; reaching it terminates the episode (wipe-out)
SUMMARY_KEYS: tuple[str, ...] = (
    "cumulative_return",
    "sharpe",
    "max_drawdown",
    "turnover",
    *(f"return_{name}" for name in REGIME_NAMES),
    "steps",
)


def action_to_position(action: Any) -> float:
    """Return the target position encoded by an action, clipped to [-1, 1].

    :param action: array of one number (any shape of size 1) or a Python number.
    :raises ValueError: the action is not exactly one finite number (NaN and ±inf are rejected, not clipped).
    """
    if isinstance(action, np.ndarray) and action.size == 1:
        value = float(action.item())
    else:
        try:
            array = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"action must be a number or an array of one number, got {action!r}") from None
        if array.size != 1:
            raise ValueError(f"action must hold exactly one number, got shape {array.shape}")
        value = float(array.item())
    if not math.isfinite(value):
        raise ValueError(f"action must be a finite number, got {value}")
    return 1.0 if value > 1.0 else -1.0 if value < -1.0 else value


def _check_int(name: str, value: Any, minimum: int) -> int:
    """Return ``value`` if it is an integer >= ``minimum``, else raise a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_float(name: str, value: Any, low: float, high: float = math.inf, high_inclusive: bool = True) -> float:
    """Return ``value`` as a float if it is finite and in ``[low, high]`` (or ``[low, high)``), else raise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    in_range = low <= number <= high if high_inclusive else low <= number < high
    if not (math.isfinite(number) and in_range):
        bracket = "]" if high_inclusive else ")"
        raise ValueError(f"{name} must be finite and in [{low}, {high}{bracket}, got {value!r}")
    return number


def _check_price_rows(value: Any, n_rows: int, window_rows: int) -> tuple[int, int]:
    """Return ``price_rows`` as ``(start, stop)``: ``(0, n_rows)`` for ``None``, else a checked row range.

    :param value: ``None`` or a pair ``[start, stop)`` of row indices of the price history.
    :param n_rows: rows of the price history.
    :param window_rows: rows of one episode window (``warmup + episode_length + 1``), the least the range must hold.
    :raises ValueError: not a pair of integers with ``0 <= start < stop <= n_rows``, or fewer than ``window_rows``.
    """
    if value is None:
        return 0, n_rows
    pair = tuple(value) if isinstance(value, (list, tuple, np.ndarray)) else ()
    is_index = [isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in pair]
    if len(pair) != 2 or not all(is_index) or not 0 <= pair[0] < pair[1] <= n_rows:
        raise ValueError(f"price_rows must be [start, stop) with 0 <= start < stop <= {n_rows} (rows), got {value!r}")
    start, stop = int(pair[0]), int(pair[1])
    if stop - start < window_rows:
        raise ValueError(
            f"price_rows {value!r} holds {stop - start} rows, fewer than the {window_rows} of one episode window "
            "(warmup + episode_length + 1)"
        )
    return start, stop


def _check_price_columns(value: Any) -> tuple[str, str]:
    """Return ``price_columns`` as a tuple if it names two columns, else raise a ValueError naming it."""
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(isinstance(name, str) for name in value):
        raise ValueError(f"price_columns must be two column names (leg A, leg B), got {value!r}")
    return value[0], value[1]


def _as_regime_params(value: RegimeParams | dict[str, Any] | None) -> RegimeParams:
    """Return a :class:`RegimeParams` from ``None`` (defaults), a dict of its fields, or an instance."""
    if value is None:
        return RegimeParams()
    if isinstance(value, RegimeParams):
        return value
    if isinstance(value, dict):
        return RegimeParams(**value)
    raise ValueError(f"regime_params must be None, a RegimeParams or a dict of its fields, got {value!r}")


class PairsTradingEnv(gym.Env[np.ndarray, np.ndarray]):
    """
    ## Description

    Trade the spread of a cointegrated pair of assets, one decision per trading day. By default the prices are
    synthetic (`envs.regime_model`): the log spread `log A - hedge_ratio * log B` mean-reverts calmly
    (Ornstein-Uhlenbeck, half-life drawn U(5, 30) days per episode), broken by rare, hidden regime shifts:

    | Regime     | Spread                                   | Spread vol | Leg-B vol | Expected spell | Share |
    |------------|------------------------------------------|------------|-----------|----------------|-------|
    | 0 `normal` | OU, half-life U(5, 30) days              | 1.0%/day   | 1.5%/day  | 100 days       | ~78%  |
    | 1 `stress` | OU, half-life 20 days                    | 2.5%/day   | 3.0%/day  | 20 days        | ~13%  |
    | 2 `break`  | random walk, drift ±U(0.2%, 0.5%)/day,   | 1.5%/day   | 2.0%/day  | 30 days        | ~9%   |
    |            | hedge ratio × (1 ± U(0.1, 0.3))          |            |           |                |       |

    Drift and hedge jump are drawn at each break onset; when a break ends the hedge ratio returns to its base and
    the spread mean-reverts toward its level at that moment. Regimes follow a Markov chain with daily transition
    matrix `[[0.990, 0.008, 0.002], [0.040, 0.950, 0.010], [0.030, 0.003, 0.967]]`. Every number above is a
    field of `RegimeParams` (argument `regime_params`). With `prices=...` (an array) or `prices_csv=...` (a CSV file)
    the env instead replays random windows of a real (or any) price history; `price_rows=[start, stop]` confines
    every window, warm-up included, to rows `start` to `stop - 1` of it (walk-forward: train on the earlier rows,
    evaluate on the later ones: `envs.walk_forward_env_kwargs` splits by date or by row fraction).

    Each `reset` builds a fresh episode of `window_rows = warmup + episode_length + 1` days from `self.np_random`
    (same seed, same path, bit for bit) and precomputes every action-independent quantity, so `step` only indexes
    arrays. On price data, `episode_rows` is the half-open range of history rows the current episode reads (its
    start drawn uniformly among the windows that fit in `price_rows`); it is `None` on synthetic data.

    ## Action Space

    `Box(-1, 1, (1,), float32)`: the target position in the spread after today's close, as a fraction of equity.
    Position `p > 0` is long `p` of leg A and short `p * beta_t` of leg B (`p < 0` the reverse), where `beta_t`
    is the hedge ratio known at day `t` (see `hedge_ratio`). Out-of-range actions are clipped to [-1, 1];
    NaN or ±inf actions raise `ValueError` and leave the state untouched, as does an action that is not one number.

    ## Observation Space

    A `float32` array of shape `(6,)` (`(9,)` with `observe_regime=True`), computed from prices up to today's
    close only, with the spread `log A - beta_t * log B` taken at today's hedge ratio over the whole look-back:

    | Num | Observation (`FEATURE_NAMES`) | Min | Max | Meaning                                                     |
    |-----|-------------------------------|-----|-----|-------------------------------------------------------------|
    | 0   | `zscore`                      | -10 | 10  | z-score of today's spread over the last `zscore_window` days|
    | 1   | `zscore_change`               | -10 | 10  | `zscore` minus the z-score `zscore_change_lag` days ago     |
    | 2   | `vol_ratio`                   | 0   | 10  | spread-change std, last `vol_window` / `hedge_window` days  |
    | 3   | `leg_correlation`             | -1  | 1   | correlation of the legs' daily returns, last `corr_window`  |
    | 4   | `spread_ar1`                  | -1  | 2   | AR(1) coefficient of the spread, last `hedge_window` days   |
    | 5   | `position`                    | -1  | 1   | position currently held                                     |
    | 6-8 | `regime_normal/stress/break`  | 0   | 1   | one-hot regime of today's move (`observe_regime=True` only) |

    Features are clipped to these bounds. The regime is hidden unless `observe_regime=True` (an oracle ablation;
    synthetic data only). Column indices are exported as `OBS_ZSCORE`, ..., `OBS_POSITION`, `OBS_REGIME`.

    ## Rewards

    Decide at the close of day `t`, earn the move from `t` to `t + 1`. With simple returns `gA`, `gB` of the legs
    over that day, target position `p`, previous position `q` and `c = cost_bps / 10_000`:

    `reward = log(1 + p * (gA - beta_t * gB) - c * |p - q| * (1 + |beta_t|))`

    i.e. the change in log equity after paying `cost_bps` per leg per unit of notional traded (the hedge leg is
    rebalanced to `beta_t` at no cost). Rewards are raw log-equity units (no scaling).

    ## Starting State

    Equity 1, position 0, at day `warmup` of a fresh path (the first `warmup` days only feed the features).

    ## Episode End

    1. Termination: equity falls below `stop_equity` (stop-out), or a step would make equity non-positive (its
       growth factor is floored at `MIN_STEP_GROWTH`, so equity always stays positive, and the episode ends).
    2. Truncation: `episode_length` steps have been taken.

    `info` of every step holds `regime` (int regime that governed the step's move: 0 normal, 1 stress, 2 break;
    `REGIME_UNKNOWN` = -1 on real data), `position` (after the step), `equity`, and `cost` (transaction cost paid,
    as a fraction of the equity before the step). The last step of an episode adds `info["episode_summary"]`, a
    dict of floats with keys `SUMMARY_KEYS`: `cumulative_return` (final equity - 1), `sharpe` (annualised,
    `sqrt(252) * mean / std` of the step rewards), `max_drawdown` (largest fall from a running equity peak, as a
    fraction of the peak), `turnover` (sum of `|p - q|`), `return_normal`, `return_stress`, `return_break` (sum of
    the step rewards earned under each regime) and `steps`. `reset` returns the same keys as a step's `info`.

    ## Arguments

    ```python
    >>> import gymnasium as gym
    >>> import envs
    >>> env = gym.make("envs:PairsTrading-v0", observe_regime=True)
    >>> obs, info = env.reset(seed=0)
    >>> env = gym.make("envs:PairsTrading-v0", prices=envs.load_prices_csv())  # replay the bundled CSV
    >>> env = gym.make("envs:PairsTrading-v0", prices_csv=str(envs.SAMPLE_CSV_PATH), price_rows=[0, 1000])

    ```

    | Parameter           | Type                          | Default | Description                                    |
    |---------------------|-------------------------------|---------|------------------------------------------------|
    | `prices`            | (T, 2) array / DataFrame      | `None`  | prices of legs A, B to replay; None: synthetic |
    | `prices_csv`        | str, path or None             | `None`  | CSV to replay instead (`envs.load_prices_csv`) |
    | `price_columns`     | two str or None               | `None`  | CSV columns of legs A, B; None: SAMPLE_COLUMNS |
    | `price_rows`        | `[start, stop]` or None       | `None`  | rows the episodes may read; None: all rows     |
    | `episode_length`    | int                           | `252`   | trading steps per episode                      |
    | `warmup`            | int                           | `60`    | days before the first decision (>= look-back)  |
    | `cost_bps`          | float                         | `5.0`   | cost per leg per unit of notional traded, bps  |
    | `stop_equity`       | float in [0, 1)               | `0.5`   | terminate when equity < this (0 disables)      |
    | `hedge_ratio`       | float or None                 | `None`  | fixed hedge ratio; None: rolling OLS of returns|
    | `observe_regime`    | bool                          | `False` | append the one-hot regime (synthetic only)     |
    | `regime_params`     | `RegimeParams`, dict or None  | `None`  | synthetic model parameters (defaults above)    |
    | `hedge_window`      | int                           | `60`    | days for the hedge ratio, long vol and AR(1)   |
    | `zscore_window`     | int                           | `30`    | days for the z-score                           |
    | `zscore_change_lag` | int                           | `5`     | lag of `zscore_change`                         |
    | `vol_window`        | int                           | `10`    | days for the short spread volatility           |
    | `corr_window`       | int                           | `20`    | days for the legs' correlation                 |
    | `render_mode`       | `"rgb_array"`, `"ansi"`, None | `None`  | image of prices/spread/position, or text line  |

    Every argument but `prices` and `regime_params` as a `RegimeParams` is JSON-friendly, so a price-data env can be
    described by plain kwargs (`prices_csv`, `price_columns`, `price_rows`), e.g. in a stored configuration.
    Invalid arguments and invalid price data (wrong shape, NaN/inf, non-positive prices, fewer than `window_rows`
    rows, in the whole history or in `price_rows`) raise `ValueError` naming the argument and the value.

    ## Version History

    * v0: Initial version.
    """

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 30}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(
        self,
        prices: Any = None,
        *,
        prices_csv: str | Path | None = None,
        price_columns: list[str] | tuple[str, str] | None = None,
        price_rows: list[int] | tuple[int, int] | None = None,
        episode_length: int = 252,
        warmup: int = 60,
        cost_bps: float = 5.0,
        stop_equity: float = 0.5,
        hedge_ratio: float | None = None,
        observe_regime: bool = False,
        regime_params: RegimeParams | dict[str, Any] | None = None,
        hedge_window: int = 60,
        zscore_window: int = 30,
        zscore_change_lag: int = 5,
        vol_window: int = 10,
        corr_window: int = 20,
        render_mode: str | None = None,
    ) -> None:
        self.episode_length = _check_int("episode_length", episode_length, 1)
        self.feature_windows = {
            "hedge_window": _check_int("hedge_window", hedge_window, 2),
            "zscore_window": _check_int("zscore_window", zscore_window, 2),
            "zscore_change_lag": _check_int("zscore_change_lag", zscore_change_lag, 1),
            "vol_window": _check_int("vol_window", vol_window, 2),
            "corr_window": _check_int("corr_window", corr_window, 2),
        }
        lookback = required_history(**self.feature_windows)
        self.warmup = _check_int("warmup", warmup, lookback)
        self.cost_bps = _check_float("cost_bps", cost_bps, 0.0)
        self.stop_equity = _check_float("stop_equity", stop_equity, 0.0, 1.0, high_inclusive=False)
        self.hedge_ratio = None if hedge_ratio is None else _check_float("hedge_ratio", hedge_ratio, -math.inf)
        if not isinstance(observe_regime, (bool, np.bool_)):
            raise ValueError(f"observe_regime must be a bool, got {observe_regime!r}")
        self.observe_regime = bool(observe_regime)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode

        self.window_rows = self.warmup + self.episode_length + 1
        if prices is not None and prices_csv is not None:
            raise ValueError(f"pass prices or prices_csv, not both; got prices_csv={prices_csv!r}")
        if price_columns is not None and prices_csv is None:
            raise ValueError(f"price_columns only applies to prices_csv, got price_columns={price_columns!r}")
        if prices_csv is not None:
            columns = None if price_columns is None else _check_price_columns(price_columns)
            prices = load_prices_csv(prices_csv, columns)
        if prices is None:
            if price_rows is not None:
                raise ValueError(f"price_rows only applies to price data (prices or prices_csv), got {price_rows!r}")
            self.regime_params: RegimeParams | None = _as_regime_params(regime_params)
            self._log_prices: np.ndarray | None = None
            self.price_rows: tuple[int, int] | None = None
        else:
            if regime_params is not None:
                raise ValueError(f"regime_params only applies to synthetic data (prices=None), got {regime_params!r}")
            if self.observe_regime:
                raise ValueError("observe_regime=True needs regime labels, which only synthetic data has (prices=None)")
            self.regime_params = None
            history = validate_prices(prices, min_rows=self.window_rows, needed_for="warmup + episode_length + 1")
            self.price_rows = _check_price_rows(price_rows, len(history), self.window_rows)
            # Only the rows in price_rows are kept, so no episode can read a price outside them.
            self._log_prices = np.log(history[self.price_rows[0] : self.price_rows[1]])

        self.feature_names = FEATURE_NAMES + (REGIME_FEATURE_NAMES if self.observe_regime else ())
        low = np.concatenate([MARKET_FEATURE_LOW, [-1.0], np.zeros(N_REGIMES * self.observe_regime)])
        high = np.concatenate([MARKET_FEATURE_HIGH, [1.0], np.ones(N_REGIMES * self.observe_regime)])
        self.observation_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

        self._cost_rate = self.cost_bps / 10_000.0
        self._step_index = -1  # -1: reset() not called yet
        self.episode_rows: tuple[int, int] | None = None
        self._done = True

    # ------------------------------------------------------------------ episode construction (action-independent)

    def _draw_episode_log_prices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Return ``(log_a, log_b, regime)`` of a fresh episode window; ``regime`` is ``None`` for real data."""
        log_prices, rows = self._log_prices, self.price_rows
        if log_prices is None or rows is None:
            path = simulate_path(self.window_rows - 1, self.np_random, self.regime_params)
            return path.log_a, path.log_b, path.regime
        start = int(self.np_random.integers(0, len(log_prices) - self.window_rows + 1))
        window = log_prices[start : start + self.window_rows]
        first_row = rows[0] + start
        self.episode_rows = (first_row, first_row + self.window_rows)
        return window[:, 0], window[:, 1], None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start a new episode on a fresh path; ``seed`` reseeds ``self.np_random`` (``options`` is unused)."""
        super().reset(seed=seed)
        log_a, log_b, regime = self._draw_episode_log_prices()
        features, beta = pair_features(log_a, log_b, self.warmup, hedge_ratio=self.hedge_ratio, **self.feature_windows)
        warmup, n_obs = self.warmup, self.episode_length + 1
        observations = np.zeros((n_obs, len(self.feature_names)), dtype=np.float32)
        observations[:, :OBS_POSITION] = features
        if self.observe_regime and regime is not None:  # only synthetic paths have regimes (checked in __init__)
            observations[np.arange(n_obs), OBS_REGIME + regime[warmup:]] = 1.0
        growth_a = np.expm1(np.diff(log_a[warmup:]))
        growth_b = np.expm1(np.diff(log_b[warmup:]))

        # Per-step Python lists: indexing them in step() is faster than indexing numpy arrays.
        self._spread_growth = (growth_a - beta[:-1] * growth_b).tolist()
        self._cost_per_unit = (self._cost_rate * (1.0 + np.abs(beta[:-1]))).tolist()
        self._step_regime = regime[warmup + 1 :].tolist() if regime is not None else [REGIME_UNKNOWN] * (n_obs - 1)
        self._observations = observations
        self._log_a, self._log_b, self._regime, self._hedge = log_a, log_b, regime, beta

        self._step_index, self._done = 0, False
        self._position, self._equity, self._last_cost = 0.0, 1.0, 0.0
        self._peak_equity, self._max_drawdown, self._turnover = 1.0, 0.0, 0.0
        self._reward_sum, self._reward_sq_sum = 0.0, 0.0
        self._regime_return = [0.0] * N_REGIMES
        first_regime = REGIME_UNKNOWN if regime is None else int(regime[warmup])
        info = {"regime": first_regime, "position": 0.0, "equity": 1.0, "cost": 0.0}
        return observations[0].copy(), info

    # ------------------------------------------------------------------ stepping

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move to the target position ``action``, earn the next day's move, return ``(obs, reward, ...)``."""
        if self._done:
            raise RuntimeError("the episode has ended (or reset() was never called): call reset() before step()")
        target = action_to_position(action)
        k = self._step_index
        trade = abs(target - self._position)
        cost = self._cost_per_unit[k] * trade
        growth = 1.0 + target * self._spread_growth[k] - cost
        wiped_out = growth < MIN_STEP_GROWTH
        if wiped_out:
            growth = MIN_STEP_GROWTH
        reward = math.log(growth)
        equity = self._equity * growth
        regime = self._step_regime[k]

        self._reward_sum += reward
        self._reward_sq_sum += reward * reward
        self._turnover += trade
        if equity > self._peak_equity:
            self._peak_equity = equity
        elif 1.0 - equity / self._peak_equity > self._max_drawdown:
            self._max_drawdown = 1.0 - equity / self._peak_equity
        if regime >= 0:
            self._regime_return[regime] += reward
        k += 1
        self._step_index, self._position, self._equity, self._last_cost = k, target, equity, cost

        terminated = wiped_out or equity < self.stop_equity
        truncated = not terminated and k == self.episode_length
        observation = self._observations[k]
        observation[OBS_POSITION] = target
        info: dict[str, Any] = {"regime": regime, "position": target, "equity": equity, "cost": cost}
        if terminated or truncated:
            self._done = True
            info["episode_summary"] = self.episode_summary()
        return observation.copy(), reward, terminated, truncated, info

    def episode_summary(self) -> dict[str, float]:
        """Return the statistics of the episode so far (keys ``SUMMARY_KEYS``; see the class docstring)."""
        steps = self._step_index
        sharpe = 0.0
        if steps > 1:
            mean = self._reward_sum / steps
            variance = max(self._reward_sq_sum / steps - mean * mean, 0.0) * steps / (steps - 1)
            if variance > 1e-24:
                sharpe = mean / math.sqrt(variance) * math.sqrt(TRADING_DAYS_PER_YEAR)
        summary = {
            "cumulative_return": self._equity - 1.0,
            "sharpe": sharpe,
            "max_drawdown": self._max_drawdown,
            "turnover": self._turnover,
        }
        summary.update({f"return_{name}": value for name, value in zip(REGIME_NAMES, self._regime_return, strict=True)})
        summary["steps"] = float(steps)
        return summary

    # ------------------------------------------------------------------ rendering

    def render(self) -> np.ndarray | str | None:
        """Return an RGB image (``"rgb_array"``) or a one-line text state (``"ansi"``) of the current day."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='rgb_array' or 'ansi'.")
            return None
        if self._step_index < 0:
            raise RuntimeError("call reset() before render()")
        k, day = self._step_index, self.warmup + self._step_index
        if self.render_mode == "ansi":
            regime = REGIME_UNKNOWN if self._regime is None else int(self._regime[day])
            name = REGIME_NAMES[regime] if regime >= 0 else "unknown"
            return (
                f"day {k}/{self.episode_length} regime={name} z={self._observations[k, OBS_ZSCORE]:+.2f} "
                f"hedge={self._hedge[k]:.3f} position={self._position:+.3f} equity={self._equity:.4f} "
                f"cost={self._last_cost:.6f}"
            )
        log_a, log_b = self._log_a[: day + 1], self._log_b[: day + 1]
        position = np.zeros(day + 1)
        position[self.warmup :] = self._observations[: k + 1, OBS_POSITION]
        spread = log_a - self._hedge[k] * log_b
        return render_pair_image(log_a, log_b, spread, self._regime, position, self.window_rows, self.warmup)
