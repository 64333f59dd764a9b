"""Prioritized Experience Replay for Stable-Baselines3."""

from sb3_per.buffers import PrioritizedReplayBuffer, PrioritizedReplayBufferSamples
from sb3_per.sac import SAC
from sb3_per.sum_tree import SumTree

__all__ = ["SAC", "PrioritizedReplayBuffer", "PrioritizedReplayBufferSamples", "SumTree"]
__version__ = "0.1.0"
