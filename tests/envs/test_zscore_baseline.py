"""Tests of the reference policies (envs.baselines): the z-score rule's logic, SB3 compatibility, and its edge."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs import (
    OBS_POSITION,
    OBS_ZSCORE,
    FlatPolicy,
    PairsTradingEnv,
    RandomPolicy,
    ZScorePolicy,
    run_episodes,
    zscore_target_position,
)


@pytest.mark.parametrize(
    ("z", "position", "target"),
    [
        (0.0, 0.0, 0.0),  # flat, nothing to do
        (1.9, 0.0, 0.0),  # below entry
        (2.1, 0.0, -1.0),  # spread rich: short it
        (-2.1, 0.0, 1.0),  # spread cheap: buy it
        (-1.0, 1.0, 1.0),  # long, not reverted yet: hold
        (-0.4, 1.0, 0.0),  # long, reverted inside the exit band: close
        (2.5, 1.0, -1.0),  # long, overshot past +entry: close and go short
        (1.0, -1.0, -1.0),  # short, hold
        (0.3, -1.0, 0.0),  # short, reverted: close
        (-9.0, 1.0, 1.0),  # long, diverging, no stop: hold
        (-0.6, 0.3, 1.0),  # only the sign of the position matters: hold at full size
    ],
)
def test_zscore_rule_without_stop(z, position, target):
    assert zscore_target_position(z, position) == target


@pytest.mark.parametrize(
    ("z", "position", "target"),
    [
        (-4.5, 1.0, 0.0),  # long, spread diverged past the stop: close
        (4.5, -1.0, 0.0),  # short, stopped out
        (4.5, 0.0, 0.0),  # beyond the stop: do not enter
        (3.5, 0.0, -1.0),  # between entry and stop: enter
        (-3.5, 1.0, 1.0),  # inside the stop: hold
    ],
)
def test_zscore_rule_with_stop(z, position, target):
    assert zscore_target_position(z, position, entry=2.0, exit=0.5, stop=4.0) == target


def test_predict_on_single_and_batched_observations():
    policy = ZScorePolicy()
    observation = np.zeros(6, dtype=np.float32)
    observation[OBS_ZSCORE] = 2.5
    actions, state = policy.predict(observation)
    assert actions.shape == (1,) and actions.dtype == np.float32 and actions[0] == -1.0 and state is None
    batch = np.zeros((4, 9), dtype=np.float32)  # observe_regime=True layout
    batch[:, OBS_ZSCORE] = [2.5, -2.5, 0.1, -1.0]
    batch[:, OBS_POSITION] = [0.0, 0.0, -1.0, 1.0]
    actions, _ = policy.predict(batch, state=None, episode_start=np.ones(4, dtype=bool), deterministic=True)
    assert actions.shape == (4, 1) and actions.dtype == np.float32
    np.testing.assert_array_equal(actions[:, 0], [-1.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(FlatPolicy().predict(batch)[0], np.zeros((4, 1), dtype=np.float32))
    assert FlatPolicy().predict(observation)[0].shape == (1,)
    random_actions = RandomPolicy(seed=0).predict(batch)[0]
    assert random_actions.shape == (4, 1) and np.all(np.abs(random_actions) <= 1.0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"entry": 0.5, "exit": 0.5}, "entry"),
        ({"entry": float("nan")}, "entry"),
        ({"exit": -0.1}, "exit"),
        ({"stop": 1.5}, "stop"),
    ],
)
def test_invalid_thresholds_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ZScorePolicy(**kwargs)


def test_policies_work_with_sb3_evaluate_policy():
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    vec_env = DummyVecEnv([lambda: Monitor(PairsTradingEnv(episode_length=50)) for _ in range(2)])
    vec_env.seed(0)
    rewards, lengths = evaluate_policy(ZScorePolicy(), vec_env, n_eval_episodes=6, return_episode_rewards=True)
    assert lengths == [50] * 6 and all(np.isfinite(rewards))
    mean, std = evaluate_policy(FlatPolicy(), vec_env, n_eval_episodes=4)
    assert mean == 0.0 and std == 0.0


def test_zscore_policy_trades_on_the_env_and_respects_its_rule():
    env = PairsTradingEnv()
    policy = ZScorePolicy()
    observation, _ = env.reset(seed=1)
    positions = set()
    for _ in range(252):
        action, _ = policy.predict(observation)
        expected = zscore_target_position(observation[OBS_ZSCORE], observation[OBS_POSITION])
        assert action[0] == expected
        observation, _, terminated, truncated, info = env.step(action)
        positions.add(info["position"])
        if terminated or truncated:
            break
    assert positions == {-1.0, 0.0, 1.0}


def regime_sharpe(records: list[np.ndarray]) -> dict[int, float]:
    """Annualised Sharpe ratio of the step rewards earned under each regime, pooled over episodes."""
    steps = np.concatenate(records)
    sharpe = {}
    for code in (0, 1, 2):
        rewards = steps[steps[:, 1] == code, 0]
        sharpe[code] = rewards.mean() / rewards.std() * math.sqrt(252)
    return sharpe


def test_zscore_baseline_earns_in_normal_regimes_and_loses_in_breaks():
    summaries, records = run_episodes(PairsTradingEnv(), ZScorePolicy(), n_episodes=150, seed=2024)
    sharpe = regime_sharpe(records)
    assert sharpe[0] > 0.4, sharpe
    assert sharpe[2] < -0.4, sharpe
    returns = np.array([s["return_normal"] + s["return_stress"] + s["return_break"] for s in summaries])
    assert returns.mean() > 0
    assert np.mean([s["return_break"] for s in summaries]) < 0 < np.mean([s["return_normal"] for s in summaries])


def test_random_actions_lose_to_costs_and_flat_earns_nothing():
    random_summaries, _ = run_episodes(PairsTradingEnv(), RandomPolicy(seed=0), n_episodes=30, seed=1)
    flat_summaries, _ = run_episodes(PairsTradingEnv(), FlatPolicy(), n_episodes=3, seed=1)
    assert np.mean([s["cumulative_return"] for s in random_summaries]) < -0.05
    assert all(s["cumulative_return"] == 0.0 and s["turnover"] == 0.0 for s in flat_summaries)
