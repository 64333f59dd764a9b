"""Reference policies for ``PairsTrading-v0``, with SB3's ``predict`` signature, and a plain evaluation loop.

Each policy reads what it needs from the observation (``OBS_ZSCORE``, ``OBS_POSITION``), so it works on a single
observation of shape ``(obs_dim,)`` and on a batch ``(n_envs, obs_dim)`` as SB3's ``evaluate_policy`` passes it.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from .pairs_trading import OBS_POSITION, OBS_ZSCORE


def zscore_target_position(
    zscore: np.ndarray | float,
    position: np.ndarray | float,
    entry: float = 2.0,
    exit: float = 0.5,
    stop: float | None = None,
) -> np.ndarray:
    """Return the classic z-score rule's target position (-1, 0 or +1), elementwise.

    Flat: go short the spread when ``z > entry`` and long when ``z < -entry`` (but not beyond ``stop``).
    Long: exit once ``z > -exit`` (the spread has reverted) or, with a stop, when ``z < -stop``; short mirrors it.
    After an exit the entry rule applies again on the same day. Only the sign of ``position`` matters.

    :param zscore: z-score(s) of the spread.
    :param position: current position(s).
    :param entry: ``|z|`` that opens a position.
    :param exit: ``|z|`` inside which a position is closed.
    :param stop: ``|z|`` beyond which a position is closed (and none is opened); ``None`` for no stop.
    """
    z = np.asarray(zscore, dtype=np.float64)
    held = np.sign(np.asarray(position, dtype=np.float64))
    long, short = held > 0, held < 0
    close_long = long & (z > -exit)
    close_short = short & (z < exit)
    can_enter = np.abs(z) > entry
    if stop is not None:
        close_long |= long & (z < -stop)
        close_short |= short & (z > stop)
        can_enter &= np.abs(z) < stop
    flat = ~(long | short) | close_long | close_short
    kept = np.where(flat, 0.0, held)
    return np.where(flat & can_enter, -np.sign(z), kept)


class PolicyLike(Protocol):
    """Anything with SB3's ``predict`` signature."""

    def predict(
        self, observation: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, Any]: ...


def _as_actions(targets: np.ndarray) -> np.ndarray:
    """Return target positions with shape (..., 1) and dtype float32, the env's action layout."""
    return np.asarray(targets, dtype=np.float32)[..., None]


class ZScorePolicy:
    """Classic pairs rule on the observed z-score: enter at ``|z| > entry``, exit at ``|z| < exit``, optional stop.

    :param entry: ``|z|`` that opens a position (> ``exit``).
    :param exit: ``|z|`` inside which a position is closed (>= 0).
    :param stop: ``|z|`` beyond which a position is closed (> ``entry``); ``None`` for no stop.
    """

    def __init__(self, entry: float = 2.0, exit: float = 0.5, stop: float | None = None) -> None:
        if not (np.isfinite(exit) and exit >= 0):
            raise ValueError(f"exit must be finite and >= 0, got {exit!r}")
        if not (np.isfinite(entry) and entry > exit):
            raise ValueError(f"entry must be finite and > exit ({exit}), got {entry!r}")
        if stop is not None and not stop > entry:
            raise ValueError(f"stop must be None or > entry ({entry}), got {stop!r}")
        self.entry, self.exit, self.stop = float(entry), float(exit), stop

    def predict(
        self, observation: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, Any]:
        """Return ``(actions, state)``: shape (1,) for one observation, (n_envs, 1) for a batch."""
        obs = np.asarray(observation)
        targets = zscore_target_position(obs[..., OBS_ZSCORE], obs[..., OBS_POSITION], self.entry, self.exit, self.stop)
        return _as_actions(targets), state


class FlatPolicy:
    """Never trades: always targets position 0."""

    def predict(
        self, observation: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, Any]:
        """Return ``(zeros, state)``: shape (1,) for one observation, (n_envs, 1) for a batch."""
        return _as_actions(np.zeros(np.shape(observation)[:-1])), state


class RandomPolicy:
    """Targets a uniform random position in [-1, 1] each day, from its own generator.

    :param seed: seed of the policy's generator.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def predict(
        self, observation: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, Any]:
        """Return ``(uniform actions, state)``: shape (1,) for one observation, (n_envs, 1) for a batch."""
        return _as_actions(self.rng.uniform(-1.0, 1.0, size=np.shape(observation)[:-1])), state


def run_episodes(
    env: gym.Env, policy: PolicyLike, n_episodes: int, seed: int | None = None
) -> tuple[list[dict[str, float]], list[np.ndarray]]:
    """Play ``n_episodes`` with a policy; return each episode's ``info["episode_summary"]`` and step records.

    :param env: a ``PairsTrading-v0`` env (wrapped or not).
    :param policy: object with SB3's ``predict``.
    :param n_episodes: number of episodes.
    :param seed: seeds the first reset; later resets continue the env's generator.
    :return: ``(summaries, steps)``; ``steps[i]`` is an (n_steps, 2) float array of (reward, regime) per step.
    """
    summaries, records = [], []
    for episode in range(n_episodes):
        observation, _ = env.reset(seed=seed if episode == 0 else None)
        rows, done = [], False
        while not done:
            action, _ = policy.predict(observation, deterministic=True)
            observation, reward, terminated, truncated, info = env.step(action)
            rows.append((reward, info["regime"]))
            done = terminated or truncated
        summaries.append(info["episode_summary"])
        records.append(np.asarray(rows, dtype=np.float64))
    return summaries, records
