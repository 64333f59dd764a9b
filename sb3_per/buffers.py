"""Prioritized experience replay (Schaul et al. 2016: proportional and rank-based) behind SB3's replay buffers."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer
from stable_baselines3.common.type_aliases import TensorDict
from stable_baselines3.common.vec_env import VecNormalize

from sb3_per.rank_heap import RankHeap
from sb3_per.replay_tags import ReplayTagsMixin, checked_stored_leaves, is_finite_number
from sb3_per.sum_tree import SumTree

WEIGHT_NORMALIZATIONS = ("buffer", "batch")
PRIORITIZATIONS = ("proportional", "rank")
INTEGER_KINDS, REAL_KINDS = "iu", "iuf"  # numpy dtype kinds accepted for indices and stamps, and for TD errors
KIND_NAMES = {INTEGER_KINDS: "integers", REAL_KINDS: "real numbers (integer or float, not bool or complex)"}
# Faded priorities are stored as p_i * 2 ** (t_i / h - offset). The tree is rescaled (offset raised) once the
# newest entries are this many doublings above the offset, which bounds stored values at p * 2 ** 64 ...
FADE_RESCALE_DOUBLINGS = 64
# ... and a transition cannot fade more than buffer_size / h doublings before it is overwritten: at most this
# many, so that stored values (and their reciprocals in the inverse tree) stay far inside float64's range.
MAX_FADE_DOUBLINGS = 512


class PrioritizedReplayBufferSamples(NamedTuple):
    """
    ``ReplayBufferSamples`` (same fields, same order, so unmodified SB3 code keeps working)
    plus what prioritized replay adds.

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


class PrioritizedBufferMixin(ReplayTagsMixin):
    """
    Prioritized sampling, importance-sampling weights and priority updates, for an SB3 replay buffer
    whose storage is ``(buffer_size, n_envs, ...)`` arrays (``ReplayBuffer``) or dicts of them
    (``DictReplayBuffer``). ``PrioritizedReplayBuffer`` and ``PrioritizedDictReplayBuffer`` are this mixin
    in front of those two SB3 classes; everything that decides what is sampled lives here, once.

    Each stored transition is a leaf ``pos * n_envs + env``, so every env's data is sampled when
    ``n_envs > 1``. See ``PrioritizedReplayBuffer`` for the behaviour and the parameters.

    With a ``tag_key``, the priority mass of each tag is kept in a small array adjusted by the same writes
    that update the tree (O(batch) per write), and summed afresh from the leaves when the buffer is unpickled.
    """

    # `sample` calls without any `update_priorities` before the buffer warns that priorities are stale
    SAMPLES_BEFORE_NO_UPDATE_WARNING = 100
    # Whether `update_priorities` sets priorities from the TD errors it is given (LAP and LA3P need it)
    priorities_follow_td_errors = True
    # What the subclass's `sample` returns
    samples_class: Any

    # Set by SB3's buffer constructor
    buffer_size: int
    n_envs: int
    pos: int
    full: bool
    optimize_memory_usage: bool
    # An array in ReplayBuffer, a dict of arrays in DictReplayBuffer (which overrides its base's declaration).
    # mypy requires a mixin's declaration to equal every later base's: only Any equals both.
    observations: Any
    next_observations: Any
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    timeouts: np.ndarray
    # SB3's buffer methods (their arguments left open: a Callable cannot say which have defaults)
    size: Callable[[], int]
    to_torch: Callable[..., th.Tensor]
    _normalize_obs: Callable[..., np.ndarray | dict[str, np.ndarray]]
    _normalize_reward: Callable[..., np.ndarray]

    def _init_prioritization(
        self,
        alpha: float,
        beta_start: float,
        beta_end: float,
        beta_anneal_steps: int | str,
        epsilon: float,
        weight_normalization: str,
        n_steps: int,
        gamma: float,
        prioritization: str,
        tag_key: str | None,
        inverse_sampling: bool,
        priority_half_life: float | None,
    ) -> None:
        """Check and keep the prioritization parameters (after SB3's constructor made the storage)."""
        check_per_parameters(alpha, beta_start, beta_end, beta_anneal_steps, epsilon, weight_normalization)
        if prioritization not in PRIORITIZATIONS:
            raise ValueError(f"prioritization must be one of {PRIORITIZATIONS}, got {prioritization!r}")
        if prioritization == "rank" and self.optimize_memory_usage:
            raise ValueError(
                "prioritization='rank' does not support optimize_memory_usage=True: every stored transition has a "
                "rank, so the one whose next observation was overwritten could be sampled"
            )
        if not isinstance(inverse_sampling, (bool, np.bool_)):
            raise ValueError(f"inverse_sampling must be a bool, got {inverse_sampling!r}")
        if inverse_sampling and prioritization == "rank":
            raise ValueError(
                "inverse_sampling=True needs prioritization='proportional': inverse sampling is in proportion to "
                "1 / priority, which rank-based prioritization does not sample by"
            )
        self.inverse_sampling = bool(inverse_sampling)
        check_priority_half_life(priority_half_life, self.buffer_size)
        fade = 0.0 if priority_half_life is None else self.buffer_size / priority_half_life
        if inverse_sampling and not np.isfinite(self.buffer_size * self.n_envs * 2.0**fade / epsilon**alpha):
            raise ValueError(
                f"epsilon ** alpha = {epsilon**alpha!r} is so small that the inverse tree's total, over 1 / priority, "
                "could overflow float64: raise epsilon"
            )
        if priority_half_life is not None and prioritization == "rank":
            raise ValueError(
                f"priority_half_life={priority_half_life!r} needs prioritization='proportional': fading every "
                "priority changes no rank, and rank-based sampling does not fade"
            )
        self.priority_half_life = None if priority_half_life is None else float(priority_half_life)
        self.alpha = float(alpha)
        self.beta_start = float(beta_start)
        self.beta_end = float(beta_end)
        self.beta_anneal_steps: int | str = "auto" if beta_anneal_steps == "auto" else int(beta_anneal_steps)
        # Training progress in [0, 1] for beta_anneal_steps="auto", set by the algorithm (None: not yet)
        self.beta_progress: float | None = None
        self.epsilon = float(epsilon)
        self.weight_normalization = weight_normalization
        self.n_steps = int(n_steps)
        self.gamma = float(gamma)
        self.prioritization = prioritization
        self._init_tags(tag_key)
        self._init_priorities()

    def _init_priorities(self) -> None:
        n_leaves = self.buffer_size * self.n_envs
        # Every priority (raised to alpha) is kept in the sum tree: proportional sampling descends it, and it
        # gives the mean, minimum and any leaf's priority in O(1) for both kinds of prioritization.
        self.tree = SumTree(n_leaves)
        # Rank-based prioritization orders the leaves by priority in a heap and samples by rank.
        self.ranks = RankHeap(n_leaves, self.alpha) if self.prioritization == "rank" else None
        # Inverse sampling (LA3P's actor batches) descends a second sum tree, over 1 / priority, written with
        # the same leaves as the first on every write, so that it is never stale.
        self.inverse_tree = SumTree(n_leaves) if self.inverse_sampling else None
        # Largest priority given so far (already raised to alpha): what new transitions enter with.
        self.max_priority = 1.0
        # How far above a written priority the tree's total can get: every leaf at it, each scaled up by the
        # largest fade exponent a write can see (the rescale bound, plus one add's step).
        fade = 0.0 if self.priority_half_life is None else FADE_RESCALE_DOUBLINGS + 1.0 / self.priority_half_life
        self._priority_headroom = n_leaves * 2.0**fade
        self._largest_priority = np.finfo(np.float64).max / self._priority_headroom
        # Fading clock: `add` calls so far, and the doublings taken out of the stored priorities by rescales.
        self.n_add_calls = 0
        self._fade_offset = 0
        # Per-leaf write counter, and its value when the leaf was last sampled (-1: not since created),
        # to skip updates for transitions overwritten after they were sampled.
        self._write_count = np.zeros(n_leaves, dtype=np.int64)
        self._write_count_at_sample = np.full(n_leaves, -1, dtype=np.int64)
        self.n_sample_calls = 0
        self.n_priority_updates = 0
        self._warned_no_updates = False
        # Priority mass (as stored in the tree) of each tag slot, see ReplayTagsMixin
        self._tag_priority_sums: np.ndarray = np.zeros(len(self._tag_values))

    @property
    def beta(self) -> float:
        """Importance-sampling exponent the next ``sample`` call will use."""
        if isinstance(self.beta_anneal_steps, int):
            progress = min(1.0, self.n_sample_calls / self.beta_anneal_steps)
        else:  # "auto"
            if self.beta_progress is None:
                raise ValueError(
                    f"{type(self).__name__} has beta_anneal_steps='auto', so beta follows the training progress, "
                    "which nothing has set: train with sb3_per's algorithms (sb3_per.SAC, TD3, DDPG or DQN), which "
                    "call set_beta_progress at each training call, or give beta_anneal_steps a number of sample calls"
                )
            progress = self.beta_progress
        return self.beta_start + progress * (self.beta_end - self.beta_start)

    def set_beta_progress(self, progress: float) -> None:
        """
        Set how far beta has annealed, for ``beta_anneal_steps="auto"``: beta is then
        ``beta_start + progress * (beta_end - beta_start)`` until the next call.

        :param progress: training progress in [0, 1] (sb3_per's algorithms pass ``1 - _current_progress_remaining``)
        """
        if self.beta_anneal_steps != "auto":
            raise ValueError(
                f"set_beta_progress is for beta_anneal_steps='auto'; this buffer anneals beta over "
                f"beta_anneal_steps={self.beta_anneal_steps} sample calls"
            )
        if isinstance(progress, bool) or not isinstance(progress, Real) or not 0.0 <= progress <= 1.0:
            raise ValueError(f"progress must be a number in [0, 1], got {progress!r}")
        self.beta_progress = float(progress)

    @property
    def n_transitions(self) -> int:
        """Number of transitions stored, over all envs."""
        return self.size() * self.n_envs

    @property
    def mean_priority(self) -> float:
        """Mean (effective) priority, raised to alpha, of the stored transitions; ``nan`` when empty."""
        if not self.n_transitions:
            return float("nan")
        if self.priority_half_life is None:
            return self.tree.total / self.n_transitions
        return self.tree.total * 2.0**-self._fade_exponent / self.n_transitions

    def priorities_at(self, indices: np.ndarray) -> np.ndarray:
        """
        Effective priorities (raised to alpha, faded if ``priority_half_life`` is set) of stored transitions.

        :param indices: flat leaf indices (``pos * n_envs + env``) of stored transitions
        """
        leaves = checked_stored_leaves(indices, self.n_transitions)
        if self.priority_half_life is None:
            return self.tree[leaves]
        return self.tree[leaves] * 2.0**-self._fade_exponent

    @property
    def _fade_exponent(self) -> float:
        """Doublings by which a priority written now is stored above its value: ``t / h - offset``."""
        half_life = self.priority_half_life
        assert half_life is not None, "only a buffer with priority_half_life fades"
        return self.n_add_calls / half_life - self._fade_offset

    def _stored(self, priorities: np.ndarray) -> np.ndarray:
        """What the tree stores for priorities written now: themselves, or scaled up by the fading clock."""
        if self.priority_half_life is None:
            return priorities
        return priorities * 2.0**self._fade_exponent

    def _advance_fading_clock(self) -> None:
        """Count one ``add`` call; past the bound, take whole doublings out of every stored priority."""
        self.n_add_calls += 1
        if self.priority_half_life is None or self._fade_exponent <= FADE_RESCALE_DOUBLINGS:
            return
        doublings = int(self._fade_exponent)
        # A power of two: the tree (and the inverse tree) stay exact sums of their leaves.
        self.tree.scale(2.0**-doublings)
        if self.inverse_tree is not None:
            self.inverse_tree.scale(2.0**doublings)
        self._fade_offset += doublings
        if self.tagged:
            self._resum_tag_priorities()

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        self._init_tag_storage()
        self._init_priorities()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.tagged:
            self._resum_tag_priorities()

    def _resum_tag_priorities(self) -> None:
        """Per-tag priority sums computed afresh from the leaves, so that they cannot drift from the tree."""
        n_stored = self._n_stored_leaves
        slots = self._tag_slot[:n_stored]
        # A rescale inside `add` comes after SB3 stored the step but before its tags are: those leaves are
        # still untagged (-1) and their mass enters their tags' sums with the add itself.
        tagged = slots >= 0
        self._tag_priority_sums = np.bincount(
            slots[tagged], weights=self.tree[np.arange(n_stored)][tagged], minlength=len(self._tag_values)
        )

    def tag_priority_shares(self) -> dict[int, float]:
        """
        Share of the total (effective) priority mass held by each tag, for every tag stored (shares sum
        to 1; empty while the buffer is). With rank-based prioritization the mass is that of the priorities
        ranked, not of the sampling probabilities.
        """
        self._check_tagged()
        present = self._tag_counts > 0
        # Adjusted by differences, a tag's sum can end a hair below zero once its mass is gone.
        sums = np.maximum(self._tag_priority_sums[present], 0.0)
        total = sums.sum()
        if total <= 0.0:
            return {}
        return dict(zip(self._tag_values[present].tolist(), (sums / total).tolist(), strict=True))

    def add(
        self, obs: Any, next_obs: Any, action: np.ndarray, reward: np.ndarray, done: np.ndarray, infos: Any
    ) -> None:
        """
        Store one step of every env (see SB3's ``ReplayBuffer.add``), at its entry priority: the largest priority
        seen so far (``RewardPrioritizedReplayBuffer``: its reward's).
        """
        entry_priorities = self._entry_priorities(reward)
        pos = self.pos
        super().add(obs, next_obs, action, reward, done, infos)  # type: ignore[misc]
        self._advance_fading_clock()
        leaves = pos * self.n_envs + np.arange(self.n_envs)
        # Undecayed: a new transition enters at its entry priority, faded or not.
        priorities = self._stored(entry_priorities)
        self.max_priority = max(self.max_priority, float(entry_priorities.max()))
        if self.tagged:
            _, old_slots, new_slots = self._store_tags(pos, infos)
            previous = self._write_leaves(leaves, priorities)
            # The overwritten transitions' mass leaves their tags, the new ones' enters theirs.
            self._grow_tag_priority_sums()
            had_tag = old_slots >= 0
            self._add_to_tag_sums(old_slots[had_tag], -previous[had_tag])
            self._add_to_tag_sums(new_slots, priorities)
        else:
            self._write_leaves(leaves, priorities)
        self._write_count[leaves] += 1
        if self.optimize_memory_usage and self.full:
            # `add` has just overwritten the observation of the slot now at `self.pos`, so that
            # transition is invalid until rewritten: SB3 never samples it, neither do we.
            invalid = self.pos * self.n_envs + np.arange(self.n_envs)
            self._set_priorities(invalid, np.zeros(self.n_envs))
            self._write_count[invalid] += 1

    def _entry_priorities(self, reward: np.ndarray) -> np.ndarray:
        """
        The priorities (raised to alpha, not faded) that ``add`` stores one step of every env at: the largest seen
        so far, so that a new transition is likely replayed at least once. Checks come before ``add`` stores.

        :param reward: the step's rewards, one per env
        """
        return np.full(self.n_envs, self.max_priority)

    def _write_leaves(self, leaves: np.ndarray, priorities: np.ndarray) -> np.ndarray:
        """Write priorities into every structure that holds them; return what the tree held before."""
        # in range and finite by construction: both callers check or build them
        previous = self.tree.update(leaves, priorities, validate=False)
        if self.ranks is not None:
            self.ranks.update(leaves, priorities, validate=False)
        if self.inverse_tree is not None:
            self.inverse_tree.update(leaves, _reciprocals(priorities), validate=False)
        return previous

    def _set_priorities(self, leaves: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities for stored transitions (whose tags stay), keeping the per-tag sums in step."""
        previous = self._write_leaves(leaves, priorities)
        if self.tagged:
            self._add_to_tag_sums(self._tag_slot[leaves], priorities - previous)

    def _add_to_tag_sums(self, slots: np.ndarray, amounts: np.ndarray) -> None:
        self._tag_priority_sums += np.bincount(slots, weights=amounts, minlength=len(self._tag_priority_sums))

    def _grow_tag_priority_sums(self) -> None:
        missing = len(self._tag_values) - len(self._tag_priority_sums)
        if missing:
            self._tag_priority_sums = np.concatenate([self._tag_priority_sums, np.zeros(missing)])

    def sample(self, batch_size: int, env: VecNormalize | None = None, inverse: bool = False) -> Any:
        """
        Sample a batch in proportion to priority (or rank), with importance-sampling weights.

        :param batch_size: Number of transitions to sample
        :param env: associated VecEnv to normalize the observations/rewards when sampling
        :param inverse: sample in proportion to ``1 / priority`` (effective priority, raised to alpha) instead,
            as LA3P's actor batches; needs ``inverse_sampling=True``. The weights are then ones (LA3P uses
            none), and the call does not count towards beta's annealing
        :return: the samples (``samples_class``), their IS weights, flat indices and write stamps
        """
        self._check_batch_size(batch_size)
        if not isinstance(inverse, (bool, np.bool_)):
            raise ValueError(f"inverse must be a bool, got {inverse!r}")
        if inverse:
            return self._sample_inverse(batch_size, env)
        beta = self.beta  # first, as it can raise
        self._warn_if_priorities_never_updated()
        # NumPy's global generator, as SB3's buffers use, so that `set_random_seed` seeds sampling.
        uniforms = np.random.random_sample(batch_size)  # noqa: NPY002
        leaves, probabilities, smallest = self._stratified_leaves(uniforms)
        if self.weight_normalization == "batch":
            smallest = probabilities.min()
        # (N P(i))^-beta / max_j (N P(j))^-beta = (P(i) / P_min)^-beta: N cancels out.
        weights = (probabilities / smallest) ** -beta
        self.n_sample_calls += 1
        return self._samples_at(leaves, weights, env)

    def _sample_inverse(self, batch_size: int, env: VecNormalize | None) -> Any:
        """What ``sample(batch_size, env, inverse=True)`` returns (``batch_size`` checked): by ``1 / priority``."""
        if self.inverse_tree is None:
            raise ValueError(f"sample(inverse=True) needs a {type(self).__name__} made with inverse_sampling=True")
        self._warn_if_priorities_never_updated()
        uniforms = np.random.random_sample(batch_size)  # noqa: NPY002 (the global generator, as `sample`)
        return self._samples_at(_stratified_tree_leaves(self.inverse_tree, uniforms), np.ones(batch_size), env)

    def sample_uniform(self, batch_size: int, env: VecNormalize | None = None) -> Any:
        """
        Sample a batch uniformly, whatever the priorities (LA3P's shared batch): every valid stored transition
        equally likely, with replacement, from NumPy's global generator as SB3's buffers do. Priorities are
        neither read nor changed, and the call does not count towards beta's annealing.

        :param batch_size: Number of transitions to sample
        :param env: associated VecEnv to normalize the observations/rewards when sampling
        :return: the samples (``samples_class``), unit weights, flat indices and write stamps
        """
        self._check_batch_size(batch_size)
        n_leaves = self.n_transitions
        if self.optimize_memory_usage and self.full:
            # The slot at `pos` lost its next observation: draw among the others, as SB3's buffer does.
            offsets = np.random.randint(0, n_leaves - self.n_envs, size=batch_size)  # noqa: NPY002
            leaves = (offsets + (self.pos + 1) * self.n_envs) % n_leaves
        else:
            leaves = np.random.randint(0, n_leaves, size=batch_size)  # noqa: NPY002
        return self._samples_at(leaves, np.ones(batch_size), env)

    def _samples_at(self, leaves: np.ndarray, weights: np.ndarray, env: VecNormalize | None) -> Any:
        """The batch of the transitions at ``leaves``, with ``weights``, stamped as sampled now."""
        stamps = self._write_count[leaves]
        self._write_count_at_sample[leaves] = stamps
        return self._get_prioritized_samples(leaves, weights, stamps, env)

    def _stratified_leaves(self, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """
        One leaf from each of ``len(uniforms)`` equal-probability segments, each leaf's sampling
        probability (up to a common factor) and the smallest probability of any stored transition (same factor).
        """
        if self.ranks is not None:
            leaves = self.ranks.sample(uniforms)
            return leaves, self.ranks.probabilities(leaves), self.ranks.min_probability
        leaves = _stratified_tree_leaves(self.tree, uniforms)
        return leaves, self.tree[leaves], self.tree.min

    def _check_batch_size(self, batch_size: int) -> None:
        # A batch larger than the buffer is fine: stratified sampling over more segments than leaves
        # samples with replacement, as SB3's uniform buffer does.
        if isinstance(batch_size, bool) or not isinstance(batch_size, Integral) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if self.n_transitions == 0:
            raise ValueError(f"cannot sample from an empty {type(self).__name__}: add transitions first")

    def _warn_if_priorities_never_updated(self) -> None:
        if (
            not self._warned_no_updates
            and self.n_priority_updates == 0
            and self.n_sample_calls >= self.SAMPLES_BEFORE_NO_UPDATE_WARNING
        ):
            self._warned_no_updates = True
            warnings.warn(
                f"{type(self).__name__} has been sampled {self.n_sample_calls} times but its priorities were "
                "never updated, so it samples uniformly among what was added and PER does nothing. Use an "
                "algorithm that calls `update_priorities` after each gradient step: `sb3_per.SAC`, `sb3_per.TD3`, "
                "`sb3_per.DDPG` or `sb3_per.DQN`.",
                UserWarning,
                stacklevel=3,
            )

    def _get_prioritized_samples(
        self, leaves: np.ndarray, weights: np.ndarray, stamps: np.ndarray, env: VecNormalize | None
    ) -> Any:
        # A leaf is `pos * n_envs + env`, so viewing (buffer_size, n_envs, ...) storage as
        # (buffer_size * n_envs, ...) makes each leaf a row. One `take` per array is about twice as fast
        # as SB3's two-index gather, and its result is a fresh array, so torch can adopt it uncopied.
        if self.n_steps > 1:
            next_observations, dones, rewards, discounts = self._n_step_targets(leaves, env)
        else:
            if self.optimize_memory_usage:
                next_leaves = (leaves + self.n_envs) % (self.buffer_size * self.n_envs)
                next_observations = self._rows(self.observations, next_leaves)
            else:
                next_observations = self._rows(self.next_observations, leaves)
            # Only use dones that are not due to timeouts (SB3 issue #284)
            dones = (self._rows(self.dones, leaves) * (1 - self._rows(self.timeouts, leaves))).reshape(-1, 1)
            rewards = self._normalize_reward(self._rows(self.rewards, leaves).reshape(-1, 1), env)
            discounts = None
        return self.samples_class(
            self._observations_to_torch(self._rows(self.observations, leaves), env),
            self._to_torch(self._rows(self.actions, leaves)),
            self._observations_to_torch(next_observations, env),
            self._to_torch(dones),
            self._to_torch(rewards),
            discounts=None if discounts is None else self._to_torch(discounts),
            weights=self._to_torch(weights.astype(np.float32).reshape(-1, 1)),
            indices=leaves,
            stamps=stamps,
        )

    def _to_torch(self, array: np.ndarray) -> th.Tensor:
        return self.to_torch(array, copy=False)

    def _observations_to_torch(
        self, observations: np.ndarray | dict[str, np.ndarray], env: VecNormalize | None
    ) -> th.Tensor | TensorDict:
        normalized = self._normalize_obs(observations, env)
        if isinstance(normalized, dict):
            return {key: self._to_torch(value) for key, value in normalized.items()}
        return self._to_torch(normalized)

    def _n_step_targets(
        self, leaves: np.ndarray, env: VecNormalize | None
    ) -> tuple[np.ndarray | dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """
        Next observations, dones, n-step returns and bootstrap discounts of the transitions at ``leaves``,
        computed as SB3's ``NStepReplayBuffer._get_samples`` does (same arithmetic, same dtypes), but for
        the env each leaf belongs to rather than a random one.
        """
        batch_inds, env_inds = np.divmod(leaves, self.n_envs)
        envs = env_inds[:, None]
        # The newest transition may be followed by the oldest one in the ring: mark it as a truncation
        # while sampling, so that no n-step sum runs across that seam (as SB3 does).
        last_valid = self.pos - 1
        saved_timeouts = self.timeouts[last_valid].copy()
        self.timeouts[last_valid] = np.logical_or(saved_timeouts, np.logical_not(self.dones[last_valid]))
        try:
            steps = np.arange(self.n_steps).reshape(1, -1)
            sequence = (batch_inds[:, None] + steps) % self.buffer_size
            rewards = self._normalize_reward(self.rewards[sequence, envs], env)
            ended = np.logical_or(self.dones[sequence, envs], self.timeouts[sequence, envs])
            last_step = np.where(ended.any(axis=1), ended.argmax(axis=1), self.n_steps - 1)
            mask = steps <= last_step[:, None]
            discounts = self.gamma ** mask.sum(axis=1, keepdims=True).astype(np.float32)
            returns = (rewards * self.gamma ** np.arange(self.n_steps, dtype=np.float32).reshape(1, -1) * mask).sum(
                axis=1, keepdims=True
            )
            last = (batch_inds + last_step) % self.buffer_size
            next_observations = self._rows(self.next_observations, last * self.n_envs + env_inds)
            dones = self.dones[last, env_inds][:, None].astype(np.float32)
            dones = dones * (1.0 - self.timeouts[last, env_inds][:, None].astype(np.float32))
        finally:
            self.timeouts[last_valid] = saved_timeouts
        return next_observations, dones, returns, discounts

    def _rows(self, storage: np.ndarray | dict[str, np.ndarray], leaves: np.ndarray) -> Any:
        """Copy of the entries of ``storage`` (shape (buffer_size, n_envs, ...), or a dict of such) at ``leaves``."""
        if isinstance(storage, dict):
            return {key: self._rows(value, leaves) for key, value in storage.items()}
        return storage.reshape(self.buffer_size * self.n_envs, *storage.shape[2:]).take(leaves, axis=0)

    def update_priorities(
        self, indices: np.ndarray | th.Tensor, td_errors: np.ndarray | th.Tensor, stamps: np.ndarray | None = None
    ) -> None:
        """
        Set the priority of sampled transitions from their TD errors: ``(|td_error| + epsilon) ** alpha``.

        Transitions overwritten by ``add`` since they were sampled are skipped. Bad input raises
        ``ValueError`` and leaves every priority unchanged.

        :param indices: flat indices, as returned in the samples' ``indices``
        :param td_errors: one finite TD error per index (numpy array or torch tensor on any device, any
            shape that flattens to the batch, e.g. (batch_size, 1)); integers or floats, float16 and bfloat16
            tensors being widened to float32
        :param stamps: the samples' ``stamps``: an update is applied only where the leaf's write stamp is
            still the one it had when sampled (exact). Without them, each leaf's stamp at its latest sample
            stands in, which misses an older batch whose slot was overwritten and sampled again since
        """
        checked = self._checked_priority_updates(indices, td_errors, stamps)
        if checked is None:
            return
        leaves, priorities = checked
        if leaves.size:
            self._set_priorities(leaves, self._stored(priorities))
            # from the updates applied only: a stale one must not raise what new transitions enter with
            self.max_priority = max(self.max_priority, float(priorities.max()))
        self.n_priority_updates += 1

    def _priorities_of(self, values: np.ndarray, name: str) -> np.ndarray:
        """
        ``(|value| + epsilon) ** alpha`` of each of a non-empty array of values (TD errors, or rewards).

        :raises ValueError: naming ``name``, if a value is not finite or a priority is too large for the sum tree
        """
        magnitudes = np.abs(values, dtype=np.float64)
        # Checked on the values, not the priorities: with alpha=0, NaN ** 0 = 1. NaN propagates through max.
        if not np.isfinite(magnitudes.max()):
            raise ValueError(f"{name} must be finite, got {values[~np.isfinite(magnitudes)][0]}")
        priorities = (magnitudes + self.epsilon) ** self.alpha
        top = priorities.max()
        if not top <= self._largest_priority:  # also catches a priority that overflowed to inf
            raise ValueError(
                f"priority {top} (raised to alpha) from {name} is too large for the sum tree: with all "
                f"{self.tree.capacity} transitions at it (and faded ones at their largest scale) its total "
                "would overflow float64"
            )
        return priorities

    def _checked_priority_updates(
        self, indices: np.ndarray | th.Tensor, td_errors: np.ndarray | th.Tensor, stamps: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """
        ``update_priorities``'s checks: the leaves to update (those not overwritten since sampled) and their new
        priorities ``(|td_error| + epsilon) ** alpha``, or ``None`` for an empty batch; bad input raises
        ``ValueError`` (see ``update_priorities``).
        """
        # Few numpy calls on purpose: at batch 256 each costs about as much as its arithmetic.
        leaves = _as_flat_numpy(indices, "indices", INTEGER_KINDS)
        errors = _as_flat_numpy(td_errors, "td_errors", REAL_KINDS)
        if leaves.shape[0] != errors.shape[0]:
            raise ValueError(f"td_errors has {errors.shape[0]} values but indices has {leaves.shape[0]}")
        if stamps is not None:
            stamps = _as_flat_numpy(stamps, "stamps", INTEGER_KINDS)
            if stamps.shape[0] != leaves.shape[0]:
                raise ValueError(f"stamps has {stamps.shape[0]} values but indices has {leaves.shape[0]}")
        if leaves.size == 0:
            return None
        leaves = checked_stored_leaves(leaves, self.n_transitions)
        priorities = self._priorities_of(errors, "td_errors")
        if stamps is None:
            sampled_stamps = self._write_count_at_sample[leaves]
            fresh = (sampled_stamps == self._write_count[leaves]) | (sampled_stamps < 0)
        else:
            fresh = self._write_count[leaves] == stamps
        if self.optimize_memory_usage and self.full:
            fresh &= leaves // self.n_envs != self.pos  # the slot whose next observation is gone stays at zero
        if not fresh.all():
            return leaves[fresh], priorities[fresh]
        return leaves, priorities


class PrioritizedReplayBuffer(PrioritizedBufferMixin, ReplayBuffer):
    """
    Replay buffer that samples transitions in proportion to ``priority ** alpha`` (or to
    ``(1 / rank) ** alpha``) and returns importance-sampling weights, as in "Prioritized Experience Replay"
    (Schaul et al. 2016, https://arxiv.org/abs/1511.05952).

    Storage is SB3's ``ReplayBuffer``; ``PrioritizedBufferMixin`` adds a sum tree with one leaf per stored
    transition (``pos * n_envs + env``, so every env's data is sampled when ``n_envs > 1``).
    For Dict observation spaces, use ``PrioritizedDictReplayBuffer``.

    - New transitions enter at the largest priority seen so far, so each is likely replayed once.
    - ``sample`` draws one transition from each of ``batch_size`` equal-probability segments (stratified
      sampling), with NumPy's global random generator as SB3 does, so ``set_random_seed`` makes it
      reproducible. With ``prioritization="proportional"`` (the default), ``P(i)`` is proportional to
      ``priority ** alpha`` (a sum tree); with ``prioritization="rank"`` (Schaul et al. 2016, section 3.3),
      ``P(i)`` is proportional to ``(1 / rank(i)) ** alpha``, rank 1 being the largest priority (a binary heap
      whose array order approximates the ranks, re-sorted periodically, as in the paper). A batch larger
      than what the buffer holds (even than ``buffer_size``) samples with replacement, as SB3's uniform buffer
      does (SAC's default ``learning_starts=100`` is below its default ``batch_size=256``).
    - Weights are ``w_i = (N * P(i)) ** -beta`` divided by the largest weight, so they only scale
      updates down. ``beta`` anneals linearly from ``beta_start`` to ``beta_end`` over
      ``beta_anneal_steps`` calls to ``sample``, or, with ``beta_anneal_steps="auto"``, with the training
      progress that sb3_per's algorithms give ``set_beta_progress`` at each training call, so that beta
      reaches ``beta_end`` at the end of ``learn``.
    - ``update_priorities(indices, td_errors, stamps)`` sets priority ``(|td_error| + epsilon) ** alpha``. An
      update for a transition that ``add`` has overwritten since it was sampled is skipped: its error
      belongs to data that is gone (ray #6534). Each leaf counts the times ``add`` wrote it, and the samples
      carry that count (``stamps``); given back, they make the check exact. Without them, the count at the
      slot's latest sample stands in, and an update from an older batch whose slot has been overwritten
      *and sampled again* since is not recognised as stale.

    An algorithm must call ``update_priorities`` after its gradient steps (``sb3_per.SAC`` does);
    with one that never does, every transition keeps its entry priority and the buffer warns.

    :param buffer_size: Max number of elements in the buffer
    :param observation_space: Observation space
    :param action_space: Action space
    :param device: PyTorch device
    :param n_envs: Number of parallel environments
    :param optimize_memory_usage: Memory efficient variant of SB3's buffer; the one slot whose next
        observation has been overwritten is given priority zero, so it is never sampled
    :param handle_timeout_termination: Handle timeout termination (due to timelimit)
        separately and treat the task as infinite horizon task (SB3 issue #284)
    :param alpha: How much prioritization is used (0: uniform, 1: fully proportional to priority or 1 / rank)
    :param beta_start: Importance-sampling exponent at the first ``sample`` call
    :param beta_end: Importance-sampling exponent reached after ``beta_anneal_steps`` calls
    :param beta_anneal_steps: Number of ``sample`` calls over which beta goes from start to end, or
        ``"auto"``: beta follows ``set_beta_progress`` (sampling before it is ever called raises ``ValueError``)
    :param epsilon: Added to ``|td_error|`` so that no transition's priority is ever zero
    :param weight_normalization: ``"buffer"`` divides the weights by the largest weight any stored
        transition could get (from the smallest sampling probability, as in the paper); ``"batch"`` by the
        largest weight in the sampled batch
    :param n_steps: With ``n_steps > 1``, samples carry n-step returns and their ``discounts``, computed
        as SB3's ``NStepReplayBuffer`` does (episode ends and timeouts cut the sum). SB3 ignores an
        algorithm's ``n_steps`` when a custom ``replay_buffer_class`` is given: pass it here, through
        ``replay_buffer_kwargs``
    :param gamma: Discount factor of the n-step returns (use the algorithm's ``gamma``)
    :param prioritization: ``"proportional"`` (default) or ``"rank"``: what the sampling probability
        is proportional to, ``priority ** alpha`` or ``(1 / rank) ** alpha``
    :param tag_key: ``info`` key whose integer value tags each added transition (e.g. ``"regime"``), for
        ``tags_at``, ``tag_buffer_shares`` and ``tag_priority_shares``; a missing key or a non-integer value
        (``bool`` included) is tag -1. None (default): no tags
    :param inverse_sampling: keep a second sum tree over ``1 / priority`` (proportional only), in step with the
        first on every write, for ``sample(batch_size, inverse=True)`` (LA3P's actor batches)
    :param priority_half_life: recency-faded priorities (proportional only): with half-life ``h``, counted in
        ``add`` calls (one call = one step of all envs), a transition whose priority ``p_i`` was written
        (by ``add`` or ``update_priorities``) at add-count ``t_i`` has at add-count ``t`` the effective priority
        ``p_i * 2 ** (-(t - t_i) / h)``; sampling, the IS weights' smallest probability and ``mean_priority``
        follow it exactly, and new transitions enter at ``max_priority`` undecayed. It must be at least
        ``buffer_size / 512``. With ``weight_normalization="buffer"`` the largest possible weight is the oldest
        transition's, so recent samples' weights shrink by about ``2 ** (-oldest age / h)``; ``"batch"``
        avoids that. None (default): no fading
    """

    samples_class = PrioritizedReplayBufferSamples

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_end: float = 1.0,
        beta_anneal_steps: int | str = 200_000,
        epsilon: float = 1e-6,
        weight_normalization: str = "buffer",
        n_steps: int = 1,
        gamma: float = 0.99,
        prioritization: str = "proportional",
        tag_key: str | None = None,
        inverse_sampling: bool = False,
        priority_half_life: float | None = None,
    ):
        check_n_step_parameters(n_steps, gamma)
        if n_steps > 1 and optimize_memory_usage:
            raise ValueError("n_steps > 1 does not support optimize_memory_usage=True, as in SB3's NStepReplayBuffer")
        if isinstance(observation_space, spaces.Dict):
            raise ValueError(
                "PrioritizedReplayBuffer stores array observations, but observation_space is a Dict: use "
                "PrioritizedDictReplayBuffer (replay_buffer_class=sb3_per.PrioritizedDictReplayBuffer)"
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
        self._init_prioritization(
            alpha,
            beta_start,
            beta_end,
            beta_anneal_steps,
            epsilon,
            weight_normalization,
            n_steps,
            gamma,
            prioritization,
            tag_key,
            inverse_sampling,
            priority_half_life,
        )


class PrioritizedDictReplayBuffer(PrioritizedBufferMixin, DictReplayBuffer):
    """
    ``PrioritizedReplayBuffer`` for Dict observation spaces: storage is SB3's ``DictReplayBuffer``, and
    sampling, weights and priority updates are the same code (``PrioritizedBufferMixin``), so behaviour and
    parameters are those of ``PrioritizedReplayBuffer``. Samples are ``PrioritizedDictReplayBufferSamples``,
    whose observations are dicts of tensors. ``optimize_memory_usage`` is not supported (nor by SB3's
    ``DictReplayBuffer``).

    :param buffer_size: Max number of elements in the buffer
    :param observation_space: Observation space (a ``spaces.Dict``)
    :param action_space: Action space
    :param device: PyTorch device
    :param n_envs: Number of parallel environments
    :param optimize_memory_usage: Must be False
    :param handle_timeout_termination: Handle timeout termination (due to timelimit)
        separately and treat the task as infinite horizon task (SB3 issue #284)
    :param alpha: see ``PrioritizedReplayBuffer``, as are ``beta_start``, ``beta_end``, ``beta_anneal_steps``,
        ``epsilon``, ``weight_normalization``, ``n_steps``, ``gamma``, ``prioritization``, ``tag_key``,
        ``inverse_sampling`` and ``priority_half_life``
    """

    samples_class = PrioritizedDictReplayBufferSamples

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_end: float = 1.0,
        beta_anneal_steps: int | str = 200_000,
        epsilon: float = 1e-6,
        weight_normalization: str = "buffer",
        n_steps: int = 1,
        gamma: float = 0.99,
        prioritization: str = "proportional",
        tag_key: str | None = None,
        inverse_sampling: bool = False,
        priority_half_life: float | None = None,
    ):
        check_n_step_parameters(n_steps, gamma)
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(
                f"PrioritizedDictReplayBuffer needs a Dict observation space, got {observation_space}: "
                "use PrioritizedReplayBuffer"
            )
        if optimize_memory_usage:
            raise ValueError("optimize_memory_usage=True is not supported with Dict observations (nor by SB3)")
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            device=device,
            n_envs=n_envs,
            handle_timeout_termination=handle_timeout_termination,
        )
        self._init_prioritization(
            alpha,
            beta_start,
            beta_end,
            beta_anneal_steps,
            epsilon,
            weight_normalization,
            n_steps,
            gamma,
            prioritization,
            tag_key,
            inverse_sampling,
            priority_half_life,
        )


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

    priorities_follow_td_errors = False
    # A class default too, for buffers pickled before the floor existed
    reward_floor = 0.0

    def __init__(self, *args: Any, reward_floor: float = 0.0, **kwargs: Any):
        check_reward_floor(reward_floor)
        self.reward_floor = float(reward_floor)
        super().__init__(*args, **kwargs)
        # Every priority is at least the floor's, so a floor the sum tree cannot hold would refuse every add
        try:
            self._priorities_of(np.array([self.reward_floor]), "reward_floor")
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
        return self._priorities_of(floored, "reward")

    def update_priorities(
        self, indices: np.ndarray | th.Tensor, td_errors: np.ndarray | th.Tensor, stamps: np.ndarray | None = None
    ) -> None:
        """
        Check a priority update as ``PrioritizedReplayBuffer.update_priorities`` does and count it, leaving the
        reward priorities unchanged.

        :param indices: flat indices, as returned in the samples' ``indices``
        :param td_errors: one finite TD error per index
        :param stamps: the samples' ``stamps``
        """
        if self._checked_priority_updates(indices, td_errors, stamps) is not None:
            self.n_priority_updates += 1


def _stratified_tree_leaves(tree: SumTree, uniforms: np.ndarray) -> np.ndarray:
    """One leaf of ``tree`` from each of ``len(uniforms)`` equal segments of its total, placed by ``uniforms``."""
    batch_size = len(uniforms)
    return tree.find((np.arange(batch_size) + uniforms) * (tree.total / batch_size))


def _reciprocals(priorities: np.ndarray) -> np.ndarray:
    """``1 / priorities``, and 0 where a priority is 0 (a leaf that must never be sampled either way)."""
    return np.divide(1.0, priorities, out=np.zeros_like(priorities), where=priorities > 0.0)


def _as_flat_numpy(values: np.ndarray | th.Tensor, name: str, kinds: str) -> np.ndarray:
    """
    ``values`` as a flat numpy array, or ``ValueError`` naming ``name`` unless its dtype kind is in ``kinds``
    (an empty array passes). float16 and bfloat16 tensors are widened to float32 (numpy has no bfloat16).
    """
    if isinstance(values, th.Tensor):
        if values.dtype in (th.float16, th.bfloat16):
            values = values.float()
        values = values.detach().cpu().numpy()
    array = np.asarray(values)
    if array.size and array.dtype.kind not in kinds:
        raise ValueError(f"{name} must be {KIND_NAMES[kinds]}, got dtype {array.dtype}")
    return array.reshape(-1)


def check_reward_floor(reward_floor: float) -> None:
    """Raise ``ValueError``, naming the parameter and its value, unless ``reward_floor`` is a finite number >= 0."""
    if not (is_finite_number(reward_floor) and reward_floor >= 0.0):
        raise ValueError(f"reward_floor must be a finite number >= 0, got {reward_floor!r}")


def check_priority_half_life(priority_half_life: float | None, buffer_size: int) -> None:
    """Raise ``ValueError``, naming the parameter and its value, for a bad ``priority_half_life``."""
    if priority_half_life is None:
        return
    if not (is_finite_number(priority_half_life) and priority_half_life > 0):
        raise ValueError(f"priority_half_life must be a finite number > 0 or None, got {priority_half_life!r}")
    if buffer_size / priority_half_life > MAX_FADE_DOUBLINGS:
        raise ValueError(
            f"priority_half_life={priority_half_life!r} is below buffer_size / {MAX_FADE_DOUBLINGS} = "
            f"{buffer_size / MAX_FADE_DOUBLINGS:g} add calls: the oldest transitions would fade by more than "
            f"2 ** -{MAX_FADE_DOUBLINGS} before being overwritten, past what the sum tree can hold exactly"
        )


def check_n_step_parameters(n_steps: int, gamma: float) -> None:
    """Raise ``ValueError``, naming the parameter and its value, for a bad ``n_steps`` or ``gamma``."""
    if int(n_steps) != n_steps or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")


def check_per_parameters(
    alpha: float,
    beta_start: float,
    beta_end: float,
    beta_anneal_steps: int | str = 1,
    epsilon: float = 1e-6,
    weight_normalization: str = "buffer",
) -> None:
    """
    Raise ``ValueError``, naming the parameter and its value, if a ``PrioritizedReplayBuffer``
    parameter is out of range (see the class for their meaning).
    """
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    for name, beta in (("beta_start", beta_start), ("beta_end", beta_end)):
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {beta!r}")
    if isinstance(beta_anneal_steps, (str, bool)):
        if beta_anneal_steps != "auto":
            raise ValueError(f"beta_anneal_steps must be a positive integer or 'auto', got {beta_anneal_steps!r}")
    elif int(beta_anneal_steps) != beta_anneal_steps or beta_anneal_steps <= 0:
        raise ValueError(f"beta_anneal_steps must be a positive integer or 'auto', got {beta_anneal_steps!r}")
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if float(epsilon) ** float(alpha) == 0.0:
        raise ValueError(
            f"epsilon ** alpha underflows to 0 (epsilon={epsilon!r}, alpha={alpha!r}), so a transition could get "
            "priority 0 and never be sampled again: raise epsilon or lower alpha"
        )
    if np.float32(float(epsilon) ** (float(alpha) * max(beta_start, beta_end))) == 0.0:
        raise ValueError(
            f"epsilon={epsilon!r} is so small that, beside a transition of TD error 0, every other importance "
            f"weight (P_min / P_i) ** beta underflows to 0 in float32 (alpha={alpha!r}, beta up to "
            f"{max(beta_start, beta_end)!r}): raise epsilon"
        )
    if weight_normalization not in WEIGHT_NORMALIZATIONS:
        raise ValueError(f"weight_normalization must be one of {WEIGHT_NORMALIZATIONS}, got {weight_normalization!r}")
