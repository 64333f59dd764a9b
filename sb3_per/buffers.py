"""
Prioritized experience replay (Schaul et al. 2016: proportional and rank-based) behind SB3's replay buffers.

The buffer is put together from parts, each in its own module, each declaring what it cannot be combined with:

- ``sb3_per.samples``: what ``sample`` returns;
- ``sb3_per.priority_sampler``: what decides which transitions are sampled: the priority indices
  (``sb3_per.priority_index``: the sum tree, which also stores every priority; the rank heap; the inverse tree), the
  clock of recency-faded priorities (``sb3_per.fading``), the largest priority and beta's schedule;
- ``sb3_per.replay_tags``: integer tags on stored transitions, and the priority mass of each tag;
- ``sb3_per.n_step``: n-step returns of sampled transitions.

``PrioritizedBufferMixin`` holds what is left: storage (SB3's), adding at the entry priority, write stamps, and
gathering what the sampler drew.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from numbers import Integral
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer
from stable_baselines3.common.type_aliases import TensorDict
from stable_baselines3.common.vec_env import VecNormalize

from sb3_per.checks import check_memory_optimization, check_storage_arguments, checked_bool
from sb3_per.n_step import check_n_step_parameters, n_step_targets
from sb3_per.priority_sampler import DEFAULT_WEIGHT_NORMALIZATION, PrioritySampler, buffer_state_with_sampler
from sb3_per.replay_tags import ReplayTagsMixin, TagPriorityMass, checked_stored_leaves
from sb3_per.samples import PrioritizedDictReplayBufferSamples, PrioritizedReplayBufferSamples
from sb3_per.sum_tree import SumTree

INTEGER_KINDS, REAL_KINDS = "iu", "iuf"  # numpy dtype kinds accepted for indices and stamps, and for priorities
KIND_NAMES = {INTEGER_KINDS: "integers", REAL_KINDS: "real numbers (integer or float, not bool or complex)"}


class PrioritizedBufferMixin(ReplayTagsMixin):
    """
    Prioritized replay for an SB3 replay buffer whose storage is ``(buffer_size, n_envs, ...)`` arrays
    (``ReplayBuffer``) or dicts of them (``DictReplayBuffer``). ``PrioritizedReplayBuffer`` and
    ``PrioritizedDictReplayBuffer`` are this mixin in front of those two SB3 classes.

    What is sampled is decided by the buffer's ``sampler`` (``sb3_per.priority_sampler.PrioritySampler``: the priority
    indices, the fading clock, the largest priority, beta's schedule); the mixin keeps the storage's side: which write
    of a slot a sample saw (its stamp), the tags and their priority mass, and gathering the sampled transitions.

    Each stored transition is a leaf ``pos * n_envs + env``, so every env's data is sampled when
    ``n_envs > 1``. See ``PrioritizedReplayBuffer`` for the behaviour and the parameters.

    Subclasses may change what a transition enters with (``_entry_priorities``) and whether priorities follow the
    priorities given to ``update_priorities`` (``priorities_follow_updates``, with an ``update_priorities`` of their
    own).
    """

    # `sample` calls without any `update_priorities` before the buffer warns that priorities are never written: an
    # sb3_per algorithm writes them back after each critic step, before it samples again, so the second call tells
    SAMPLES_BEFORE_NO_UPDATE_WARNING = 2
    # Whether `update_priorities` sets priorities from what it is given (LAP and LA3P need it)
    priorities_follow_updates = True
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
        self.sampler = PrioritySampler(
            self.buffer_size,
            self.n_envs,
            alpha,
            beta_start,
            beta_end,
            beta_anneal_steps,
            epsilon,
            weight_normalization,
            prioritization,
            inverse_sampling,
            priority_half_life,
            self.optimize_memory_usage,
            n_steps,
        )
        self.n_steps = int(n_steps)
        self.gamma = float(gamma)
        self._init_tags(tag_key)
        self._init_bookkeeping()

    def _init_bookkeeping(self) -> None:
        """What the buffer keeps per leaf beside the sampler (write stamps, tag mass), for an empty buffer."""
        n_leaves = self.buffer_size * self.n_envs
        # Per-leaf write counter, and its value when the leaf was last sampled (-1: not since created),
        # to skip updates for transitions overwritten after they were sampled.
        self._write_count = np.zeros(n_leaves, dtype=np.int64)
        self._write_count_at_sample = np.full(n_leaves, -1, dtype=np.int64)
        self._warned_no_updates = False
        # Priority mass (as stored in the tree) of each tag slot
        self.tag_mass = TagPriorityMass(self.n_tag_slots)

    # The sampler's settings and counts, read through the buffer (set them by making a buffer)
    alpha = property(lambda self: self.sampler.alpha, doc="The priority exponent.")
    epsilon = property(lambda self: self.sampler.epsilon, doc="Added to each priority before raising it to alpha.")
    prioritization = property(lambda self: self.sampler.prioritization, doc="``proportional`` or ``rank``.")
    weight_normalization = property(lambda self: self.sampler.weight_normalization, doc="``buffer`` or ``batch``.")
    inverse_sampling = property(lambda self: self.sampler.inverse_sampling, doc="Whether the inverse tree is kept.")
    priority_half_life = property(lambda self: self.sampler.priority_half_life, doc="Fading half-life, or None.")
    beta_start = property(lambda self: self.sampler.beta_schedule.start, doc="Beta at the first sample call.")
    beta_end = property(lambda self: self.sampler.beta_schedule.end, doc="Beta at the end of its annealing.")
    beta_anneal_steps = property(lambda self: self.sampler.beta_schedule.anneal_steps, doc="Sample calls, or auto.")
    beta_progress = property(lambda self: self.sampler.beta_schedule.progress, doc="Progress set (auto), or None.")
    n_sample_calls = property(lambda self: self.sampler.beta_schedule.n_calls, doc="Prioritized sample calls.")
    n_priority_updates = property(lambda self: self.sampler.n_priority_updates, doc="update_priorities calls.")
    max_priority = property(lambda self: self.sampler.max_priority, doc="Largest priority so far (raised to alpha).")

    @property
    def tree(self) -> SumTree:
        """The sum tree that stores every priority (raised to alpha; scaled up by the fading clock, if any)."""
        return self.sampler.tree

    @property
    def beta(self) -> float:
        """Importance-sampling exponent the next ``sample`` call will use."""
        return self.sampler.beta_schedule.value

    def set_beta_progress(self, progress: float) -> None:
        """
        Set how far beta has annealed, for ``beta_anneal_steps="auto"``: beta is then
        ``beta_start + progress * (beta_end - beta_start)`` until the next call.

        :param progress: training progress in [0, 1] (sb3_per's algorithms pass ``1 - _current_progress_remaining``)
        """
        self.sampler.beta_schedule.set_progress(progress)

    @property
    def n_transitions(self) -> int:
        """Number of transitions stored, over all envs."""
        return self.size() * self.n_envs

    @property
    def mean_priority(self) -> float:
        """Mean (effective) priority, raised to alpha, of the stored transitions; ``nan`` when empty."""
        return self.sampler.mean_priority(self.n_transitions)

    def priorities_at(self, indices: np.ndarray) -> np.ndarray:
        """
        Effective priorities (raised to alpha, faded if ``priority_half_life`` is set) of stored transitions.

        :param indices: flat leaf indices (``pos * n_envs + env``) of stored transitions
        """
        return self.sampler.effective(self.tree[checked_stored_leaves(indices, self.n_transitions)])

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        self._init_tag_storage()
        self.sampler.reset()
        self._init_bookkeeping()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(buffer_state_with_sampler(state))
        if self.tagged:
            self._resum_tag_priorities()

    def _resum_tag_priorities(self) -> None:
        """Per-tag priority sums computed afresh from the leaves, so that they cannot drift from the tree."""
        n_stored = self._n_stored_leaves
        self.tag_mass.resum(self._tag_slot[:n_stored], self.tree[np.arange(n_stored)])

    def tag_priority_shares(self) -> dict[int, float]:
        """
        Share of the total (effective) priority mass held by each tag, for every tag stored (shares sum
        to 1; empty while the buffer is). With rank-based prioritization the mass is that of the priorities
        ranked, not of the sampling probabilities.
        """
        self._check_tagged()
        if self.tag_mass.could_drift():
            self._resum_tag_priorities()
        return self.tag_mass.shares(self._tag_values, self._tag_counts > 0)

    def _freed_slot(self, slot: int) -> None:
        self.tag_mass.clear(slot)

    def add(
        self, obs: Any, next_obs: Any, action: np.ndarray, reward: np.ndarray, done: np.ndarray, infos: Any
    ) -> None:
        """
        Store one step of every env (see SB3's ``ReplayBuffer.add``), at its entry priority: the largest priority
        seen so far (a subclass may say otherwise, see ``_entry_priorities``).
        """
        self._check_infos(infos)
        entry_priorities = self._entry_priorities(reward)
        pos = self.pos
        super().add(obs, next_obs, action, reward, done, infos)  # type: ignore[misc]
        sampler = self.sampler
        if sampler.tick() and self.tagged:
            self._resum_tag_priorities()
        leaves = pos * self.n_envs + np.arange(self.n_envs)
        # Undecayed: a new transition enters at its entry priority, faded or not.
        priorities = sampler.stored(entry_priorities)
        sampler.max_priority = max(sampler.max_priority, float(entry_priorities.max()))
        if self.tagged:
            _, old_slots, new_slots = self._store_tags(pos, infos)
            previous = sampler.write(leaves, priorities)
            # The overwritten transitions' mass leaves their tags, the new ones' enters theirs.
            self.tag_mass.grow(self.n_tag_slots)
            had_tag = old_slots >= 0
            self.tag_mass.add(old_slots[had_tag], -previous[had_tag])
            self.tag_mass.add(new_slots, priorities)
        else:
            sampler.write(leaves, priorities)
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
        return np.full(self.n_envs, self.sampler.max_priority)

    def _set_priorities(self, leaves: np.ndarray, stored: np.ndarray) -> None:
        """New stored priorities for stored transitions (whose tags stay), keeping the per-tag sums in step."""
        previous = self.sampler.write(leaves, stored)
        if self.tagged:
            self.tag_mass.add(self._tag_slot[leaves], stored - previous)

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
        if inverse is not False and checked_bool("inverse", inverse):
            if self.sampler.inverse_index is None:
                raise ValueError(f"sample(inverse=True) needs a {type(self).__name__} made with inverse_sampling=True")
            self._warn_if_priorities_never_updated()
            return self._samples_at(self.sampler.draw_inverse(batch_size), np.ones(batch_size), env)
        self._warn_if_priorities_never_updated()
        leaves, weights = self.sampler.draw(batch_size)
        return self._samples_at(leaves, weights, env)

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
        return self._samples_at(self._uniform_leaves(batch_size), np.ones(batch_size), env)

    def _uniform_leaves(self, batch_size: int) -> np.ndarray:
        """``batch_size`` leaves of valid stored transitions, uniformly, with replacement (``sample_uniform``'s)."""
        n_leaves = self.n_transitions
        if self.optimize_memory_usage and self.full:
            # The slot at `pos` lost its next observation: draw among the others, as SB3's buffer does.
            offsets = np.random.randint(0, n_leaves - self.n_envs, size=batch_size)  # noqa: NPY002
            return (offsets + (self.pos + 1) * self.n_envs) % n_leaves
        return np.random.randint(0, n_leaves, size=batch_size)  # noqa: NPY002

    def _samples_at(self, leaves: np.ndarray, weights: np.ndarray, env: VecNormalize | None) -> Any:
        """The batch of the transitions at ``leaves``, with ``weights``, stamped as sampled now."""
        stamps = self._write_count[leaves]
        self._write_count_at_sample[leaves] = stamps
        return self._get_prioritized_samples(leaves, weights, stamps, env)

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
                "`sb3_per.DDPG`, `sb3_per.DQN`, `sb3_per.TQC` or `sb3_per.QRDQN` (stock SB3 and sb3-contrib "
                "algorithms, sb3-contrib's QRDQN and CrossQ among them, never do).",
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
            next_observations, dones, rewards, discounts = n_step_targets(self, leaves, env)
        else:
            if self.optimize_memory_usage:
                next_leaves = (leaves + self.n_envs) % (self.buffer_size * self.n_envs)
                next_observations = self.rows(self.observations, next_leaves)
            else:
                next_observations = self.rows(self.next_observations, leaves)
            # Only use dones that are not due to timeouts (SB3 issue #284)
            dones = (self.rows(self.dones, leaves) * (1 - self.rows(self.timeouts, leaves))).reshape(-1, 1)
            rewards = self._normalize_reward(self.rows(self.rewards, leaves).reshape(-1, 1), env)
            discounts = None
        return self.samples_class(
            self._observations_to_torch(self.rows(self.observations, leaves), env),
            self._to_torch(self.rows(self.actions, leaves)),
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

    def rows(self, storage: np.ndarray | dict[str, np.ndarray], leaves: np.ndarray) -> Any:
        """Copy of the entries of ``storage`` (shape (buffer_size, n_envs, ...), or a dict of such) at ``leaves``."""
        if isinstance(storage, dict):
            return {key: self.rows(value, leaves) for key, value in storage.items()}
        return storage.reshape(self.buffer_size * self.n_envs, *storage.shape[2:]).take(leaves, axis=0)

    def update_priorities(
        self, indices: np.ndarray | th.Tensor, priorities: np.ndarray | th.Tensor, stamps: np.ndarray | None = None
    ) -> None:
        """
        Set the priority of sampled transitions from what the replay scheme made of their step (PER: the absolute TD
        errors): each stores ``(|priority| + epsilon) ** alpha``.

        Transitions overwritten by ``add`` since they were sampled are skipped. Bad input raises
        ``ValueError`` and leaves every priority unchanged.

        :param indices: flat indices, as returned in the samples' ``indices``
        :param priorities: one finite value per index (numpy array or torch tensor on any device, any
            shape that flattens to the batch, e.g. (batch_size, 1)); integers or floats, float16 and bfloat16
            tensors being widened to float32
        :param stamps: the samples' ``stamps``: an update is applied only where the leaf's write stamp is
            still the one it had when sampled (exact). Without them, each leaf's stamp at its latest sample
            stands in, which misses an older batch whose slot was overwritten and sampled again since
        """
        checked = self._checked_priority_updates(indices, priorities, stamps)
        if checked is None:
            return
        leaves, raised = checked
        if leaves.size:
            self._set_priorities(leaves, self.sampler.stored(raised))
        self.sampler.count_update(raised)

    def _checked_priority_updates(
        self, indices: np.ndarray | th.Tensor, priorities: np.ndarray | th.Tensor, stamps: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """
        ``update_priorities``'s checks: the leaves to update (those not overwritten since sampled) and their new
        priorities raised, ``(|priority| + epsilon) ** alpha``, or ``None`` for an empty batch; bad input raises
        ``ValueError`` (see ``update_priorities``).
        """
        # Few numpy calls on purpose: at batch 256 each costs about as much as its arithmetic.
        leaves = _as_flat_numpy(indices, "indices", INTEGER_KINDS)
        values = _as_flat_numpy(priorities, "priorities", REAL_KINDS)
        if leaves.shape[0] != values.shape[0]:
            raise ValueError(f"priorities has {values.shape[0]} values but indices has {leaves.shape[0]}")
        if stamps is not None:
            stamps = _as_flat_numpy(stamps, "stamps", INTEGER_KINDS)
            if stamps.shape[0] != leaves.shape[0]:
                raise ValueError(f"stamps has {stamps.shape[0]} values but indices has {leaves.shape[0]}")
        if leaves.size == 0:
            return None
        leaves = checked_stored_leaves(leaves, self.n_transitions)
        raised = self.sampler.priorities_of(values, "priorities")
        if stamps is None:
            sampled_stamps = self._write_count_at_sample[leaves]
            fresh = (sampled_stamps == self._write_count[leaves]) | (sampled_stamps < 0)
        else:
            fresh = self._write_count[leaves] == stamps
        if self.optimize_memory_usage and self.full:
            fresh &= leaves // self.n_envs != self.pos  # the slot whose next observation is gone stays at zero
        if not fresh.all():
            return leaves[fresh], raised[fresh]
        return leaves, raised


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
    - ``update_priorities(indices, priorities, stamps)`` sets priority ``(|priority| + epsilon) ** alpha``, from what
      the replay scheme made of the step (PER: the absolute TD errors). An update for a transition that ``add`` has
      overwritten since it was sampled is skipped: its error belongs to data that is gone (ray #6534). Each leaf
      counts the times ``add`` wrote it, and the samples carry that count (``stamps``); given back, they make the
      check exact. Without them, the count at the slot's latest sample stands in, and an update from an older batch
      whose slot has been overwritten *and sampled again* since is not recognised as stale.

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
    :param epsilon: Added to ``|priority|`` so that no transition's priority is ever zero
    :param weight_normalization: ``"buffer"`` divides the weights by the largest weight any stored
        transition could get (from the smallest sampling probability, as in the paper); ``"batch"`` by the
        largest weight in the sampled batch
    :param n_steps: With ``n_steps > 1``, samples carry n-step returns and their ``discounts``, computed
        as SB3's ``NStepReplayBuffer`` does (episode ends and timeouts cut the sum). SB3 ignores an
        algorithm's ``n_steps`` when a custom ``replay_buffer_class`` is given: pass it here, through
        ``replay_buffer_kwargs``
    :param gamma: Discount factor of the n-step returns (sb3_per's algorithms give theirs; a different one in
        ``replay_buffer_kwargs`` raises ``ValueError``)
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
        transition's, so recent samples' weights shrink by about ``2 ** (-beta * oldest age / h)``: a half-life
        short enough for that to underflow float32 (weights of exactly 0, no training) is refused, and
        ``"batch"`` avoids the shrinking altogether. Every 64 half-lives the whole store is rescaled by a power of two
        (exact), in O(buffer_size * n_envs): one ``add`` then takes that long (about 1.4 s at 1e7 transitions with
        the inverse tree, measured once; a few ms at 1e5). None (default): no fading
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
        weight_normalization: str = DEFAULT_WEIGHT_NORMALIZATION,
        n_steps: int = 1,
        gamma: float = 0.99,
        prioritization: str = "proportional",
        tag_key: str | None = None,
        inverse_sampling: bool = False,
        priority_half_life: float | None = None,
    ):
        check_storage_arguments(buffer_size, n_envs, optimize_memory_usage, handle_timeout_termination)
        check_n_step_parameters(n_steps, gamma)
        if n_steps > 1 and optimize_memory_usage:
            raise ValueError("n_steps > 1 does not support optimize_memory_usage=True, as in SB3's NStepReplayBuffer")
        check_memory_optimization(optimize_memory_usage, buffer_size, n_envs)
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
        weight_normalization: str = DEFAULT_WEIGHT_NORMALIZATION,
        n_steps: int = 1,
        gamma: float = 0.99,
        prioritization: str = "proportional",
        tag_key: str | None = None,
        inverse_sampling: bool = False,
        priority_half_life: float | None = None,
    ):
        check_storage_arguments(buffer_size, n_envs, optimize_memory_usage, handle_timeout_termination)
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
