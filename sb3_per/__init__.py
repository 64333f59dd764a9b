"""Prioritized Experience Replay for Stable-Baselines3."""

from sb3_per.buffers import PrioritizedBufferMixin, PrioritizedDictReplayBuffer, PrioritizedReplayBuffer
from sb3_per.ddpg import DDPG
from sb3_per.dqn import DQN
from sb3_per.her import PrioritizedHerReplayBuffer
from sb3_per.per_algorithm import PrioritizedReplayMixin
from sb3_per.qrdqn import QRDQN
from sb3_per.replay_tags import TaggedReplayBuffer, TaggedReplayBufferSamples
from sb3_per.sac import SAC
from sb3_per.samples import PrioritizedDictReplayBufferSamples, PrioritizedReplayBufferSamples
from sb3_per.schemes import LA3P, LAP, PAL, PER, UPER, ExpectedReLo, ExpectedTD, ReLo, ReplayScheme
from sb3_per.sum_tree import SumTree
from sb3_per.td3 import TD3
from sb3_per.telemetry import ReplayTelemetry
from sb3_per.tqc import TQC

__all__ = [
    "DDPG",
    "DQN",
    "LA3P",
    "LAP",
    "PAL",
    "PER",
    "QRDQN",
    "SAC",
    "TD3",
    "TQC",
    "UPER",
    "ExpectedReLo",
    "ExpectedTD",
    "PrioritizedBufferMixin",
    "PrioritizedDictReplayBuffer",
    "PrioritizedDictReplayBufferSamples",
    "PrioritizedHerReplayBuffer",
    "PrioritizedReplayBuffer",
    "PrioritizedReplayBufferSamples",
    "PrioritizedReplayMixin",
    "ReLo",
    "ReplayScheme",
    "ReplayTelemetry",
    "SumTree",
    "TaggedReplayBuffer",
    "TaggedReplayBufferSamples",
]
__version__ = "0.1.0"
