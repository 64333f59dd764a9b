"""DDPG with prioritized experience replay: SB3's DDPG is TD3 without its tricks, and so is this one."""

from __future__ import annotations

from typing import Any

import stable_baselines3
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.td3.policies import Actor, TD3Policy

from sb3_per.schemes import ReplayScheme
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
        ``LAP()``, ``PAL()``, ``LA3P()`` (``sb3_per.schemes``). ``None`` (default): ``PER()`` with a prioritized
        buffer, SB3's own training with any other
    """

    # SB3's TD3 types for these, declared here for mypy's check of the mixin's declarations (see sb3_per.TD3).
    policy: TD3Policy
    actor: Actor

    def __init__(
        self,
        policy: str | type[TD3Policy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 1e-3,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 1,
        gradient_steps: int = 1,
        action_noise: ActionNoise | None = None,
        replay_buffer_class: type[ReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        replay_scheme: ReplayScheme | None = None,
        _init_setup_model: bool = True,
    ):
        self._init_replay_scheme(replay_scheme)
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            buffer_size=buffer_size,
            learning_starts=learning_starts,
            batch_size=batch_size,
            tau=tau,
            gamma=gamma,
            train_freq=train_freq,
            gradient_steps=gradient_steps,
            action_noise=action_noise,
            replay_buffer_class=replay_buffer_class,
            replay_buffer_kwargs=replay_buffer_kwargs,
            optimize_memory_usage=optimize_memory_usage,
            n_steps=n_steps,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=_init_setup_model,
        )
