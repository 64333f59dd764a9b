"""
What decides which stored transitions a prioritized buffer samples, kept apart from the storage they are gathered from:
``PrioritySampler`` holds the priority indices (``sb3_per.priority_index``), the fading clock (``sb3_per.fading``),
the largest priority so far, and the importance-sampling exponent's schedule (``BetaSchedule``). It knows leaves
(``pos * n_envs + env``) and priorities, nothing of observations, tags or write stamps, which the buffer keeps.

The priority signal has one name on its way: a scheme's ``priorities`` are what ``update_priorities`` is given, and
``priorities_of`` makes ``(|priority| + epsilon) ** alpha`` of them, which the indices store (scaled up by the fading
clock, if any: ``stored``).
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from sb3_per.checks import checked_bool, checked_choice, checked_number
from sb3_per.fading import FadingClock, check_priority_half_life, fade_doublings
from sb3_per.priority_index import (
    BufferOptions,
    InverseIndex,
    PriorityIndex,
    ProportionalIndex,
    RankIndex,
    stratified_tree_leaves,
)
from sb3_per.sum_tree import SumTree

WEIGHT_NORMALIZATIONS = ("buffer", "batch")
DEFAULT_WEIGHT_NORMALIZATION = "buffer"
PRIORITIZATIONS = ("proportional", "rank")
# The smallest importance weight a faded buffer with weight_normalization="buffer" gives a transition of the largest
# priority (``faded_weights_floored``). Without a floor, deep fading shrinks every fresh sample's weight until its
# gradients fall under Adam's epsilon (1e-8). Measured (SAC on Pendulum, 600 slots filled twice, beta 1, largest
# critic parameter change over 100 steps; 0.084 without fading), with no floor: 10 half-lives per buffer (weights about
# 2e-4) -> 0.023, 15 (2e-6) -> 0.0074, 20 (4e-8) -> 0.0051, 30 (5e-11) -> 0.0003, 50 (5e-17) -> 0.
SMALLEST_FADED_WEIGHT_FACTOR = 1e-6


class BetaSchedule:
    """
    The importance-sampling exponent: linear from ``start`` to ``end`` over ``anneal_steps`` sample calls, or, with
    ``anneal_steps="auto"``, over the training progress given to ``set_progress`` (checked by ``check_per_parameters``).

    :param start: beta at the first sample call (or at progress 0)
    :param end: beta after ``anneal_steps`` sample calls (or at progress 1)
    :param anneal_steps: a number of sample calls, or ``"auto"``
    """

    def __init__(self, start: float, end: float, anneal_steps: int | str) -> None:
        self.start = float(start)
        self.end = float(end)
        self.anneal_steps: int | str = "auto" if anneal_steps == "auto" else int(anneal_steps)
        # Sample calls counted so far, and the training progress in [0, 1] ("auto"; None: not set yet)
        self.n_calls = 0
        self.progress: float | None = None

    @property
    def value(self) -> float:
        """The exponent the next sample call uses."""
        if isinstance(self.anneal_steps, int):
            progress = min(1.0, self.n_calls / self.anneal_steps)
        else:  # "auto"
            if self.progress is None:
                raise ValueError(
                    "the buffer has beta_anneal_steps='auto', so beta follows the training progress, which nothing "
                    "has set: train with sb3_per's algorithms (sb3_per.SAC, TD3, DDPG, DQN, TQC or QRDQN), which call "
                    "set_beta_progress at each training call, or give beta_anneal_steps a number of sample calls"
                )
            progress = self.progress
        return self.start + progress * (self.end - self.start)

    def set_progress(self, progress: float) -> None:
        """
        Set how far beta has annealed (``anneal_steps="auto"`` only): ``start + progress * (end - start)``.

        :param progress: training progress in [0, 1]
        """
        if self.anneal_steps != "auto":
            raise ValueError(
                f"set_beta_progress is for beta_anneal_steps='auto'; this buffer anneals beta over "
                f"beta_anneal_steps={self.anneal_steps} sample calls"
            )
        self.progress = checked_number("progress", progress, low=0.0, high=1.0)


class PrioritySampler:
    """
    Priorities of ``buffer_size * n_envs`` leaves, and sampling by them with importance-sampling weights (see
    ``PrioritizedReplayBuffer`` for the parameters). Bad parameters raise ``ValueError`` naming them.

    :param buffer_size: the buffer's slots per env (the oldest transition's largest age, for fading)
    :param n_envs: the number of envs
    :param alpha: the priority exponent
    :param beta_start: beta at the first sample call
    :param beta_end: beta at the end of its annealing
    :param beta_anneal_steps: sample calls over which beta anneals, or ``"auto"``
    :param epsilon: the priority offset
    :param weight_normalization: ``"buffer"`` or ``"batch"``
    :param prioritization: ``"proportional"`` or ``"rank"``
    :param inverse_sampling: whether an inverse tree is kept, for ``draw_inverse``
    :param priority_half_life: the fading half-life in ``tick`` calls (``None``: no fading)
    :param optimize_memory_usage: whether the buffer uses SB3's memory-saving layout (which rank-based sampling refuses)
    :param n_steps: the buffer's n-step return length
    """

    def __init__(
        self,
        buffer_size: int,
        n_envs: int,
        alpha: float,
        beta_start: float,
        beta_end: float,
        beta_anneal_steps: int | str,
        epsilon: float,
        weight_normalization: str,
        prioritization: str,
        inverse_sampling: bool,
        priority_half_life: float | None,
        optimize_memory_usage: bool,
        n_steps: int,
    ) -> None:
        check_per_parameters(alpha, beta_start, beta_end, beta_anneal_steps, epsilon, weight_normalization)
        checked_choice("prioritization", prioritization, PRIORITIZATIONS)
        inverse_sampling = checked_bool("inverse_sampling", inverse_sampling)
        check_priority_half_life(priority_half_life, buffer_size)
        options = BufferOptions(
            prioritization=prioritization,
            alpha=float(alpha),
            epsilon=float(epsilon),
            optimize_memory_usage=optimize_memory_usage,
            n_steps=int(n_steps),
            inverse_sampling=inverse_sampling,
            priority_half_life=priority_half_life,
            fade_doublings=fade_doublings(buffer_size, priority_half_life),
            n_leaves=buffer_size * n_envs,
        )
        for part in index_classes(options):
            part.check_options(options)
        if priority_half_life is not None:
            check_fading_weights(alpha, epsilon, priority_half_life, buffer_size)
        self.n_leaves = buffer_size * n_envs
        self.alpha = float(alpha)
        self.epsilon = float(epsilon)
        self.weight_normalization = weight_normalization
        self.prioritization = prioritization
        self.inverse_sampling = inverse_sampling
        self.priority_half_life = None if priority_half_life is None else float(priority_half_life)
        self.beta_schedule = BetaSchedule(beta_start, beta_end, beta_anneal_steps)
        self.reset()

    def reset(self) -> None:
        """Every leaf at priority 0, the fading clock and the counts at zero (beta's training progress stays)."""
        n_leaves = self.n_leaves
        # Every priority (raised to alpha, faded scale) is kept in the sum tree: proportional sampling descends it,
        # and it gives the mean, minimum and any leaf's priority in O(1) for every kind of prioritization.
        self.store = ProportionalIndex(n_leaves)
        # Rank-based prioritization orders the leaves by priority in a heap and samples by rank.
        self.rank_index = RankIndex(n_leaves, self.alpha) if self.prioritization == "rank" else None
        # Inverse sampling (LA3P's actor batches) descends a second sum tree, over 1 / priority.
        self.inverse_index = InverseIndex(n_leaves) if self.inverse_sampling else None
        self.fading = None if self.priority_half_life is None else FadingClock(self.priority_half_life)
        # Largest priority given so far (already raised to alpha): what new transitions enter with.
        self.max_priority = 1.0
        # How far above a written priority the tree's total can get: every leaf at it, each scaled up by the
        # largest fade exponent a write can see.
        largest_exponent = 0.0 if self.fading is None else self.fading.largest_exponent
        self.largest_priority = np.finfo(np.float64).max / (n_leaves * 2.0**largest_exponent)
        self.beta_schedule.n_calls = 0
        self.n_priority_updates = 0
        self._link_indices()

    def _link_indices(self) -> None:
        """What ``draw`` samples from, and the indices written beside the store on every write, so none is stale."""
        self.sampling_index: PriorityIndex = self.rank_index or self.store
        self.followers: tuple[PriorityIndex, ...] = tuple(
            index for index in (self.rank_index, self.inverse_index) if index is not None
        )

    @property
    def tree(self) -> SumTree:
        """The sum tree that stores every priority (raised to alpha; scaled up by the fading clock, if any)."""
        return self.store.tree

    def priorities_of(self, values: np.ndarray, name: str) -> np.ndarray:
        """
        ``(|value| + epsilon) ** alpha`` of each of a non-empty array of values (priorities, or rewards).

        :param values: the values
        :param name: what they are, for the error message
        :raises ValueError: naming ``name``, if a value is not finite or a priority is too large for the sum tree
        """
        magnitudes = np.abs(values, dtype=np.float64)
        # Checked on the values, not the priorities: with alpha=0, NaN ** 0 = 1. NaN propagates through max.
        if not np.isfinite(magnitudes.max()):
            raise ValueError(f"{name} must be finite, got {values[~np.isfinite(magnitudes)][0]}")
        priorities = (magnitudes + self.epsilon) ** self.alpha
        top = priorities.max()
        if not top <= self.largest_priority:  # also catches a priority that overflowed to inf
            raise ValueError(
                f"priority {top} (raised to alpha) from {name} is too large for the sum tree: with all "
                f"{self.n_leaves} transitions at it (and faded ones at their largest scale) its total "
                "would overflow float64"
            )
        return priorities

    def stored(self, priorities: np.ndarray) -> np.ndarray:
        """What the indices store for priorities written now: themselves, or scaled up by the fading clock."""
        return priorities if self.fading is None else np.asarray(self.fading.stored(priorities))

    def effective(self, stored: np.ndarray) -> np.ndarray:
        """The effective (faded, if fading) priorities of stored values."""
        return stored if self.fading is None else np.asarray(self.fading.effective(stored))

    def write(self, leaves: np.ndarray, stored: np.ndarray) -> np.ndarray:
        """
        Write stored priorities into every index that holds them; return what the store held before.

        :param leaves: the leaves (in range, checked by the caller)
        :param stored: their stored priorities (finite and >= 0, checked or built by the caller)
        """
        previous = self.store.write_returning_previous(leaves, stored)
        for index in self.followers:
            index.write(leaves, stored)
        return previous

    def count_update(self, priorities: np.ndarray) -> None:
        """
        Count one priority update, whose applied priorities (raised to alpha, not faded) are ``priorities``: the
        largest priority follows them (a skipped stale update must not raise what new transitions enter with).
        """
        if priorities.size:
            self.max_priority = max(self.max_priority, float(priorities.max()))
        self.n_priority_updates += 1

    def tick(self) -> bool:
        """
        Count one ``add`` call on the fading clock; past its bound, take whole doublings out of every stored priority.

        :return: whether the stored priorities were rescaled (sums kept over groups of leaves must be made afresh)
        """
        if self.fading is None:
            return False
        doublings = self.fading.tick()
        if doublings:
            # A power of two: the trees stay exact sums of their leaves.
            for index in (self.store, *self.followers):
                index.rescale(2.0**-doublings)
        return bool(doublings)

    def mean_priority(self, n_stored: int) -> float:
        """Mean effective priority of ``n_stored`` stored leaves; ``nan`` for none."""
        if not n_stored:
            return float("nan")
        total = self.tree.total
        return (total if self.fading is None else float(self.fading.effective(total))) / n_stored

    def draw(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """
        Stratified sampling by priority (or rank) with NumPy's global generator, as SB3's buffers use, so that
        ``set_random_seed`` seeds it; the call counts towards beta's annealing.

        :param batch_size: the number of leaves (checked by the caller)
        :return: the leaves and their importance-sampling weights
        """
        beta = self.beta_schedule.value  # first, as it can raise
        uniforms = np.random.random_sample(batch_size)  # noqa: NPY002
        leaves, probabilities, smallest = self.sampling_index.sample(uniforms)
        if self.weight_normalization == "batch":
            smallest = probabilities.min()
        # (N P(i))^-beta / max_j (N P(j))^-beta = (P(i) / P_min)^-beta: N cancels out.
        weights = (probabilities / smallest) ** -beta
        if self.fading is not None and self.weight_normalization == "buffer":
            largest = float(self.fading.stored(self.max_priority))
            weights = faded_weights_floored(weights, probabilities, smallest, largest, beta)
        self.beta_schedule.n_calls += 1
        return leaves, weights

    def draw_inverse(self, batch_size: int) -> np.ndarray:
        """
        Stratified sampling by ``1 / priority`` (``inverse_sampling=True``; checked by the caller), with NumPy's global
        generator; it does not count towards beta's annealing.

        :param batch_size: the number of leaves
        """
        assert self.inverse_index is not None, "the buffer checks inverse_sampling first"
        uniforms = np.random.random_sample(batch_size)  # noqa: NPY002
        return stratified_tree_leaves(self.inverse_index.tree, uniforms)


def buffer_state_with_sampler(state: dict[str, Any]) -> dict[str, Any]:
    """
    An unpickled prioritized buffer's state with its sampler: as it is where it has one; where it was pickled before
    the sampler was taken out of the buffer (sb3_per up to commit 1250200, which kept these fields on the buffer
    itself), a new dict with them moved into a ``PrioritySampler`` under ``"sampler"``.

    :param state: the unpickled buffer's ``__dict__`` (left as it is)
    """
    if "sampler" in state:
        return state
    state = dict(state)
    beta_schedule = BetaSchedule.__new__(BetaSchedule)
    beta_schedule.start, beta_schedule.end = state.pop("beta_start"), state.pop("beta_end")
    beta_schedule.anneal_steps, beta_schedule.progress = state.pop("beta_anneal_steps"), state.pop("beta_progress")
    beta_schedule.n_calls = state.pop("n_sample_calls")
    sampler = PrioritySampler.__new__(PrioritySampler)
    sampler.beta_schedule = beta_schedule
    sampler.n_leaves = state["buffer_size"] * state["n_envs"]
    sampler.largest_priority = state.pop("_largest_priority")
    for name in (
        "alpha", "epsilon", "weight_normalization", "prioritization", "inverse_sampling", "priority_half_life",
        "store", "rank_index", "inverse_index", "fading", "max_priority", "n_priority_updates",
    ):  # fmt: skip
        setattr(sampler, name, state.pop(name))
    del state["_sampling_index"], state["_followers"]
    sampler._link_indices()  # the same objects as the pickled ones, which pickle kept shared
    state["sampler"] = sampler
    return state


def index_classes(options: BufferOptions) -> list[type[PriorityIndex]]:
    """The priority indices a sampler made with ``options`` keeps: the store, and those that sample besides it."""
    classes: list[type[PriorityIndex]] = [ProportionalIndex]
    if options.prioritization == "rank":
        classes.append(RankIndex)
    if options.inverse_sampling:
        classes.append(InverseIndex)
    return classes


def check_per_parameters(
    alpha: float,
    beta_start: float,
    beta_end: float,
    beta_anneal_steps: int | str = 1,
    epsilon: float = 1e-6,
    weight_normalization: str = DEFAULT_WEIGHT_NORMALIZATION,
) -> None:
    """
    Raise ``ValueError``, naming the parameter and its value, if a ``PrioritizedReplayBuffer``
    parameter is out of range (see the class for their meaning).
    """
    checked_number("alpha", alpha, low=0.0)
    checked_number("beta_start", beta_start, low=0.0, high=1.0)
    checked_number("beta_end", beta_end, low=0.0, high=1.0)
    if beta_anneal_steps != "auto" and not (
        isinstance(beta_anneal_steps, Integral) and not isinstance(beta_anneal_steps, bool) and beta_anneal_steps > 0
    ):
        raise ValueError(f"beta_anneal_steps must be a positive integer or 'auto', got {beta_anneal_steps!r}")
    checked_number("epsilon", epsilon, low=0.0, low_open=True)
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
    checked_choice("weight_normalization", weight_normalization, WEIGHT_NORMALIZATIONS)


def faded_weights_floored(
    weights: np.ndarray, probabilities: np.ndarray, smallest: float, largest: float, beta: float
) -> np.ndarray:
    """
    A faded buffer's importance weights (``weight_normalization="buffer"``) with a floor: the weights are divided by
    the largest weight a transition can have, the most faded one's, so deep fading shrinks every fresh sample's weight
    until its gradients fall under Adam's epsilon and the critic stops learning. Where a transition of the largest
    priority (``largest``, as stored) would get a weight below ``SMALLEST_FADED_WEIGHT_FACTOR``, the weights are
    divided instead by the weight that leaves it exactly there, and clipped at 1 (the most faded transitions, which
    get at most 1). Shallower fading leaves them as they are, bit for bit.

    :param weights: ``(probabilities / smallest) ** -beta``
    :param probabilities: the sampled leaves' stored priorities
    :param smallest: the smallest stored priority
    :param largest: the stored value of the largest priority a transition can have now
    :param beta: the importance-sampling exponent
    """
    if beta <= 0.0 or (largest / smallest) ** -beta >= SMALLEST_FADED_WEIGHT_FACTOR:
        return weights
    floor = largest * SMALLEST_FADED_WEIGHT_FACTOR ** (1.0 / beta)
    return np.minimum((probabilities / floor) ** -beta, 1.0)


def check_fading_weights(alpha: float, epsilon: float, priority_half_life: float, buffer_size: int) -> None:
    """
    Raise ``ValueError`` where fading would make priorities underflow to exactly 0 (the importance weights of a faded
    buffer have a floor instead: ``faded_weights_floored``).

    - A stored priority fades by up to ``2 ** -(buffer_size / priority_half_life)`` before it is overwritten: from
      ``epsilon ** alpha`` that must stay a normal float64, or the transition could never be sampled again (and the
      tree's min, the smallest non-zero priority, would no longer be one).

    :param alpha: the priority exponent
    :param epsilon: the priority offset
    :param priority_half_life: the fading half-life, in env steps
    :param buffer_size: the buffer's capacity per env (the oldest transition's largest age)
    """
    doublings = fade_doublings(buffer_size, priority_half_life)
    smallest_priority = epsilon**alpha
    if smallest_priority * 2.0**-doublings < np.finfo(np.float64).tiny:
        raise ValueError(
            f"epsilon ** alpha = {smallest_priority!r} fades by up to 2 ** -{doublings:g} (buffer_size / "
            f"priority_half_life) before it is overwritten, below float64's normal range, so a transition could end "
            "at priority 0 and never be sampled again: raise epsilon or priority_half_life"
        )
