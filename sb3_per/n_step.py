"""n-step returns of sampled transitions, computed as SB3's ``NStepReplayBuffer`` does, for a prioritized buffer
whose leaves are ``pos * n_envs + env``: the same arithmetic and dtypes, but for the env each leaf belongs to rather
than a random one."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecNormalize

from sb3_per.checks import checked_number, checked_positive_integer


def check_n_step_parameters(n_steps: int, gamma: float) -> None:
    """Raise ``ValueError``, naming the parameter and its value, for a bad ``n_steps`` or ``gamma``."""
    checked_positive_integer("n_steps", n_steps)
    checked_number("gamma", gamma, low=0.0, high=1.0)


def n_step_targets(
    buffer: Any, leaves: np.ndarray, env: VecNormalize | None
) -> tuple[np.ndarray | dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """
    Next observations, dones, n-step returns and bootstrap discounts of the transitions at ``leaves``.

    :param buffer: a prioritized buffer (SB3 storage of shape (buffer_size, n_envs, ...), ``n_steps``, ``gamma``,
        and ``rows(storage, leaves)``)
    :param leaves: flat leaf indices of stored transitions
    :param env: the VecNormalize env whose reward normalisation applies, if any
    """
    n_steps, gamma, buffer_size, n_envs = buffer.n_steps, buffer.gamma, buffer.buffer_size, buffer.n_envs
    batch_inds, env_inds = np.divmod(leaves, n_envs)
    envs = env_inds[:, None]
    timeouts, dones = buffer.timeouts, buffer.dones
    # The newest transition may be followed by the oldest one in the ring: mark it as a truncation
    # while sampling, so that no n-step sum runs across that seam (as SB3 does).
    last_valid = buffer.pos - 1
    saved_timeouts = timeouts[last_valid].copy()
    timeouts[last_valid] = np.logical_or(saved_timeouts, np.logical_not(dones[last_valid]))
    try:
        steps = np.arange(n_steps).reshape(1, -1)
        sequence = (batch_inds[:, None] + steps) % buffer_size
        rewards = buffer._normalize_reward(buffer.rewards[sequence, envs], env)
        ended = np.logical_or(dones[sequence, envs], timeouts[sequence, envs])
        last_step = np.where(ended.any(axis=1), ended.argmax(axis=1), n_steps - 1)
        mask = steps <= last_step[:, None]
        discounts = gamma ** mask.sum(axis=1, keepdims=True).astype(np.float32)
        returns = (rewards * gamma ** np.arange(n_steps, dtype=np.float32).reshape(1, -1) * mask).sum(
            axis=1, keepdims=True
        )
        last = (batch_inds + last_step) % buffer_size
        next_observations = buffer.rows(buffer.next_observations, last * n_envs + env_inds)
        next_dones = dones[last, env_inds][:, None].astype(np.float32)
        next_dones = next_dones * (1.0 - timeouts[last, env_inds][:, None].astype(np.float32))
    finally:
        timeouts[last_valid] = saved_timeouts
    return next_observations, next_dones, returns, discounts
