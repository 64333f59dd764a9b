"""
Integer tags on stored transitions (e.g. a market regime read from each step's ``info``), a uniform
SB3 replay buffer that carries them, and the priority mass of each tag in a prioritized one.

A tag is read from ``info[tag_key]`` when a transition is added. A missing key, a value that is not an
integer (a float, a string, a 0-d array, ``None``) or an integer outside int64 stores ``UNKNOWN_TAG``
(-1), so that data without labels (real prices) never fails. A ``bool`` is not taken as an integer
either: ``True == 1`` would silently merge a flag with tag 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import VecNormalize

from sb3_per.checks import check_memory_optimization, check_storage_arguments

UNKNOWN_TAG = -1
#: The most distinct tags a buffer stores at once: each has a slot, and the telemetry logs keys per tag. Past it, a new
#: tag takes the slot of a tag none of whose transitions is stored any more.
#: A tag that changes at every step (an episode counter) is not what tags are for, and is refused at this bound.
MAX_TAGS = 256
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
    def n_tag_slots(self) -> int:
        """The number of tag slots: distinct tags stored since the buffer was made (or reset), up to ``MAX_TAGS``, a
        slot of a tag no longer stored being taken over by a new one after that."""
        return len(self._tag_values)

    @property
    def tagged(self) -> bool:
        """Whether ``add`` reads a tag from each ``info`` (``tag_key`` is set)."""
        return self.tag_key is not None

    @property
    def _n_stored_leaves(self) -> int:
        return (self.buffer_size if self.full else self.pos) * self.n_envs

    def _check_infos(self, infos: Sequence[dict[str, Any]]) -> None:
        """
        Raise ``ValueError`` before ``add`` stores anything if ``infos`` is not one dict per env, or if its tags
        would take the buffer past ``MAX_TAGS`` distinct tags.
        """
        if len(infos) != self.n_envs or not all(isinstance(info, dict) for info in infos):
            raise ValueError(f"add needs one info dict per env ({self.n_envs}), got {infos!r}")
        tag_key = self.tag_key
        if tag_key is None:
            return
        tags = {tag_of(info.get(tag_key)) for info in infos}
        new_tags = tags - self._slot_of_tag.keys()
        if len(new_tags) > len(self._free_slots(tags)):
            stored = int((self._tag_counts > 0).sum())
            raise ValueError(
                f"info[{tag_key!r}] = {sorted(new_tags)[0]} would be tag number {stored + 1} stored in this buffer at "
                f"once, past MAX_TAGS = {MAX_TAGS}: tags are for a few groups of transitions (e.g. regimes), not for "
                "a value that changes at every step"
            )

    def _store_tags(self, pos: int, infos: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """
        Record the tags of the transitions ``add`` writes at ``pos`` (call it with the position ``add``
        wrote to), updating the per-slot counts.

        :return: the leaves written, their previous slots (-1 where none) and their new slots
        """
        tag_key = self.tag_key
        assert tag_key is not None, "only a tagged buffer stores tags"
        leaves = pos * self.n_envs + np.arange(self.n_envs)
        tags = [tag_of(info.get(tag_key)) for info in infos]
        for tag in dict.fromkeys(tags):  # each new tag once, in order
            if tag not in self._slot_of_tag:
                self._assign_slot(tag, set(tags))
        new_slots = np.array([self._slot_of_tag[tag] for tag in tags], dtype=np.int64)
        old_slots = self._tag_slot[leaves]
        self._tag_counts -= np.bincount(old_slots[old_slots >= 0], minlength=len(self._tag_counts))
        self._tag_counts += np.bincount(new_slots, minlength=len(self._tag_counts))
        self._tag_slot[leaves] = new_slots
        return leaves, old_slots, new_slots

    def _free_slots(self, keep: set[int]) -> list[int]:
        """
        The slots a new tag may take: new ones up to ``MAX_TAGS``, then those of tags no longer stored (none of whose
        transitions is left), except the slots of the tags in ``keep`` (an ``add``'s own tags).
        """
        unused = [
            slot for slot in np.flatnonzero(self._tag_counts == 0).tolist() if int(self._tag_values[slot]) not in keep
        ]
        return list(range(len(self._tag_values), MAX_TAGS)) + unused

    def _assign_slot(self, tag: int, keep: set[int]) -> None:
        """Give ``tag`` a slot: a new one up to ``MAX_TAGS``, then the slot of a tag no longer stored, freed."""
        slot = self._free_slots(keep)[0]
        if slot == len(self._tag_values):
            self._tag_values = np.append(self._tag_values, tag)
            self._tag_counts = np.append(self._tag_counts, 0)
        else:
            del self._slot_of_tag[int(self._tag_values[slot])]
            self._tag_values[slot] = tag
            self._freed_slot(slot)
        self._slot_of_tag[tag] = slot

    def _freed_slot(self, slot: int) -> None:
        """A slot taken over by a new tag (a prioritized buffer clears the slot's priority mass)."""

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
        check_storage_arguments(buffer_size, n_envs, optimize_memory_usage, handle_timeout_termination)
        if isinstance(observation_space, spaces.Dict):
            raise ValueError(
                "TaggedReplayBuffer stores array observations, but observation_space is a Dict: tag a Dict buffer's "
                "transitions with PrioritizedDictReplayBuffer(tag_key=...)"
            )
        check_memory_optimization(optimize_memory_usage, buffer_size, n_envs)
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
        self._check_infos(infos)
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


#: The largest share of the total that rounding may move a tag's priority mass by before it is summed afresh.
DRIFT_TOLERANCE = 1e-10


class TagPriorityMass:
    """
    The priority mass of each tag of a prioritized buffer, as stored in its sum tree: adjusted by the same writes
    that update the tree (O(batch) per write), and summed afresh from the leaves when the buffer rescales or is
    unpickled, so that it cannot drift from the tree.

    :param n_slots: the number of tag slots to start with
    """

    def __init__(self, n_slots: int) -> None:
        self.sums: np.ndarray = np.zeros(n_slots)
        # The sum of the absolute amounts added since the sums were last summed afresh: it bounds their rounding error
        self.adjusted = 0.0

    def grow(self, n_slots: int) -> None:
        """Make room for ``n_slots`` slots (new ones hold no mass)."""
        missing = n_slots - len(self.sums)
        if missing:
            self.sums = np.concatenate([self.sums, np.zeros(missing)])

    def add(self, slots: np.ndarray, amounts: np.ndarray) -> None:
        """Add each amount to its slot's mass."""
        self.sums += np.bincount(slots, weights=amounts, minlength=len(self.sums))
        self.adjusted += float(np.abs(amounts).sum())

    def clear(self, slot: int) -> None:
        """Empty a slot's mass (what rounding left of a tag no longer stored)."""
        self.sums[slot] = 0.0

    def could_drift(self) -> bool:
        """
        Whether the sums' rounding could reach ``DRIFT_TOLERANCE`` of their total: the error of sums adjusted by
        differences is at most float64's epsilon times the absolute amounts added, which priorities spanning many
        orders of magnitude make large against a small total.
        """
        return bool(self.adjusted * np.finfo(np.float64).eps > DRIFT_TOLERANCE * float(np.abs(self.sums).sum()))

    def resum(self, slots: np.ndarray, stored: np.ndarray) -> None:
        """
        Every slot's mass summed afresh.

        :param slots: the slot of each stored leaf (-1 for one not tagged yet: a rescale inside ``add`` comes after
            SB3 stored the step but before its tags are, and those leaves' mass enters their tags with the add itself)
        :param stored: each stored leaf's priority
        """
        tagged = slots >= 0
        self.sums = np.bincount(slots[tagged], weights=stored[tagged], minlength=len(self.sums))
        self.adjusted = 0.0

    def shares(self, tag_values: np.ndarray, present: np.ndarray) -> dict[int, float]:
        """
        :param tag_values: the tag of each slot
        :param present: whether each slot's tag is stored
        :return: each stored tag's share of the mass (empty while there is none)
        """
        # Adjusted by differences, a tag's sum can end a hair below zero once its mass is gone.
        sums = np.maximum(self.sums[present], 0.0)
        total = sums.sum()
        if total <= 0.0:
            return {}
        return dict(zip(tag_values[present].tolist(), (sums / total).tolist(), strict=True))
