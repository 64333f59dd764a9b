"""NoisyBandit-v0 (envs.noisy_bandit): a known share of noisy contexts, tagged, with pure zero-mean reward noise."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.noisy_bandit import NoisyBanditEnv, held_out_contexts


def hand_learnable_reward(context: np.ndarray, action: float) -> float:
    """``1 - 2 * (a - 0.8 * sin(pi * s_1)) ** 2``, as the module docstring states it."""
    return 1.0 - 2.0 * (action - 0.8 * math.sin(math.pi * float(context[1]))) ** 2


def play(env: gym.Env, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` one-step episodes with uniform actions in [-1, 1]: contexts, actions, rewards, reset tags, step tags."""
    rng = np.random.default_rng(seed)
    contexts, actions, rewards, reset_tags, step_tags = [], [], [], [], []
    env.reset(seed=seed)
    for _ in range(n):
        context, reset_info = env.reset()
        action = rng.uniform(-1.0, 1.0, 1).astype(np.float32)
        next_context, reward, terminated, truncated, info = env.step(action)
        assert terminated and not truncated  # one step an episode
        np.testing.assert_array_equal(next_context, context)
        contexts.append(context)
        actions.append(float(action[0]))
        rewards.append(reward)
        reset_tags.append(reset_info[envs.NOISY_KEY])
        step_tags.append(info[envs.NOISY_KEY])
    return np.array(contexts), np.array(actions), np.array(rewards), np.array(reset_tags), np.array(step_tags)


def test_share_of_noisy_contexts_matches_noise_share_over_many_resets():
    """20,000 resets at noise_share 0.3: binomial sd sqrt(0.3 * 0.7 / 20000) = 0.0032; margin 0.015 (4.6 sd)."""
    env = NoisyBanditEnv(noise_share=0.3)
    env.reset(seed=0)
    tags = np.array([env.reset()[1][envs.NOISY_KEY] for _ in range(20_000)])
    assert set(np.unique(tags)) == {0, 1}
    assert abs(tags.mean() - 0.3) < 0.015


def test_info_tags_exactly_the_contexts_below_the_noise_boundary():
    env = gym.make(envs.NOISY_BANDIT_ID, noise_share=0.25)
    contexts, _, _, reset_tags, step_tags = play(env, 2_000, seed=1)
    expected = (contexts[:, 0] < -1.0 + 2.0 * 0.25).astype(int)  # the boundary -0.5
    np.testing.assert_array_equal(reset_tags, expected)
    np.testing.assert_array_equal(step_tags, expected)
    assert 0 < expected.sum() < len(expected)


def test_noisy_rewards_scatter_with_noise_std_around_the_learnable_reward_and_clean_ones_do_not():
    """
    ~4,000 noisy steps at noise_std 0.5: the residuals' mean has sd 0.5 / sqrt(4000) = 0.008 (margin 0.04), their
    sample sd has sd about 0.5 / sqrt(2 * 4000) = 0.0056 (margin 0.03). Clean rewards are the learnable reward itself.
    """
    env = gym.make(envs.NOISY_BANDIT_ID, noise_share=0.5, noise_std=0.5)
    contexts, actions, rewards, _, tags = play(env, 8_000, seed=2)
    residuals = rewards - np.array([hand_learnable_reward(c, a) for c, a in zip(contexts, actions, strict=True)])
    noisy, clean = residuals[tags == 1], residuals[tags == 0]
    assert len(noisy) > 3_600 and len(clean) > 3_600
    np.testing.assert_allclose(clean, 0.0, atol=1e-5)  # float32 contexts: the env's sine is single precision
    assert abs(noisy.mean()) < 0.04
    assert abs(noisy.std() - 0.5) < 0.03
    # the noise is not tied to the context: the same sd on either half of the noisy contexts (difference sd 0.011)
    upper = contexts[tags == 1, 1] > 0
    assert abs(noisy[upper].std() - noisy[~upper].std()) < 0.05


def test_zero_noise_std_makes_noisy_contexts_rewards_the_learnable_reward():
    env = NoisyBanditEnv(noise_share=0.5, noise_std=0.0)
    contexts, actions, rewards, _, tags = play(env, 500, seed=3)
    assert tags.sum() > 100
    expected = [hand_learnable_reward(c, a) for c, a in zip(contexts, actions, strict=True)]
    np.testing.assert_allclose(rewards, expected, atol=1e-5)


def test_actions_outside_the_box_are_clipped_before_the_reward():
    env = NoisyBanditEnv(noise_share=0.5, noise_std=0.0)
    context, _ = env.reset(seed=4)
    _, reward, *_ = env.step(np.array([5.0], dtype=np.float32))
    assert reward == pytest.approx(hand_learnable_reward(context, 1.0), abs=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise_share": 0.0}, r"noise_share must be in \(0, 1\), got 0.0"),
        ({"noise_share": 1.0}, r"noise_share must be in \(0, 1\), got 1.0"),
        ({"noise_share": -0.2}, r"noise_share must be in \(0, 1\), got -0.2"),
        ({"noise_share": math.nan}, r"noise_share must be in \(0, 1\), got nan"),
        ({"noise_share": True}, r"noise_share must be in \(0, 1\), got True"),
        ({"noise_share": "0.5"}, r"noise_share must be in \(0, 1\), got '0.5'"),
        ({"noise_std": -0.1}, r"noise_std must be a finite number >= 0, got -0.1"),
        ({"noise_std": math.inf}, r"noise_std must be a finite number >= 0, got inf"),
        ({"noise_std": math.nan}, r"noise_std must be a finite number >= 0, got nan"),
        ({"render_mode": "human"}, r"render_mode must be None, got 'human'"),
    ],
)
def test_bad_parameters_raise_value_error_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        NoisyBanditEnv(**kwargs)
    if "render_mode" not in kwargs:  # through the registry as well (gym.make warns of a render mode first)
        with pytest.raises(ValueError, match=message):
            gym.make(envs.NOISY_BANDIT_ID, **kwargs)


def test_the_same_seed_reproduces_contexts_rewards_and_tags_and_another_does_not():
    runs = [play(gym.make(envs.NOISY_BANDIT_ID), 200, seed=seed) for seed in (7, 7, 8)]
    for same, other in zip(runs[0], runs[1], strict=True):
        np.testing.assert_array_equal(same, other)
    assert not np.array_equal(runs[0][0], runs[2][0])
    assert not np.array_equal(runs[0][2], runs[2][2])


def test_held_out_contexts_are_of_the_asked_kind_and_the_same_on_every_call():
    for noisy in (True, False):
        contexts = held_out_contexts(300, noisy, noise_share=0.3)
        assert contexts.shape == (300, 2) and contexts.dtype == np.float32
        assert np.all((contexts[:, 0] < -0.4) == noisy)
        assert np.all(np.abs(contexts) <= 1.0)
        np.testing.assert_array_equal(contexts, held_out_contexts(300, noisy, noise_share=0.3))
    assert not np.array_equal(held_out_contexts(10, True, 0.3, seed=0), held_out_contexts(10, True, 0.3, seed=1))
