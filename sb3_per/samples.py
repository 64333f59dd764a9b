"""What a prioritized buffer's ``sample`` returns: SB3's sample types (same fields, same order, so unmodified SB3
code keeps working) plus what prioritized replay adds."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.type_aliases import TensorDict


class PrioritizedReplayBufferSamples(NamedTuple):
    """
    ``ReplayBufferSamples`` plus what prioritized replay adds.

    :param weights: importance-sampling weights, float32 tensor of shape (batch_size, 1)
    :param indices: flat leaf indices (``pos * n_envs + env``) of the sampled transitions,
        to hand back to ``PrioritizedReplayBuffer.update_priorities``
    :param stamps: int64 write stamp of each sampled leaf when it was sampled (how many times ``add``
        had written it), to hand back with ``indices`` so that updates for overwritten data are skipped
    """

    observations: th.Tensor
    actions: th.Tensor
    next_observations: th.Tensor
    dones: th.Tensor
    rewards: th.Tensor
    discounts: th.Tensor | None
    weights: th.Tensor
    indices: np.ndarray
    stamps: np.ndarray


class PrioritizedDictReplayBufferSamples(NamedTuple):
    """
    ``DictReplayBufferSamples`` (same fields, same order) plus ``weights``, ``indices`` and ``stamps``, as in
    ``PrioritizedReplayBufferSamples``.
    """

    observations: TensorDict
    actions: th.Tensor
    next_observations: TensorDict
    dones: th.Tensor
    rewards: th.Tensor
    discounts: th.Tensor | None
    weights: th.Tensor
    indices: np.ndarray
    stamps: np.ndarray
