"""Tests of the PairsTrading-v0 environment (envs.pairs_trading)."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import envs
from envs import (
    FEATURE_NAMES,
    OBS_POSITION,
    OBS_REGIME,
    OBS_ZSCORE,
    REGIME_UNKNOWN,
    SUMMARY_KEYS,
    PairsTradingEnv,
    load_prices_csv,
)
from envs.pairs_trading import MIN_STEP_GROWTH, action_to_position

# Tiny feature windows so that hand-built price paths can be short: look-back 3 days.
TINY_WINDOWS = {"hedge_window": 3, "zscore_window": 3, "zscore_change_lag": 1, "vol_window": 2, "corr_window": 2}


def tiny_env(prices, **kwargs) -> PairsTradingEnv:
    """An env replaying exactly ``prices`` (warm-up 3, one possible window)."""
    return PairsTradingEnv(prices, warmup=3, episode_length=len(prices) - 4, **TINY_WINDOWS, **kwargs)


def play(env: gym.Env, actions, seed: int | None = None):
    """Reset then step through ``actions`` until the episode ends; return (observations, rewards, infos, flags)."""
    observation, info = env.reset(seed=seed)
    observations, rewards, infos, flags = [observation], [], [info], []
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(np.array([action], dtype=np.float32))
        observations.append(observation)
        rewards.append(reward)
        infos.append(info)
        flags.append((terminated, truncated))
        if terminated or truncated:
            break
    return np.array(observations), np.array(rewards), infos, flags


def run_in_fresh_interpreter(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


# ---------------------------------------------------------------------------------------------- registration


def test_make_in_fresh_interpreter_without_importing_envs():
    out = run_in_fresh_interpreter(
        "import gymnasium as gym\n"
        "env = gym.make('envs:PairsTrading-v0', observe_regime=True)\n"
        "obs, info = env.reset(seed=0)\n"
        "print(obs.shape, env.spec.id)\n"
    )
    assert out.split() == ["(9,)", "PairsTrading-v0"]


def test_import_has_no_global_side_effects():
    run_in_fresh_interpreter(
        "import random, sys, warnings\n"
        "import numpy as np, gymnasium\n"
        "filters, np_state, py_state = list(warnings.filters), np.random.get_state(), random.getstate()\n"
        "import envs\n"
        "assert warnings.filters == filters, 'warning filters changed'\n"
        "assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), np_state)), 'numpy RNG touched'\n"
        "assert random.getstate() == py_state, 'random touched'\n"
        "for name in ('sb3_per', 'torch', 'stable_baselines3', 'pandas', 'matplotlib'):\n"
        "    assert name not in sys.modules, name\n"
        "assert 'PairsTrading-v0' in gymnasium.registry\n"
    )


def test_public_api():
    for name in ("PairsTradingEnv", "ZScorePolicy", "FlatPolicy", "load_prices_csv", "REGIME_NAMES"):
        assert hasattr(envs, name)
    assert envs.REGIME_NAMES == ("normal", "stress", "break")
    assert envs.FEATURE_NAMES[envs.OBS_ZSCORE] == "zscore"
    assert envs.FEATURE_NAMES[envs.OBS_POSITION] == "position"
    assert set(envs.__all__) <= set(dir(envs))


def test_make_vec_sync_and_sb3_make_vec_env():
    from stable_baselines3.common.env_util import make_vec_env

    vec = gym.make_vec("envs:PairsTrading-v0", num_envs=2, vectorization_mode="sync", episode_length=5)
    observations, _ = vec.reset(seed=0)
    assert observations.shape == (2, len(FEATURE_NAMES))
    for _ in range(5):
        _, _, terminated, truncated, infos = vec.step(np.zeros((2, 1), dtype=np.float32))
    assert truncated.all() and not terminated.any()
    assert {key for key in infos["episode_summary"] if not key.startswith("_")} == set(SUMMARY_KEYS)
    vec.close()

    sb3_vec = make_vec_env("envs:PairsTrading-v0", n_envs=2, seed=0, env_kwargs={"episode_length": 5})
    assert sb3_vec.reset().shape == (2, len(FEATURE_NAMES))
    for _ in range(5):
        _, _, dones, infos = sb3_vec.step(np.zeros((2, 1), dtype=np.float32))
    assert dones.all()
    assert infos[0]["TimeLimit.truncated"] and "episode_summary" in infos[0] and "episode" in infos[0]
    sb3_vec.close()


# ---------------------------------------------------------------------------------------------- checkers


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"observe_regime": True},
        {"render_mode": "rgb_array"},
        {"render_mode": "ansi"},
        {"prices": load_prices_csv()},
    ],
    ids=["default", "observe_regime", "rgb_array", "ansi", "csv_prices"],
)
def test_gymnasium_and_sb3_checkers_pass_without_warnings(kwargs):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make("envs:PairsTrading-v0", **kwargs)
        gym_check_env(env.unwrapped)
        sb3_check_env(env.unwrapped)
        sb3_check_env(env)
    assert [str(w.message) for w in caught] == []


# ---------------------------------------------------------------------------------------------- determinism


def test_same_seed_same_episode_bit_for_bit():
    actions = np.random.default_rng(0).uniform(-1, 1, 252)
    first = play(PairsTradingEnv(observe_regime=True), actions, seed=7)
    second = play(PairsTradingEnv(observe_regime=True), actions, seed=7)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert first[2] == second[2]
    other = play(PairsTradingEnv(observe_regime=True), actions, seed=8)
    assert not np.array_equal(first[1], other[1])


def test_reseeding_after_other_episodes_reproduces_the_path():
    env = PairsTradingEnv()
    first, _ = env.reset(seed=3)
    for _ in range(3):
        env.reset()
    again, _ = env.reset(seed=3)
    np.testing.assert_array_equal(first, again)
    unseeded_a, _ = env.reset()
    unseeded_b, _ = env.reset()
    assert not np.array_equal(unseeded_a, unseeded_b)


def test_pickled_copy_continues_identically_and_independently():
    env = PairsTradingEnv()
    env.reset(seed=9)
    for _ in range(10):
        env.step(np.array([0.5], dtype=np.float32))
    clone = pickle.loads(pickle.dumps(env))  # what SubprocVecEnv / AsyncVectorEnv do
    for action in (1.0, -1.0, 0.25):
        ours, theirs = env.step(np.array([action])), clone.step(np.array([action]))
        np.testing.assert_array_equal(ours[0], theirs[0])
        assert ours[1:] == theirs[1:]
    clone.step(np.array([0.0]))
    assert env.unwrapped._step_index == 13 and clone._step_index == 14


def test_real_data_windows_are_seeded():
    prices = load_prices_csv()
    env_a, env_b = PairsTradingEnv(prices), PairsTradingEnv(prices)
    starts = []
    for seed in range(5):
        obs_a, _ = env_a.reset(seed=seed)
        obs_b, _ = env_b.reset(seed=seed)
        np.testing.assert_array_equal(obs_a, obs_b)
        starts.append(obs_a[OBS_ZSCORE])
    assert len(set(starts)) > 1  # different seeds replay different windows


# ---------------------------------------------------------------------------------------------- episode mechanics


def test_episode_truncates_with_summary_and_infos():
    env = PairsTradingEnv(observe_regime=True)
    actions = np.random.default_rng(1).uniform(-1.5, 1.5, 252)
    observations, rewards, infos, flags = play(env, actions, seed=11)
    assert len(rewards) == 252 and flags[-1] == (False, True)
    assert all(flag == (False, False) for flag in flags[:-1])
    for observation in observations:
        assert env.observation_space.contains(observation)
    step_infos = infos[1:]
    for info in step_infos:
        assert {"regime", "position", "equity", "cost"} <= set(info)
        assert info["regime"] in (0, 1, 2)
    assert all("episode_summary" not in info for info in step_infos[:-1])
    summary = step_infos[-1]["episode_summary"]
    assert tuple(summary) == SUMMARY_KEYS
    assert all(isinstance(value, float) for value in summary.values())

    positions = np.clip(actions, -1, 1)
    np.testing.assert_allclose([info["position"] for info in step_infos], positions)
    np.testing.assert_allclose(observations[1:, OBS_POSITION], positions, rtol=1e-6)
    equity = np.array([info["equity"] for info in step_infos])
    np.testing.assert_allclose(np.log(equity), np.cumsum(rewards), atol=1e-12)
    regimes = np.array([info["regime"] for info in step_infos])
    # The one-hot regime in the next observation is the regime that governed the step's move.
    np.testing.assert_array_equal(observations[1:, OBS_REGIME:].argmax(axis=1), regimes)
    assert summary["steps"] == 252.0
    assert summary["cumulative_return"] == pytest.approx(equity[-1] - 1.0)
    assert summary["turnover"] == pytest.approx(np.abs(np.diff(positions, prepend=0.0)).sum())
    for code, name in enumerate(envs.REGIME_NAMES):
        assert summary[f"return_{name}"] == pytest.approx(rewards[regimes == code].sum(), abs=1e-12)
    peak = np.maximum.accumulate(np.concatenate([[1.0], equity]))
    assert summary["max_drawdown"] == pytest.approx((1 - np.concatenate([[1.0], equity]) / peak).max())
    assert summary["sharpe"] == pytest.approx(rewards.mean() / rewards.std(ddof=1) * math.sqrt(252))


def test_step_after_episode_end_or_before_reset_raises():
    env = PairsTradingEnv(episode_length=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(1, dtype=np.float32))
    env.reset(seed=0)
    env.step(np.zeros(1, dtype=np.float32))
    env.step(np.zeros(1, dtype=np.float32))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(1, dtype=np.float32))


def test_flat_policy_earns_nothing():
    _, rewards, infos, _ = play(PairsTradingEnv(), np.zeros(252), seed=5)
    np.testing.assert_array_equal(rewards, 0.0)
    assert infos[-1]["episode_summary"]["sharpe"] == 0.0
    assert infos[-1]["episode_summary"]["max_drawdown"] == 0.0


# ---------------------------------------------------------------------------------------------- hand-built paths


def test_reward_is_log_equity_change_after_costs_on_a_hand_built_path():
    prices = np.array(
        [[100, 50], [101, 50.5], [100, 50], [102, 50.2], [104, 50.0], [103, 51.0], [99, 51.5], [100, 51.0]],
        dtype=float,
    )
    env = tiny_env(prices, hedge_ratio=1.5, cost_bps=10.0)
    actions = [1.0, 1.0, -0.5, 0.0]
    _, rewards, infos, flags = play(env, actions, seed=0)
    cost_rate, beta = 10.0 / 10_000, 1.5
    expected, previous, equity = [], 0.0, 1.0
    for k, position in enumerate(actions):
        t = 3 + k
        growth_a, growth_b = prices[t + 1, 0] / prices[t, 0] - 1, prices[t + 1, 1] / prices[t, 1] - 1
        cost = cost_rate * abs(position - previous) * (1 + beta)
        expected.append(math.log(1 + position * (growth_a - beta * growth_b) - cost))
        assert infos[k + 1]["cost"] == pytest.approx(cost, rel=1e-12)
        equity *= 1 + position * (growth_a - beta * growth_b) - cost
        assert infos[k + 1]["equity"] == pytest.approx(equity, rel=1e-12)
        assert infos[k + 1]["regime"] == REGIME_UNKNOWN
        previous = position
    np.testing.assert_allclose(rewards, expected, rtol=1e-12)
    assert flags[-1] == (False, True)
    summary = infos[-1]["episode_summary"]
    assert summary["turnover"] == pytest.approx(3.0)
    assert summary["cumulative_return"] == pytest.approx(equity - 1)
    assert summary["return_normal"] == summary["return_stress"] == summary["return_break"] == 0.0


def test_estimated_hedge_ratio_is_used_for_pnl_and_costs():
    # Leg A's daily log return is exactly twice leg B's: the rolling OLS hedge ratio is exactly 2.
    log_b = np.log(50.0) + np.concatenate([[0.0], np.cumsum(np.random.default_rng(0).normal(0, 0.02, 9))])
    log_a = np.log(80.0) + 2.0 * (log_b - log_b[0])
    prices = np.exp(np.column_stack([log_a, log_b]))
    env = tiny_env(prices, cost_bps=5.0)
    actions = [0.75, -0.25, -0.25, 1.0, 0.0, 0.125]  # exact in float32
    observations, rewards, _, _ = play(env, actions, seed=0)
    np.testing.assert_array_equal(observations[:, OBS_ZSCORE], 0.0)  # constant spread
    previous = 0.0
    for k, position in enumerate(actions):
        t = 3 + k
        growth_a, growth_b = prices[t + 1] / prices[t] - 1
        cost = 5e-4 * abs(position - previous) * 3.0
        assert rewards[k] == pytest.approx(math.log(1 + position * (growth_a - 2.0 * growth_b) - cost), rel=1e-9)
        previous = position


def test_stop_out_terminates():
    prices = np.array([[100, 100]] * 4 + [[80, 100], [81, 100]], dtype=float)
    env = tiny_env(prices, hedge_ratio=1.0, stop_equity=0.9, cost_bps=0.0)
    _, rewards, infos, flags = play(env, [1.0, 1.0], seed=0)
    assert flags == [(True, False)]
    assert infos[-1]["equity"] == pytest.approx(0.8)
    assert rewards[0] == pytest.approx(math.log(0.8))
    assert infos[-1]["episode_summary"]["max_drawdown"] == pytest.approx(0.2)


def test_equity_never_goes_non_positive():
    # Long the spread while A collapses and B doubles: the move would wipe out more than all equity.
    prices = np.array([[100, 100]] * 4 + [[0.01, 200], [0.01, 200]], dtype=float)
    env = tiny_env(prices, hedge_ratio=1.0, stop_equity=0.0)
    _, rewards, infos, flags = play(env, [1.0, 1.0], seed=0)
    assert flags == [(True, False)]
    assert infos[-1]["equity"] == pytest.approx(MIN_STEP_GROWTH) and infos[-1]["equity"] > 0
    assert np.isfinite(rewards).all()
    assert "episode_summary" in infos[-1]


# ---------------------------------------------------------------------------------------------- actions


@pytest.mark.parametrize(
    ("action", "position"),
    [
        (np.array([0.25], dtype=np.float32), 0.25),
        (np.array([3.0], dtype=np.float32), 1.0),
        (np.array([[-7.0]]), -1.0),
        (-0.5, -0.5),
        ([0.5], 0.5),
        (np.float64(2), 1.0),
    ],
)
def test_actions_are_clipped_to_the_position_range(action, position):
    assert action_to_position(action) == position
    env = PairsTradingEnv()
    env.reset(seed=0)
    observation, _, _, _, info = env.step(action)
    assert info["position"] == position and observation[OBS_POSITION] == np.float32(position)


@pytest.mark.parametrize(
    "action",
    [np.array([np.nan], dtype=np.float32), np.array([np.inf]), np.array([0.1, 0.2]), np.array([]), "buy", None],
    ids=["nan", "inf", "two_numbers", "empty", "string", "none"],
)
def test_bad_actions_raise_and_leave_the_state_untouched(action):
    env = PairsTradingEnv()
    env.reset(seed=0)
    env.step(np.array([0.5], dtype=np.float32))
    with pytest.raises(ValueError, match="action"):
        env.step(action)
    _, _, _, _, info = env.step(np.array([0.5], dtype=np.float32))
    assert info["position"] == 0.5 and info["cost"] == 0.0  # no trade: the failed step changed nothing
    assert env.unwrapped._step_index == 2


# ---------------------------------------------------------------------------------------------- arguments and data


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"episode_length": 0}, "episode_length"),
        ({"episode_length": 2.5}, "episode_length"),
        ({"warmup": 30}, "warmup"),
        ({"warmup": True}, "warmup"),
        ({"cost_bps": -1.0}, "cost_bps"),
        ({"cost_bps": float("nan")}, "cost_bps"),
        ({"stop_equity": 1.0}, "stop_equity"),
        ({"stop_equity": -0.1}, "stop_equity"),
        ({"hedge_ratio": float("inf")}, "hedge_ratio"),
        ({"observe_regime": "yes"}, "observe_regime"),
        ({"regime_params": 3}, "regime_params"),
        ({"regime_params": {"half_life_stress": -2.0}}, "half_life_stress"),
        ({"hedge_window": 1}, "hedge_window"),
        ({"zscore_change_lag": 0}, "zscore_change_lag"),
        ({"render_mode": "human"}, "render_mode"),
        ({"prices": load_prices_csv(), "observe_regime": True}, "observe_regime"),
        ({"prices": load_prices_csv(), "regime_params": {}}, "regime_params"),
        ({"prices": load_prices_csv(), "prices_csv": str(envs.SAMPLE_CSV_PATH)}, "prices_csv"),
        ({"price_columns": ["price_a", "price_b"]}, "price_columns"),
        ({"prices_csv": str(envs.SAMPLE_CSV_PATH), "price_columns": "price_a"}, "price_columns"),
        ({"prices_csv": str(envs.SAMPLE_CSV_PATH), "price_columns": ["price_a"]}, "price_columns"),
        ({"prices_csv": str(envs.SAMPLE_CSV_PATH), "price_columns": ["price_a", "nope"]}, "nope"),
        ({"price_rows": [0, 400]}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": [0]}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": "0,400"}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": [0.0, 400.0]}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": [True, 400]}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": [-1, 400]}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": [400, 400]}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": [1200, 1501]}, "price_rows"),
        ({"prices": load_prices_csv(), "price_rows": [100, 412]}, r"price_rows \[100, 412\] holds 312 rows"),
    ],
)
def test_invalid_arguments_raise_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        PairsTradingEnv(**kwargs)


def test_regime_params_as_dict_reach_the_model():
    env = PairsTradingEnv(regime_params={"transition_matrix": np.eye(3).tolist(), "initial_regime": 2})
    env.reset(seed=0)
    _, _, infos, _ = play(env, np.zeros(10), seed=0)
    assert {info["regime"] for info in infos} == {2}


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        (np.full((400, 2), np.nan), "finite"),
        (np.where(np.arange(800).reshape(400, 2) == 333, np.inf, 100.0), "finite"),
        (np.where(np.arange(800).reshape(400, 2) == 501, 0.0, 100.0), "positive"),
        (np.where(np.arange(800).reshape(400, 2) == 10, -3.0, 100.0), "positive"),
        (np.full(400, 100.0), "shape"),
        (np.full((400, 3), 100.0), "shape"),
        (np.full((312, 2), 100.0), "rows"),
        ([["a", "b"]] * 400, "numeric"),
    ],
    ids=["nan", "inf", "zero", "negative", "1d", "3_columns", "too_few_rows", "strings"],
)
def test_bad_price_data_raises_a_clear_value_error(prices, message):
    with pytest.raises(ValueError, match=message):
        PairsTradingEnv(prices)


def test_minimum_rows_is_warmup_plus_episode_plus_one():
    prices = load_prices_csv()[:313]
    env = PairsTradingEnv(prices)
    assert len(play(env, np.zeros(252), seed=0)[1]) == 252
    with pytest.raises(ValueError, match="313"):
        PairsTradingEnv(prices[:312])


def test_prices_csv_replays_the_same_windows_as_the_loaded_array(tmp_path):
    path = tmp_path / "pair.csv"
    path.write_text(
        "Date,xle,xom\n" + "".join(f"2020-01-{1 + i % 28:02d},{100 + i},{50 + i * i % 7}\n" for i in range(20))
    )
    from_array = tiny_env(load_prices_csv(path, ("xle", "xom")))
    from_csv = PairsTradingEnv(
        prices_csv=str(path), price_columns=["xle", "xom"], warmup=3, episode_length=16, **TINY_WINDOWS
    )
    sample = PairsTradingEnv(prices_csv=envs.SAMPLE_CSV_PATH)
    for seed in range(5):
        np.testing.assert_array_equal(from_array.reset(seed=seed)[0], from_csv.reset(seed=seed)[0])
        np.testing.assert_array_equal(
            PairsTradingEnv(load_prices_csv()).reset(seed=seed)[0], sample.reset(seed=seed)[0]
        )


@pytest.mark.parametrize("rows", [(0, 1500), (0, 313), (500, 1000), (1187, 1500)])
def test_price_rows_replays_the_windows_of_that_slice(rows):
    prices = load_prices_csv()
    confined, sliced = PairsTradingEnv(prices, price_rows=list(rows)), PairsTradingEnv(prices[rows[0] : rows[1]])
    actions = np.sin(np.arange(252))
    for seed in range(10):
        first, second = play(confined, actions, seed=seed), play(sliced, actions, seed=seed)
        np.testing.assert_array_equal(first[0], second[0])
        np.testing.assert_array_equal(first[1], second[1])
        start, stop = confined.episode_rows
        assert (start - rows[0], stop - rows[0]) == sliced.episode_rows
        assert rows[0] <= start and stop <= rows[1] and stop - start == confined.window_rows == 313


def test_episode_rows_name_the_rows_the_episode_reads():
    prices = load_prices_csv()
    env = PairsTradingEnv(prices)
    assert env.episode_rows is None and PairsTradingEnv().price_rows is None
    for seed in range(5):
        observation, _ = env.reset(seed=seed)
        start, stop = env.episode_rows
        np.testing.assert_array_equal(observation, PairsTradingEnv(prices[start:stop]).reset(seed=0)[0])
    synthetic = PairsTradingEnv()
    synthetic.reset(seed=0)
    assert synthetic.episode_rows is None


def test_price_data_kwargs_survive_a_json_round_trip():
    kwargs = {
        "prices_csv": str(envs.SAMPLE_CSV_PATH),
        "price_columns": ["price_a", "price_b"],
        "price_rows": [700, 1100],
    }
    env = gym.make("envs:PairsTrading-v0", **json.loads(json.dumps(kwargs)))
    direct = PairsTradingEnv(load_prices_csv(), price_rows=(700, 1100))
    for seed in range(3):
        np.testing.assert_array_equal(env.reset(seed=seed)[0], direct.reset(seed=seed)[0])
    assert env.unwrapped.price_rows == (700, 1100)


def test_dataframe_prices_are_accepted():
    pd = pytest.importorskip("pandas")
    prices = load_prices_csv()
    frame = pd.DataFrame(prices, columns=["price_a", "price_b"])
    obs_array, _ = PairsTradingEnv(prices).reset(seed=4)
    obs_frame, _ = PairsTradingEnv(frame).reset(seed=4)
    np.testing.assert_array_equal(obs_array, obs_frame)
    with pytest.raises(ValueError, match="shape"):
        PairsTradingEnv(frame.assign(extra=1.0))


# ---------------------------------------------------------------------------------------------- rendering


def test_render_modes():
    env = PairsTradingEnv(render_mode="rgb_array")
    env.reset(seed=2)
    first = env.render()
    for _ in range(100):
        env.step(np.ones(1, dtype=np.float32))
    image = env.render()
    assert image.dtype == np.uint8 and image.shape == (400, 600, 3)
    assert not np.array_equal(first, image)
    text_env = PairsTradingEnv(render_mode="ansi")
    text_env.reset(seed=2)
    text_env.step(np.array([-0.5], dtype=np.float32))
    line = text_env.render()
    assert isinstance(line, str) and "\n" not in line and "position=-0.500" in line and "regime=" in line
    with pytest.warns(UserWarning, match="render_mode"):
        assert PairsTradingEnv().render() is None
    with pytest.raises(RuntimeError, match="reset"):
        PairsTradingEnv(render_mode="ansi").render()
