# What type checkers and IDEs read for ``import sb3_per``: the package's names as ``__init__.py`` exports them, and
# the signatures of the algorithms' constructors, which at run time pass every argument but ``replay_scheme`` on to
# SB3's (``sb3_per.per_algorithm.constructor_with_replay_scheme``). A new SB3 version that changes a constructor
# changes it here, and only here: tests/sb3_per/test_constructors.py compares these signatures with the installed
# SB3's.
from collections.abc import Callable
from typing import Any

import torch as th
from sb3_contrib.qrdqn.policies import QRDQNPolicy
from sb3_contrib.tqc.policies import TQCPolicy
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.dqn.policies import DQNPolicy
from stable_baselines3.sac.policies import SACPolicy
from stable_baselines3.td3.policies import TD3Policy

from sb3_per.buffers import PrioritizedBufferMixin as PrioritizedBufferMixin
from sb3_per.buffers import PrioritizedDictReplayBuffer as PrioritizedDictReplayBuffer
from sb3_per.buffers import PrioritizedReplayBuffer as PrioritizedReplayBuffer
from sb3_per.ddpg import DDPG as _DDPG
from sb3_per.dqn import DQN as _DQN
from sb3_per.her import PrioritizedHerReplayBuffer as PrioritizedHerReplayBuffer
from sb3_per.per_algorithm import PrioritizedReplayMixin as PrioritizedReplayMixin
from sb3_per.qrdqn import QRDQN as _QRDQN
from sb3_per.replay_tags import TaggedReplayBuffer as TaggedReplayBuffer
from sb3_per.replay_tags import TaggedReplayBufferSamples as TaggedReplayBufferSamples
from sb3_per.sac import SAC as _SAC
from sb3_per.samples import PrioritizedDictReplayBufferSamples as PrioritizedDictReplayBufferSamples
from sb3_per.samples import PrioritizedReplayBufferSamples as PrioritizedReplayBufferSamples
from sb3_per.schemes import LA3P as LA3P
from sb3_per.schemes import LAP as LAP
from sb3_per.schemes import PAL as PAL
from sb3_per.schemes import PER as PER
from sb3_per.schemes import UPER as UPER
from sb3_per.schemes import ExpectedReLo as ExpectedReLo
from sb3_per.schemes import ExpectedTD as ExpectedTD
from sb3_per.schemes import ReLo as ReLo
from sb3_per.schemes import ReplayScheme as ReplayScheme
from sb3_per.sum_tree import SumTree as SumTree
from sb3_per.td3 import TD3 as _TD3
from sb3_per.telemetry import ReplayTelemetry as ReplayTelemetry
from sb3_per.tqc import TQC as _TQC

__version__: str

class DQN(_DQN):
    def __init__(
        self,
        policy: str | type[DQNPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.0001,
        buffer_size: int = 1000000,
        learning_starts: int = 100,
        batch_size: int = 32,
        tau: float = 1.0,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 4,
        gradient_steps: int = 1,
        replay_buffer_class: type[ReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        target_update_interval: int = 10000,
        exploration_fraction: float = 0.1,
        exploration_initial_eps: float = 1.0,
        exploration_final_eps: float = 0.05,
        max_grad_norm: float = 10,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        *,
        replay_scheme: ReplayScheme | None = None,
    ) -> None: ...

class DDPG(_DDPG):
    def __init__(
        self,
        policy: str | type[TD3Policy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.001,
        buffer_size: int = 1000000,
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
        _init_setup_model: bool = True,
        *,
        replay_scheme: ReplayScheme | None = None,
    ) -> None: ...

class QRDQN(_QRDQN):
    def __init__(
        self,
        policy: str | type[QRDQNPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 5e-05,
        buffer_size: int = 1000000,
        learning_starts: int = 100,
        batch_size: int = 32,
        tau: float = 1.0,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 4,
        gradient_steps: int = 1,
        replay_buffer_class: type[ReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        target_update_interval: int = 10000,
        exploration_fraction: float = 0.005,
        exploration_initial_eps: float = 1.0,
        exploration_final_eps: float = 0.01,
        max_grad_norm: float | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        *,
        replay_scheme: ReplayScheme | None = None,
    ) -> None: ...

class SAC(_SAC):
    def __init__(
        self,
        policy: str | type[SACPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.0003,
        buffer_size: int = 1000000,
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
        ent_coef: str | float = "auto",
        target_update_interval: int = 1,
        target_entropy: str | float = "auto",
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        use_sde_at_warmup: bool = False,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        *,
        replay_scheme: ReplayScheme | None = None,
    ) -> None: ...

class TD3(_TD3):
    def __init__(
        self,
        policy: str | type[TD3Policy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.001,
        buffer_size: int = 1000000,
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
        policy_delay: int = 2,
        target_policy_noise: float = 0.2,
        target_noise_clip: float = 0.5,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        *,
        replay_scheme: ReplayScheme | None = None,
    ) -> None: ...

class TQC(_TQC):
    def __init__(
        self,
        policy: str | type[TQCPolicy],
        env: GymEnv | str,
        learning_rate: float | Callable = 0.0003,
        buffer_size: int = 1000000,
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
        ent_coef: str | float = "auto",
        target_update_interval: int = 1,
        target_entropy: str | float = "auto",
        top_quantiles_to_drop_per_net: int = 2,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        use_sde_at_warmup: bool = False,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        *,
        replay_scheme: ReplayScheme | None = None,
    ) -> None: ...
