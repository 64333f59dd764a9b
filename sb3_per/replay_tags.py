"""
Integer tags on stored transitions (e.g. a market regime read from each step's ``info``), a uniform
SB3 replay buffer that carries them, and one that samples each tag in proportion to a fixed weight.

A tag is read from ``info[tag_key]`` when a transition is added. A missing key, a value that is not an
integer (a float, a string, a 0-d array, ``None``) or an integer outside int64 stores ``UNKNOWN_TAG``
(-1), so that data without labels (real prices) never fails. A ``bool`` is not taken as an integer
either: ``True == 1`` would silently merge a flag with tag 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import VecNormalize

from sb3_per.sum_tree import SumTree

UNKNOWN_TAG = -1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def tag_of(value: Any) -> int:
    """The tag stored for an ``info`` value: the value itself if it is an int64 integer, else ``UNKNOWN_TAG``."""
    if isinstance(value, Integral) and not isinstance(value, bool) and _INT64_MIN <= int(value) <= _INT64_MAX:
        return int(value)
    return UNKNOWN_TAG


def checked_stored_leaves(indices: np.ndarray, n_stored: int) -> np.ndarray:
    """``indices`` as int64 leaves, or ``ValueError`` if they are not integers in ``[0, n_stored)``."""
    leaves = np.asarray(indices)
    if leaves.size and leaves.dtype.kind not in "iu":
        raise ValueError(f"indices must be integers, got dtype {leaves.dtype}")
    leaves = leaves.astype(np.int64, copy=False)
    if leaves.size and (leaves.min() < 0 or leaves.max() >= n_stored):
        bad = leaves[(leaves < 0) | (leaves >= n_stored)].flat[0]
        raise ValueError(f"index {bad} is out of range: the buffer holds {n_stored} transitions")
    return leaves


class ReplayTagsMixin:
    """
    Tag storage and tag statistics for an SB3 replay buffer whose leaves are ``pos * n_envs + env``.

    Tags are kept as small slot numbers (one per distinct tag, in order of first appearance) so that
    per-tag statistics are arrays indexed by slot; the number of stored transitions per slot is kept in
    step with every ``add``, so no statistic walks the leaves.
    """

    buffer_size: int
    n_envs: int
    pos: int
    full: bool

    def _init_tags(self, tag_key: str | None) -> None:
        if tag_key is not None and not isinstance(tag_key, str):
            raise ValueError(f"tag_key must be a string (an info key) or None, got {tag_key!r}")
        self.tag_key = tag_key
        self._init_tag_storage()

    def _init_tag_storage(self) -> None:
        # Slot of each leaf's tag (-1: never written); tag value and stored-transition count of each slot.
        self._tag_slot = np.full(self.buffer_size * self.n_envs, -1, dtype=np.int64)
        self._tag_values = np.empty(0, dtype=np.int64)
        self._tag_counts = np.empty(0, dtype=np.int64)
        self._slot_of_tag: dict[int, int] = {}

    @property
    def tagged(self) -> bool:
        """Whether ``add`` reads a tag from each ``info`` (``tag_key`` is set)."""
        return self.tag_key is not None

    @property
    def _n_stored_leaves(self) -> int:
        return (self.buffer_size if self.full else self.pos) * self.n_envs

    def _store_tags(self, pos: int, infos: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """
        Record the tags of the transitions ``add`` writes at ``pos`` (call it with the position ``add``
        wrote to), updating the per-slot counts.

        :return: the leaves written, their previous slots (-1 where none) and their new slots
        """
        tag_key = self.tag_key
        assert tag_key is not None, "only a tagged buffer stores tags"
        leaves = pos * self.n_envs + np.arange(self.n_envs)
        new_slots = np.array([self._slot(tag_of(info.get(tag_key))) for info in infos], dtype=np.int64)
        old_slots = self._tag_slot[leaves]
        self._tag_counts -= np.bincount(old_slots[old_slots >= 0], minlength=len(self._tag_counts))
        self._tag_counts += np.bincount(new_slots, minlength=len(self._tag_counts))
        self._tag_slot[leaves] = new_slots
        return leaves, old_slots, new_slots

    def _slot(self, tag: int) -> int:
        slot = self._slot_of_tag.get(tag)
        if slot is None:
            slot = self._slot_of_tag[tag] = len(self._tag_values)
            self._tag_values = np.append(self._tag_values, tag)
            self._tag_counts = np.append(self._tag_counts, 0)
        return slot

    def tags_at(self, indices: np.ndarray) -> np.ndarray:
        """
        Tags of stored transitions.

        :param indices: flat leaf indices (``pos * n_envs + env``) of stored transitions, e.g. the samples' ``indices``
        :return: int64 array of their tags (``UNKNOWN_TAG`` = -1 where the key was missing or not an integer)
        """
        self._check_tagged()
        return self._tag_values[self._tag_slot[checked_stored_leaves(indices, self._n_stored_leaves)]]

    def tag_buffer_shares(self) -> dict[int, float]:
        """Share of the stored transitions that carry each tag, for every tag stored (shares sum to 1)."""
        self._check_tagged()
        n_stored = self._n_stored_leaves
        present = self._tag_counts > 0
        return dict(
            zip(self._tag_values[present].tolist(), (self._tag_counts[present] / n_stored).tolist(), strict=True)
        )

    def _check_tagged(self) -> None:
        if not self.tagged:
            raise ValueError(f"this {type(self).__name__} has tag_key=None: pass tag_key to store tags")


class TaggedReplayBufferSamples(NamedTuple):
    """
    ``ReplayBufferSamples`` (same fields, same order) plus the flat leaf ``indices`` (``pos * n_envs + env``)
    of the sampled transitions, to look their tags up with ``tags_at``.
    """

    observations: th.Tensor
    actions: th.Tensor
    next_observations: th.Tensor
    dones: th.Tensor
    rewards: th.Tensor
    discounts: th.Tensor | None
    indices: np.ndarray


class TaggedReplayBuffer(ReplayTagsMixin, ReplayBuffer):
    """
    SB3's uniform ``ReplayBuffer``, unchanged, that also stores an integer tag per transition, read from
    ``info[tag_key]`` at ``add`` (see ``sb3_per.replay_tags`` for what becomes -1), so that uniform replay
    reports the same per-tag figures as the prioritized buffers.

    ``sample`` draws exactly what ``ReplayBuffer.sample`` draws, with the same calls to NumPy's global
    generator, so a seeded run samples the same batches; the samples also carry their flat ``indices``.

    :param buffer_size: Max number of elements in the buffer
    :param observation_space: Observation space
    :param action_space: Action space
    :param device: PyTorch device
    :param n_envs: Number of parallel environments
    :param optimize_memory_usage: Memory efficient variant of SB3's buffer
    :param handle_timeout_termination: Handle timeout termination (due to timelimit)
        separately and treat the task as infinite horizon task (SB3 issue #284)
    :param tag_key: The ``info`` key whose integer value tags each transition (required: None raises ``ValueError``)
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
    ):
        if not isinstance(tag_key, str):
            raise ValueError(
                f"TaggedReplayBuffer needs tag_key, the info key to tag transitions by (e.g. "
                f"replay_buffer_kwargs=dict(tag_key='regime')), got {tag_key!r}"
            )
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            device=device,
            n_envs=n_envs,
            optimize_memory_usage=optimize_memory_usage,
            handle_timeout_termination=handle_timeout_termination,
        )
        self._init_tags(tag_key)

    def reset(self) -> None:
        super().reset()
        self._init_tag_storage()

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one step of every env, as SB3's ``ReplayBuffer.add``, and the tag of each."""
        pos = self.pos
        super().add(obs, next_obs, action, reward, done, infos)
        self._store_tags(pos, infos)

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> TaggedReplayBufferSamples:  # type: ignore[override]
        """SB3's ``ReplayBuffer.sample``, returning ``TaggedReplayBufferSamples``."""
        return super().sample(batch_size, env=env)  # type: ignore[return-value]

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> TaggedReplayBufferSamples:  # type: ignore[override]
        # SB3's ReplayBuffer._get_samples (same calls to the global generator, same arithmetic), keeping
        # the env indices it draws to return the flat indices.
        # Sample randomly the env idx
        env_indices = np.random.randint(0, high=self.n_envs, size=(len(batch_inds),))  # noqa: NPY002
        return self._samples_at(batch_inds, env_indices, env)

    def _samples_at(
        self, batch_inds: np.ndarray, env_indices: np.ndarray, env: VecNormalize | None
    ) -> TaggedReplayBufferSamples:
        """The transitions at positions ``batch_inds`` of envs ``env_indices``, as SB3's ``_get_samples`` reads them."""
        if self.optimize_memory_usage:
            next_obs = self._normalize_obs(self.observations[(batch_inds + 1) % self.buffer_size, env_indices, :], env)
        else:
            next_obs = self._normalize_obs(self.next_observations[batch_inds, env_indices, :], env)

        data = (
            self._normalize_obs(self.observations[batch_inds, env_indices, :], env),
            self.actions[batch_inds, env_indices, :],
            next_obs,
            # Only use dones that are not due to timeouts
            # deactivated by default (timeouts is initialized as an array of False)
            (self.dones[batch_inds, env_indices] * (1 - self.timeouts[batch_inds, env_indices])).reshape(-1, 1),
            self._normalize_reward(self.rewards[batch_inds, env_indices].reshape(-1, 1), env),
        )
        indices = batch_inds.astype(np.int64) * self.n_envs + env_indices
        observations, actions, next_observations, dones, rewards = map(self.to_torch, data)
        return TaggedReplayBufferSamples(
            observations, actions, next_observations, dones, rewards, discounts=None, indices=indices
        )


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number (a ``bool`` is not)."""
    return isinstance(value, Real) and not isinstance(value, bool) and bool(np.isfinite(float(value)))


def is_sampling_weight(value: Any) -> bool:
    """Whether ``value`` is a finite real number > 0 (a ``bool`` is not)."""
    return is_finite_number(value) and float(value) > 0


def checked_tag_weights(tag_weights: Mapping[int, float] | None) -> dict[int, float]:
    """
    ``tag_weights`` as a dict of int tags to float weights, or ``ValueError`` naming a bad tag or weight.

    :param tag_weights: sampling weight (finite, > 0) of each tag; None: no weights (every tag weighs 1)
    """
    if tag_weights is None:
        return {}
    if not isinstance(tag_weights, Mapping):
        raise ValueError(f"tag_weights must be a mapping of tag -> weight, e.g. {{1: 1.5}}, got {tag_weights!r}")
    checked: dict[int, float] = {}
    for tag, weight in tag_weights.items():
        if not isinstance(tag, Integral) or tag_of(tag) != tag:  # tag_of also refuses a bool
            raise ValueError(f"tag_weights keys must be integer tags, got {tag!r}")
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
        if self._weights.total <= 0.0:
            raise ValueError("cannot sample from an empty TagWeightedReplayBuffer: add transitions first")
        leaves = self._weights.find(np.random.uniform(0.0, self._weights.total, size=batch_size))  # noqa: NPY002
        return self._samples_at(leaves // self.n_envs, leaves % self.n_envs, env)
