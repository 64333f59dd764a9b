"""
``NoisyBandit-v0``: a contextual bandit where a known share of the contexts carries pure reward noise, to test whether
a replay priority chases noise (the "noisy TV" of prioritized replay) or what a critic can still learn.

Each episode is one step. The context ``s`` is uniform on ``[-1, 1]^2``; the action ``a`` is in ``[-1, 1]``. The
learnable reward is ``learnable_reward(s, a) = 1 - 2 * (a - a*(s)) ** 2`` with ``a*(s) = 0.8 * sin(pi * s_1)``: a
smooth function that a critic and an actor can learn, largest (1) at ``a = a*(s)``. A context is *noisy* when
``s_0 < -1 + 2 * noise_share`` (a share ``noise_share`` of the contexts); its reward gets ``N(0, noise_std ** 2)``
added, independent of everything, which no critic can predict. ``info["noisy"]`` (1 or 0) tags each step, so that a
tagged replay buffer reports the noisy transitions' share of what it stores, of its priority mass and of its samples.

Its figure of merit is the learnable reward a policy earns on fixed held-out contexts of each kind
(``held_out_contexts``): how fast a learner reaches 1 on the noise-free ones is how fast it learns what can be learned.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: The info key that tags a step as noisy (1) or not (0)
NOISY_KEY = "noisy"


def optimal_action(contexts: np.ndarray) -> np.ndarray:
    """``a*(s) = 0.8 * sin(pi * s_1)`` of each context (rows of ``contexts``)."""
    return 0.8 * np.sin(np.pi * contexts[..., 1])


def learnable_reward(contexts: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``1 - 2 * (a - a*(s)) ** 2``: the reward without noise, of each context and action (1 at best)."""
    return 1.0 - 2.0 * (np.reshape(actions, np.shape(contexts)[:-1]) - optimal_action(contexts)) ** 2


def is_noisy(contexts: np.ndarray, noise_share: float) -> np.ndarray:
    """Whether each context is one whose reward carries noise: ``s_0 < -1 + 2 * noise_share``."""
    return contexts[..., 0] < -1.0 + 2.0 * noise_share


def held_out_contexts(n: int, noisy: bool, noise_share: float, seed: int = 0) -> np.ndarray:
    """
    ``n`` contexts of one kind, uniform within it, from their own generator: the same for every run that asks.

    :param n: how many
    :param noisy: the noisy contexts (``s_0 < -1 + 2 * noise_share``) or the noise-free ones
    :param noise_share: the env's share of noisy contexts, in (0, 1)
    :param seed: the generator's seed
    """
    rng = np.random.default_rng(seed)
    boundary = -1.0 + 2.0 * noise_share
    low, high = (-1.0, boundary) if noisy else (boundary, 1.0)
    return np.column_stack([rng.uniform(low, high, n), rng.uniform(-1.0, 1.0, n)]).astype(np.float32)


class NoisyBanditEnv(gym.Env):
    """
    A one-step contextual bandit with pure reward noise on a share of its contexts (see the module docstring).

    :param noise_share: the share of contexts whose reward carries noise, in (0, 1) (default 0.5)
    :param noise_std: the noise's standard deviation, >= 0 (default 1: the learnable reward's own range is [-7, 1])
    :param render_mode: must be None: there is nothing to draw
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(self, noise_share: float = 0.5, noise_std: float = 1.0, render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"NoisyBandit-v0 has nothing to render: render_mode must be None, got {render_mode!r}")
        if isinstance(noise_share, bool) or not isinstance(noise_share, (int, float)) or not 0.0 < noise_share < 1.0:
            raise ValueError(f"noise_share must be in (0, 1), got {noise_share!r}")
        if isinstance(noise_std, bool) or not isinstance(noise_std, (int, float)) or not 0.0 <= noise_std < np.inf:
            raise ValueError(f"noise_std must be a finite number >= 0, got {noise_std!r}")
        self.noise_share = float(noise_share)
        self.noise_std = float(noise_std)
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._context = np.zeros(2, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._context = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self._context.copy(), {NOISY_KEY: int(is_noisy(self._context, self.noise_share))}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        action = np.clip(np.asarray(action, dtype=np.float64).reshape(1), -1.0, 1.0)
        noisy = bool(is_noisy(self._context, self.noise_share))
        reward = float(learnable_reward(self._context, action))
        if noisy:
            reward += float(self.np_random.normal(0.0, self.noise_std))
        # One step an episode: the next observation is never used (terminated), so it repeats the context.
        return self._context.copy(), reward, True, False, {NOISY_KEY: int(noisy)}
