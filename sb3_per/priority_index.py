"""
What a prioritized buffer samples from: one small interface, ``PriorityIndex`` (write, sample, total and min,
rescale), and the three structures behind it.

- ``ProportionalIndex``: the sum tree, ``P(i) ~ p_i`` (Schaul et al. 2016, proportional). It is also every buffer's
  store of priorities (mean, min, any leaf's, per-tag mass), whichever index samples.
- ``RankIndex``: the rank heap, ``P(i) ~ (1 / rank(i)) ** alpha`` (Schaul et al. 2016, rank-based).
- ``InverseIndex``: a second sum tree over ``1 / p_i``, for sampling the transitions of *low* priority (LA3P's
  actor batches).

The buffer writes every priority into each index it keeps, so none is ever stale. Each index also declares what it
cannot be combined with (``check_options``), so that the buffer's constructor asks its parts instead of checking
pairs of options itself.

Priorities given to ``write`` are the buffer's stored values: already raised to alpha, and scaled by the fading
clock when there is one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from sb3_per.rank_heap import RankHeap
from sb3_per.sum_tree import SumTree


@dataclass(frozen=True)
class BufferOptions:
    """
    A prioritized buffer's constructor choices that its parts check against one another.

    :param prioritization: ``"proportional"`` or ``"rank"``
    :param alpha: the priority exponent
    :param epsilon: the priority offset
    :param optimize_memory_usage: SB3's memory-saving layout
    :param n_steps: the n-step return length
    :param inverse_sampling: whether an ``InverseIndex`` is kept
    :param priority_half_life: the fading half-life (``None``: no fading)
    :param fade_doublings: how many doublings the oldest transition can fade before it is overwritten
        (``buffer_size / priority_half_life``; 0 without fading)
    :param n_leaves: the number of leaves (``buffer_size * n_envs``)
    """

    prioritization: str
    alpha: float
    epsilon: float
    optimize_memory_usage: bool
    n_steps: int
    inverse_sampling: bool
    priority_half_life: float | None
    fade_doublings: float
    n_leaves: int


class PriorityIndex(ABC):
    """A structure that holds one value per leaf, derived from the stored priorities, and samples leaves by it."""

    @classmethod
    def check_options(cls, options: BufferOptions) -> None:
        """Raise ``ValueError`` if this index cannot serve a buffer made with ``options`` (default: it can)."""
        return None

    @abstractmethod
    def write(self, leaves: np.ndarray, priorities: np.ndarray) -> None:
        """Give ``leaves`` the stored ``priorities`` (checked by the caller: in range, finite, >= 0)."""

    @abstractmethod
    def sample(self, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """
        Stratified sampling: one leaf from each of ``len(uniforms)`` equal-probability segments.

        :param uniforms: one number in [0, 1) per leaf to draw
        :return: the leaves, each one's sampling probability up to a common factor, and the smallest probability of
            any stored leaf (same factor)
        """

    @abstractmethod
    def rescale(self, factor: float) -> None:
        """Every stored priority has been multiplied by ``factor`` (a power of two): follow it."""

    @property
    @abstractmethod
    def total(self) -> float:
        """Sum of the values sampled by (0 while nothing is stored)."""


def stratified_tree_leaves(tree: SumTree, uniforms: np.ndarray) -> np.ndarray:
    """One leaf of ``tree`` from each of ``len(uniforms)`` equal segments of its total, placed by ``uniforms``."""
    batch_size = len(uniforms)
    return tree.find((np.arange(batch_size) + uniforms) * (tree.total / batch_size))


class ProportionalIndex(PriorityIndex):
    """
    The sum tree: samples in proportion to the stored priorities, and stores them for the buffer.

    :param n_leaves: the number of leaves
    """

    def __init__(self, n_leaves: int) -> None:
        self.tree = SumTree(n_leaves)

    def write(self, leaves: np.ndarray, priorities: np.ndarray) -> None:
        self.tree.update(leaves, priorities, validate=False)

    def write_returning_previous(self, leaves: np.ndarray, priorities: np.ndarray) -> np.ndarray:
        """``write``, returning what each write replaced (to keep sums over groups of leaves in step)."""
        return self.tree.update(leaves, priorities, validate=False)

    def sample(self, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        tree = self.tree
        leaves = stratified_tree_leaves(tree, uniforms)
        return leaves, tree[leaves], tree.min

    def rescale(self, factor: float) -> None:
        self.tree.scale(factor)

    @property
    def total(self) -> float:
        return self.tree.total

    @property
    def min(self) -> float:
        """The smallest non-zero stored priority (``inf`` while none is)."""
        return self.tree.min

    def __getitem__(self, leaves: np.ndarray) -> np.ndarray:
        """The stored priorities of ``leaves``."""
        return self.tree[leaves]


class RankIndex(PriorityIndex):
    """
    The rank heap: samples rank ``r`` (1 = largest priority) with probability ``r ** -alpha / sum_j j ** -alpha``.

    :param n_leaves: the number of leaves
    :param alpha: the exponent of the ranks
    """

    @classmethod
    def check_options(cls, options: BufferOptions) -> None:
        if options.optimize_memory_usage:
            raise ValueError(
                "prioritization='rank' does not support optimize_memory_usage=True: every stored transition has a "
                "rank, so the one whose next observation was overwritten could be sampled"
            )
        if options.inverse_sampling:
            raise ValueError(
                "inverse_sampling=True needs prioritization='proportional': inverse sampling is in proportion to "
                "1 / priority, which rank-based prioritization does not sample by"
            )
        if options.priority_half_life is not None:
            raise ValueError(
                f"priority_half_life={options.priority_half_life!r} needs prioritization='proportional': fading every "
                "priority changes no rank, and rank-based sampling does not fade"
            )

    def __init__(self, n_leaves: int, alpha: float) -> None:
        self.heap = RankHeap(n_leaves, alpha)

    def write(self, leaves: np.ndarray, priorities: np.ndarray) -> None:
        self.heap.update(leaves, priorities, validate=False)

    def sample(self, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        heap = self.heap
        leaves = heap.sample(uniforms)
        return leaves, heap.probabilities(leaves), heap.min_probability

    def rescale(self, factor: float) -> None:
        """A common factor changes no rank: nothing to do."""

    @property
    def total(self) -> float:
        return float(self.heap.size)


def reciprocals(priorities: np.ndarray) -> np.ndarray:
    """``1 / priorities``, and 0 where a priority is 0 (a leaf that must never be sampled either way)."""
    return np.divide(1.0, priorities, out=np.zeros_like(priorities), where=priorities > 0.0)


class InverseIndex(PriorityIndex):
    """
    A sum tree over ``1 / p``: samples the stored transitions in inverse proportion to their priority.

    :param n_leaves: the number of leaves
    """

    @classmethod
    def check_options(cls, options: BufferOptions) -> None:
        # Its total is at most n_leaves / (smallest stored priority), which fading can lower by 2 ** -fade.
        smallest = options.epsilon**options.alpha
        if not np.isfinite(options.n_leaves * 2.0**options.fade_doublings / smallest):
            raise ValueError(
                f"epsilon ** alpha = {smallest!r} is so small that the inverse tree's total, over 1 / priority, "
                "could overflow float64: raise epsilon"
            )

    def __init__(self, n_leaves: int) -> None:
        self.tree = SumTree(n_leaves)

    def write(self, leaves: np.ndarray, priorities: np.ndarray) -> None:
        self.tree.update(leaves, reciprocals(priorities), validate=False)

    def sample(self, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        tree = self.tree
        leaves = stratified_tree_leaves(tree, uniforms)
        return leaves, tree[leaves], tree.min

    def rescale(self, factor: float) -> None:
        self.tree.scale(1.0 / factor)

    @property
    def total(self) -> float:
        return self.tree.total
