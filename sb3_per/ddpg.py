"""DDPG with prioritized experience replay: SB3's DDPG is TD3 without its tricks, and so is this one."""

from __future__ import annotations

import stable_baselines3
from stable_baselines3.td3.policies import Actor, TD3Policy

from sb3_per.per_algorithm import constructor_with_replay_scheme
from sb3_per.td3 import TD3TrainingSteps


class DDPG(TD3TrainingSteps, stable_baselines3.DDPG):
    """
    Deep Deterministic Policy Gradient (DDPG) that makes use of a ``PrioritizedReplayBuffer``: a drop-in
    subclass of ``stable_baselines3.DDPG``.

    SB3's DDPG trains with ``TD3.train`` (one critic by default, ``policy_delay=1``, no target smoothing), so
    with a ``PrioritizedReplayBuffer`` this trains with ``sb3_per.TD3``'s prioritized steps
    (``TD3TrainingSteps``), as its ``replay_scheme`` says: ``PER()`` by default, an IS-weighted
    ``mean(w * (Q - y) ** 2)`` critic loss, priorities written back from ``|Q - y|`` after each critic step, the same
    ``train/per_*`` logger keys. With any other replay buffer and ``replay_scheme=None`` it is exactly
    ``stable_baselines3.DDPG``.

    The parameters are those of ``stable_baselines3.DDPG`` (``replay_buffer_class=PrioritizedReplayBuffer`` for
    prioritized replay, with its options ``alpha``, ``beta_start``, ... in ``replay_buffer_kwargs``), plus:

    :param replay_scheme: What each gradient step trains on, its critic loss and its priorities: ``PER()``,
        ``LAP()``, ``PAL()``, ``LA3P()``, ``ReLo()``, ``ExpectedTD()`` or ``ExpectedReLo()`` (``sb3_per.schemes``);
        ``UPER`` needs TQC's quantile critics and is refused. ``None`` (default): ``PER()`` with a prioritized
        buffer, SB3's own training with any other
    """

    # SB3's TD3 types for these, declared here for mypy's check of the mixin's declarations (see sb3_per.TD3).
    policy: TD3Policy
    actor: Actor

    __init__ = constructor_with_replay_scheme(stable_baselines3.DDPG)
