"""
A sum tree (with a min tree beside it) for proportional prioritized sampling.

Pure data structure: numpy arrays and two numba kernels, no Stable-Baselines3 import.

Layout: an implicit binary heap over ``tree_size`` leaves, the next power of two at or above
``capacity``. Node ``i`` has children ``2i`` and ``2i + 1``; the root is node 1 and leaf ``j`` is node
``tree_size + j``. Leaves past ``capacity`` stay at priority zero, so capacities that are not powers of
two work and are never sampled.

Why this layout and these kernels (``python scripts/bench_tree_layouts.py`` measures the
alternatives side by side; figures in CHANGELOG.md): a 16- or 32-ary tree vectorised per level in
numpy costs 5-8x more than the numba kernels below at 1e6 leaves, because at 256 samples each numpy
call's fixed overhead dominates. Among numba kernels, what mattered was walking the batch *level by
level* and branch-free: the 256 loads of one level are independent, so the CPU overlaps their cache
misses, and the descent direction, a coin flip, costs no mispredicted branch. That is about 2.7x
faster than descending one sample at a time with an ``if``. A numba 4- to 16-ary prototype was no
faster than binary, so the simpler binary layout stays.
"""

from __future__ import annotations

from typing import overload

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _set_leaves_and_refresh(
    sums: np.ndarray, mins: np.ndarray, tree_size: int, leaves: np.ndarray, values: np.ndarray
) -> np.ndarray:
    """
    Write ``values`` into ``leaves`` (in order, so the last write of a duplicate wins), then recompute
    every ancestor from its two children, one level at a time for the whole batch.

    :return: the value each write replaced (for a repeated leaf, what the previous write left)
    """
    batch = leaves.shape[0]
    nodes = np.empty(batch, dtype=np.int64)
    previous = np.empty(batch, dtype=np.float64)
    for n in range(batch):
        node = leaves[n] + tree_size
        value = values[n]
        previous[n] = sums[node]
        sums[node] = value
        mins[node] = value if value > 0.0 else np.inf
        nodes[n] = node >> 1
    # All leaves sit at the same depth, so after k rounds every entry of `nodes` is k levels up.
    while batch > 0 and nodes[0] >= 1:
        for n in range(batch):
            node = nodes[n]
            left = 2 * node
            sums[node] = sums[left] + sums[left + 1]
            mins[node] = min(mins[left], mins[left + 1])
            nodes[n] = node >> 1
    return previous


@numba.njit(cache=True, nogil=True)
def _find_leaves(sums: np.ndarray, tree_size: int, prefix_sums: np.ndarray) -> np.ndarray:
    """
    For each prefix sum, the leaf where the running sum of leaves crosses it.

    Goes right only into a subtree of positive sum, so that float rounding (a prefix sum at or above
    the total, or a right subtree whose stored sum is a hair below what is left of the prefix) can
    never land on a zero-priority leaf.
    """
    batch = prefix_sums.shape[0]
    remaining = prefix_sums.copy()
    nodes = np.ones(batch, dtype=np.int64)
    while nodes[0] < tree_size:
        for n in range(batch):
            left = 2 * nodes[n]
            left_sum = sums[left]
            # Branch-free on purpose: which way a descent goes is a coin flip the CPU cannot predict.
            go_right = (remaining[n] >= left_sum) & (sums[left + 1] > 0.0)
            remaining[n] -= left_sum * go_right
            nodes[n] = left + go_right
    return nodes - tree_size


class SumTree:
    """
    Binary sum tree and min tree over ``capacity`` non-negative float64 priorities.

    All operations are batched (no Python loop over the batch). Parents are always recomputed
    from their children, never adjusted by accumulated deltas, so the root cannot drift from the sum
    of the leaves however many updates are made.

    :param capacity: Number of leaves (any positive integer, not only powers of two)
    """

    def __init__(self, capacity: int) -> None:
        if int(capacity) != capacity or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.capacity = int(capacity)
        tree_size = 1
        while tree_size < self.capacity:
            tree_size *= 2
        self.tree_size = tree_size
        # Node sums, and the minimum non-zero leaf below each node (inf if none), in two arrays indexed alike.
        self._sums = np.zeros(2 * tree_size, dtype=np.float64)
        self._mins = np.full(2 * tree_size, np.inf, dtype=np.float64)

    @property
    def total(self) -> float:
        """Sum of all leaf priorities."""
        return float(self._sums[1])

    @property
    def min(self) -> float:
        """Smallest non-zero leaf priority (``inf`` while every leaf is zero)."""
        return float(self._mins[1])

    @overload
    def __getitem__(self, leaf_indices: int) -> float: ...

    @overload
    def __getitem__(self, leaf_indices: np.ndarray) -> np.ndarray: ...

    def __getitem__(self, leaf_indices: np.ndarray | int) -> np.ndarray | float:
        """Priorities of the given leaves: one for a leaf, an array shaped like an array of them."""
        return self._sums[self.tree_size + np.asarray(leaf_indices, dtype=np.int64)]

    def update(self, leaf_indices: np.ndarray, priorities: np.ndarray, validate: bool = True) -> np.ndarray:
        """
        Set the priority of each leaf in ``leaf_indices``.

        Within one batch a leaf that appears several times takes the *last* priority given for it.
        Bad input raises ``ValueError`` before anything is written, so the tree is left unchanged.

        :param leaf_indices: 1-D integer array of leaves in ``[0, capacity)``
        :param priorities: 1-D array of finite, non-negative priorities, one per index
        :param validate: check the input first; ``False`` is for callers that have already checked
            it (an invalid index then corrupts memory), to spare the cost on the hot path
        :return: the priority each write replaced, in order (for a leaf repeated in the batch, what its
            previous write left), so that callers can keep sums over groups of leaves in step
        """
        values = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
        if not validate:
            leaves = np.ascontiguousarray(leaf_indices, dtype=np.int64).reshape(-1)
            return _set_leaves_and_refresh(self._sums, self._mins, self.tree_size, leaves, values)
        leaves = self._checked_leaf_indices(leaf_indices)
        if values.shape[0] != leaves.shape[0]:
            raise ValueError(
                f"priorities has {values.shape[0]} values but leaf_indices has {leaves.shape[0]}: they must match"
            )
        if values.shape[0] == 0:
            return np.empty(0, dtype=np.float64)
        if not np.isfinite(values).all():
            bad = values[~np.isfinite(values)][0]
            raise ValueError(f"priorities must be finite, got {bad}")
        if values.min() < 0.0:
            raise ValueError(f"priorities must be non-negative, got {values.min()}")
        return _set_leaves_and_refresh(self._sums, self._mins, self.tree_size, leaves, values)

    def scale(self, factor: float) -> None:
        """
        Multiply every priority by ``factor`` (> 0), in O(capacity). With a power of two, and no value
        leaving float64's normal range, every node still equals the sum of its children bit for bit.
        """
        if not (np.isfinite(factor) and factor > 0.0):
            raise ValueError(f"factor must be a finite number > 0, got {factor!r}")
        self._sums *= factor
        self._mins *= factor

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        """
        Leaves found by descending the tree with each prefix sum: leaf ``j`` is returned for a prefix
        sum in ``[sum(leaves[:j]), sum(leaves[:j+1]))``, so a uniform prefix sum in ``[0, total)``
        picks leaves with probability proportional to their priority.

        Never returns a zero-priority leaf: a prefix sum at or above ``total`` returns the last
        leaf with a positive priority.

        :param prefix_sums: 1-D array of finite, non-negative prefix sums
        :return: int64 array of leaf indices, one per prefix sum
        """
        values = np.ascontiguousarray(prefix_sums, dtype=np.float64).reshape(-1)
        if self.total <= 0.0:
            raise ValueError("cannot find leaves in a tree whose priorities are all zero")
        if values.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        if not np.isfinite(values).all() or values.min() < 0.0:
            raise ValueError(f"prefix_sums must be finite and non-negative, got min {values.min()}")
        return _find_leaves(self._sums, self.tree_size, values)

    def _checked_leaf_indices(self, leaf_indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(leaf_indices)
        if indices.size and not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"leaf_indices must be integers, got dtype {indices.dtype}")
        indices = np.ascontiguousarray(indices, dtype=np.int64).reshape(-1)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            bad = indices[(indices < 0) | (indices >= self.capacity)][0]
            raise ValueError(f"leaf index {bad} is out of range [0, {self.capacity})")
        return indices
