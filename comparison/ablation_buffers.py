"""
Replay buffers that only the comparison's ablations of PER use: they answer why PER does as it does on the pairs
env, and are not part of the library.

- ``TagWeightedReplayBuffer``: PER's share of each regime without PER's choice of transitions within a regime.
- ``RewardPrioritizedReplayBuffer``: PER's sampling and weights with priorities from rewards, no TD errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from numbers import Integral
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecNormalize

from sb3_per import PrioritizedReplayBuffer, TaggedReplayBuffer
from sb3_per.checks import checked_positive_integer, is_finite_number, is_sampling_weight
from sb3_per.replay_tags import TaggedReplayBufferSamples, tag_of
from sb3_per.sum_tree import SumTree


def checked_tag_weights(tag_weights: Mapping[int, float] | None) -> dict[int, float]:
    """
    ``tag_weights`` as a dict of int tags to float weights, or ``ValueError`` naming a bad tag or weight.

    :param tag_weights: sampling weight (finite, > 0) of each tag; None: no weights (every tag weighs 1). A key that is
        an integer written as a string (``"1"``) counts as that integer: a saved model's JSON data holds them so
    """
    if tag_weights is None:
        return {}
    if not isinstance(tag_weights, Mapping):
        raise ValueError(f"tag_weights must be a mapping of tag -> weight, e.g. {{1: 1.5}}, got {tag_weights!r}")
    checked: dict[int, float] = {}
    for key, weight in tag_weights.items():
        tag = int(key) if isinstance(key, str) and re.fullmatch(r"-?[0-9]+", key) else key
        if not isinstance(tag, Integral) or tag_of(tag) != tag:  # tag_of also refuses a bool
            raise ValueError(f"tag_weights keys must be integer tags, got {key!r}")
        if not is_sampling_weight(weight):
            raise ValueError(f"tag_weights[{tag!r}] must be a finite number > 0, got {weight!r}")
        checked[int(tag)] = float(weight)
    return checked


class TagWeightedReplayBuffer(TaggedReplayBuffer):
    """
    A ``TaggedReplayBuffer`` that samples each stored transition with probability proportional to a fixed
    weight of its tag, and so uniformly among the transitions of one tag: it over- or under-samples whole
    regimes with no TD errors, no priorities to write back and no importance weights (its batches carry none,
    so ``sb3_per``'s algorithms apply their uniform loss). The comparison uses it as an ablation of
    prioritized replay: PER's share of each regime without PER's choice of transitions within a regime.

    Draws are independent, with replacement (as SB3's uniform buffer), from a sum tree over the stored
    transitions' weights, by NumPy's global generator (which SB3's ``set_random_seed`` seeds).

    :param buffer_size: Max number of elements in the buffer
    :param observation_space: Observation space
    :param action_space: Action space
    :param device: PyTorch device
    :param n_envs: Number of parallel environments
    :param optimize_memory_usage: must be False (SB3's memory-saving layout cannot sample an arbitrary leaf)
    :param handle_timeout_termination: Handle timeout termination (due to timelimit)
        separately and treat the task as infinite horizon task (SB3 issue #284)
    :param tag_key: The ``info`` key whose integer value tags each transition (required)
    :param tag_weights: sampling weight of each tag value, finite and > 0; a tag it does not list (``UNKNOWN_TAG``
        included) weighs 1, so ``None`` samples uniformly
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        tag_key: str | None = None,
        tag_weights: Mapping[int, float] | None = None,
    ):
        self.tag_weights = checked_tag_weights(tag_weights)
        if optimize_memory_usage:
            raise ValueError(
                "TagWeightedReplayBuffer samples any stored transition, which SB3's optimize_memory_usage layout "
                "cannot (its newest transition has no next observation yet): got optimize_memory_usage=True"
            )
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            device=device,
            n_envs=n_envs,
            handle_timeout_termination=handle_timeout_termination,
            tag_key=tag_key,
        )
        self._weights = SumTree(self.buffer_size * self.n_envs)

    def reset(self) -> None:
        super().reset()
        self._weights = SumTree(self.buffer_size * self.n_envs)

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one step of every env, as SB3's ``ReplayBuffer.add``, with the sampling weight of its tag."""
        leaves = self.pos * self.n_envs + np.arange(self.n_envs)
        super().add(obs, next_obs, action, reward, done, infos)
        tags = self._tag_values[self._tag_slot[leaves]]
        self._weights.update(leaves, np.array([self.tag_weights.get(int(tag), 1.0) for tag in tags]))

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> TaggedReplayBufferSamples:  # type: ignore[override]
        """
        ``batch_size`` transitions, each drawn with probability proportional to its tag's weight.

        :param batch_size: Number of element to sample
        :param env: associated gym VecEnv to normalize the observations/rewards when sampling
        """
        checked_positive_integer("batch_size", batch_size)
        if self._weights.total <= 0.0:
            raise ValueError("cannot sample from an empty TagWeightedReplayBuffer: add transitions first")
        leaves = self._weights.find(np.random.uniform(0.0, self._weights.total, size=batch_size))  # noqa: NPY002
        return self._samples_at(leaves // self.n_envs, leaves % self.n_envs, env)


class RewardPrioritizedReplayBuffer(PrioritizedReplayBuffer):
    """
    A ``PrioritizedReplayBuffer`` whose priorities come from rewards, not TD errors: each transition is stored
    at priority ``(|reward| + epsilon) ** alpha`` of its own one-step reward and keeps it. Sampling, importance
    weights and beta are ``PrioritizedReplayBuffer``'s. The comparison uses it as an ablation of prioritized
    replay: on the pairs env a day's |reward| is mostly the size of its unpredictable spread move, and it ranks
    a batch as |TD error| largely does, so this asks whether replaying the largest rewards at PER's rate, with no
    TD error at all, costs what PER's TD-error priorities cost.

    With ``reward_floor > 0`` the priority is ``(max(|reward|, reward_floor) + epsilon) ** alpha``: every reward
    below the floor counts as the floor, so the quietest transitions are replayed as often as one at the floor,
    while those above it keep their preference. The comparison's ``per_reward_floor`` ablation sets the floor at
    the typical |reward|, to tell replaying the largest rewards more from replaying the smallest ones less.

    ``update_priorities`` checks its input as ``PrioritizedReplayBuffer``'s does (bad input raises ``ValueError``)
    and counts the call, but leaves every priority as ``add`` set it; ``max_priority`` is the largest reward
    priority stored so far.

    :param args: as ``PrioritizedReplayBuffer``'s, in its order
    :param reward_floor: the |reward| below which every transition's priority is the floor's (0, the default:
        none); a floor whose priority the sum tree cannot hold raises ``ValueError``
    :param kwargs: as ``PrioritizedReplayBuffer``'s
    """

    priorities_follow_updates = False
    # A class default too, for buffers pickled before the floor existed
    reward_floor = 0.0

    def __init__(self, *args: Any, reward_floor: float = 0.0, **kwargs: Any):
        check_reward_floor(reward_floor)
        self.reward_floor = float(reward_floor)
        super().__init__(*args, **kwargs)
        # Every priority is at least the floor's, so a floor the sum tree cannot hold would refuse every add
        try:
            self.sampler.priorities_of(np.array([self.reward_floor]), "reward_floor")
        except ValueError as error:
            raise ValueError(f"reward_floor={reward_floor!r} is too large: {error}") from None

    def _entry_priorities(self, reward: np.ndarray) -> np.ndarray:
        """
        ``(max(|reward|, reward_floor) + epsilon) ** alpha`` of each env's reward; a reward that is not finite, or
        too large for the sum tree, raises ``ValueError`` (before ``add`` stores anything).

        :param reward: the step's rewards, one per env
        """
        reward = np.asarray(reward, dtype=np.float64).reshape(self.n_envs)
        # Signed, so that a bad reward is reported as it was; NaN stays NaN
        floored = np.copysign(np.maximum(np.abs(reward), self.reward_floor), reward)
        return self.sampler.priorities_of(floored, "reward")

    def update_priorities(
        self, indices: np.ndarray | th.Tensor, priorities: np.ndarray | th.Tensor, stamps: np.ndarray | None = None
    ) -> None:
        """
        Check a priority update as ``PrioritizedReplayBuffer.update_priorities`` does and count it, leaving the
        reward priorities unchanged.

        :param indices: flat indices, as returned in the samples' ``indices``
        :param priorities: one finite value per index
        :param stamps: the samples' ``stamps``
        """
        if self._checked_priority_updates(indices, priorities, stamps) is not None:
            self.sampler.n_priority_updates += 1


def check_reward_floor(reward_floor: float) -> None:
    """Raise ``ValueError``, naming the parameter and its value, unless ``reward_floor`` is a finite number >= 0."""
    if not (is_finite_number(reward_floor) and reward_floor >= 0.0):
        raise ValueError(f"reward_floor must be a finite number >= 0, got {reward_floor!r}")
