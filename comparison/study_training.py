"""What the training modules of the studies of ``comparison.study`` share: playing evaluation episodes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import gymnasium as gym


class EpisodeOutcome(NamedTuple):
    """
    One evaluation episode.

    :param total: its return, the sum of its rewards
    :param info: the ``info`` of its last step (e.g. ``is_success`` on a goal-conditioned task)
    """

    total: float
    info: dict[str, Any]


def play_episodes(
    model: Any,
    env: gym.Env,
    seeds: Iterable[int],
    observe: Callable[[Any], Any] | None = None,
    max_steps: int | None = None,
) -> list[EpisodeOutcome]:
    """
    One episode of ``model``'s deterministic policy on ``env`` per seed, each reset with its seed, until the episode
    terminates or is truncated (the env's time limit, or ``max_steps``, must end it).

    :param model: anything with SB3's ``predict``
    :param env: one env (not vectorized)
    :param seeds: the episodes' reset seeds
    :param observe: what the policy sees of an observation (e.g. a ``VecNormalize``'s ``normalize_obs``; None: the
        observation itself)
    :param max_steps: end each episode after this many steps if nothing ended it before (None: no such cap)
    :return: each episode's outcome, in the order of ``seeds``
    """
    outcomes = []
    for seed in seeds:
        observation, info = env.reset(seed=seed)
        total, done, steps = 0.0, False, 0
        while not done and (max_steps is None or steps < max_steps):
            action, _ = model.predict(observation if observe is None else observe(observation), deterministic=True)
            observation, reward, terminated, truncated, info = env.step(action)
            total, done, steps = total + float(reward), terminated or truncated, steps + 1
        outcomes.append(EpisodeOutcome(total, info))
    return outcomes
