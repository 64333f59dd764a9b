"""
A binary max-heap of priorities for rank-based prioritized sampling (Schaul et al. 2016, section 3.3).

Pure data structure: numpy arrays and numba kernels, no Stable-Baselines3 import.

Rank-based prioritization samples the transition of rank ``r`` (rank 1 = largest priority) with
probability ``P(r) = r**-alpha / sum_{j=1..n} j**-alpha``. Keeping the ranks exact would need a sorted
container; as in the paper, the heap *array* stands in for the sorted order instead: the leaf at heap
position ``p`` is given rank ``p + 1``. A max-heap keeps large priorities near the front, so that is a
fair approximation, and a full re-sort every ``resort_interval`` updates (a sorted array is itself a
valid heap) resets it to exact.

Layout: ``_heap[p]`` holds the priority and the leaf at heap position ``p`` side by side (children of
``p``: ``2p + 1`` and ``2p + 2``), so a sift step finds the leaf it moves in the cache line its
comparison loaded; ``_position[leaf]`` is the inverse map (``-1`` for a leaf not in the heap). Each
write moves one entry along one root-to-leaf path and leaves an exact heap behind it: there is no
accumulated state that could drift over millions of updates.

Sampling is stratified: the cumulative sums ``sum_{j<=r} j**-alpha`` are computed once for
``r = 1..capacity`` (compensated summation) and searched, for all ``k`` thresholds at once, by a numba
kernel that returns exactly what ``np.searchsorted(cumsum[:size], thresholds, side="right")`` would,
about 4x faster at 1e6 ranks (see ``_sample_kernel``).

Default re-sort interval, measured by ``python scripts/bench_rank_heap.py`` (capacity 1e6 filled, batch
256, alpha 0.7, 2 shared cores): ``sample`` ~32 us, ``sample`` + ``update`` ~115 us (~103 us with
``validate=False``), ``sort()`` ~60 ms (~85 ms the first time, which allocates its scratch arrays; an
argsort-based sort took ~105 ms). Re-sorting every 10 000 update calls thus adds ~6 us, ~5%, per
cycle; every 1 000 it would add ~50%. Sorting more often buys little: with random priorities the
distribution over heap positions drifts from the exact-rank one (total variation 0.10 after 100 cycles)
and plateaus at ~0.16 within ~1 000 cycles, so only an interval of a few hundred updates, costing more
than the cycles themselves, would keep it noticeably closer.
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: ``update`` calls between automatic re-sorts when ``resort_interval`` is None: the amortised sort is
#: then ~5% of a ``sample`` + ``update`` cycle at capacity 1e6, batch 256 (measurements in the docstring).
DEFAULT_RESORT_INTERVAL = 10_000

#: One heap slot: the priority at that position and the leaf that holds it.
_HEAP_ENTRY = np.dtype([("priority", np.float64), ("leaf", np.int64)])


@numba.njit(cache=True, nogil=True)
def _first_leaf_out_of_range(leaves: np.ndarray, capacity: int) -> int:
    """Index of the first leaf outside ``[0, capacity)``, -1 if none (one pass instead of numpy's several)."""
    for n in range(leaves.shape[0]):
        if leaves[n] < 0 or leaves[n] >= capacity:
            return n
    return -1


@numba.njit(cache=True, nogil=True)
def _first_invalid_priority(priorities: np.ndarray) -> int:
    """Index of the first priority that is NaN, infinite or negative, -1 if none."""
    for n in range(priorities.shape[0]):
        if not (0.0 <= priorities[n] < np.inf):
            return n
    return -1


@numba.njit(cache=True, nogil=True)
def _update_kernel(
    heap: np.ndarray, position: np.ndarray, size: int, leaves: np.ndarray, priorities: np.ndarray
) -> int:
    """
    Write each ``(leaf, priority)`` in order (so the last write of a duplicate wins), inserting absent
    leaves at the end of the heap, and restore the heap property after each write. Returns the new size.

    The entry being placed is carried as a "hole": entries it passes are shifted one step, and it is
    written once, where it stops.

    Sift-up stops only below a parent of *strictly* larger priority, i.e. it passes parents of equal
    priority: a leaf written at a priority >= every stored one (PER's new transitions, at the maximum
    priority seen so far) always ends at position 0, rank 1. Sift-down stops as soon as no child is
    strictly larger, so equal priorities are not shuffled for nothing.
    """
    for n in range(leaves.shape[0]):
        leaf = leaves[n]
        priority = priorities[n]
        i = position[leaf]
        if i < 0:
            i = size
            size += 1
            go_up = True
        else:
            go_up = priority >= heap[i].priority
        if go_up:
            while i > 0:
                parent = (i - 1) >> 1
                if heap[parent].priority > priority:
                    break
                moved = heap[parent].leaf
                heap[i].priority = heap[parent].priority
                heap[i].leaf = moved
                position[moved] = i
                i = parent
        else:
            while True:
                child = 2 * i + 1
                if child >= size:
                    break
                if child + 1 < size and heap[child + 1].priority > heap[child].priority:
                    child += 1
                if heap[child].priority <= priority:
                    break
                moved = heap[child].leaf
                heap[i].priority = heap[child].priority
                heap[i].leaf = moved
                position[moved] = i
                i = child
        heap[i].priority = priority
        heap[i].leaf = leaf
        position[leaf] = i
    return size


@numba.njit(cache=True, nogil=True)
def _sample_kernel(heap: np.ndarray, rank_cumsum: np.ndarray, size: int, uniforms: np.ndarray, out: np.ndarray) -> bool:
    """
    Stratified ranks by inverse CDF, written as leaves into ``out``; False (``out`` unspecified) if a
    uniform is outside ``[0, 1)``.

    The search is ``np.searchsorted(rank_cumsum[:size], thresholds, side="right")`` clipped to
    ``size - 1``, but run level by level over the whole batch and branch-free: the batch's loads at one
    level are independent, so their cache misses overlap (about 4x faster than ``np.searchsorted`` at
    1e6 ranks, whose per-query binary search waits on each miss in turn).
    """
    k = uniforms.shape[0]
    scale = rank_cumsum[size - 1] / k
    thresholds = np.empty(k, dtype=np.float64)
    base = np.zeros(k, dtype=np.int64)
    for i in range(k):
        u = uniforms[i]
        if not (u >= 0.0 and u < 1.0):  # also catches NaN
            return False
        thresholds[i] = (i + u) * scale
    # Invariant: every index below base has cumsum <= threshold, so the answer (the first index whose
    # cumsum exceeds the threshold) lies in [base, base + length].
    length = size
    while length > 1:
        half = length >> 1
        for i in range(k):
            base[i] += (rank_cumsum[base[i] + half - 1] <= thresholds[i]) * half
        length -= half
    for i in range(k):
        index = min(base[i] + (rank_cumsum[base[i]] <= thresholds[i]), size - 1)
        out[i] = heap[index].leaf
    return True


@numba.njit(cache=True, nogil=True)
def _fill_sort_keys(heap: np.ndarray, keys: np.ndarray, keys_as_float: np.ndarray, position_bits: int) -> None:
    """
    ``keys[j]``: the bit pattern of the priority at position ``j`` with its low ``position_bits`` bits
    replaced by ``j``. ``keys_as_float`` is ``keys`` viewed as float64. ``+ 0.0`` turns -0.0 (whose sign
    bit would sort it above everything) into 0.0.
    """
    n = keys.shape[0]
    for j in range(n):
        keys_as_float[j] = heap[j].priority + 0.0
    high_mask = ~np.uint64((1 << position_bits) - 1)
    for j in range(n):
        keys[j] = (keys[j] & high_mask) | np.uint64(j)


@numba.njit(cache=True, nogil=True)
def _rebuild_from_sorted_keys(
    heap: np.ndarray, position: np.ndarray, keys: np.ndarray, old_heap: np.ndarray, position_bits: int
) -> None:
    """
    Write into ``heap`` the entries of ``old_heap`` (the heap before the sort, a different array) in
    descending priority, from ``keys`` sorted ascending: each key is a priority's bit pattern with its
    low ``position_bits`` bits replaced by the entry's position in ``old_heap`` (see ``RankHeap.sort``).

    The truncation can misorder priorities that differ only in those low bits; they share the key's high
    bits, so each such run is checked and, if out of order, sorted by its full priorities.
    """
    n = keys.shape[0]
    position_mask = np.uint64((1 << position_bits) - 1)
    shift = np.uint64(position_bits)
    for j in range(n):
        old = np.int64(keys[n - 1 - j] & position_mask)
        heap[j].priority = old_heap[old].priority
        heap[j].leaf = old_heap[old].leaf
    start = 0
    while start < n:
        end = start + 1
        high = keys[n - 1 - start] >> shift
        while end < n and (keys[n - 1 - end] >> shift) == high:
            end += 1
        if end - start > 1:
            in_order = True
            for j in range(start + 1, end):
                if heap[j].priority > heap[j - 1].priority:
                    in_order = False
                    break
            if not in_order:
                run_priority = np.empty(end - start, dtype=np.float64)
                run_leaf = np.empty(end - start, dtype=np.int64)
                for j in range(start, end):
                    run_priority[j - start] = heap[j].priority
                    run_leaf[j - start] = heap[j].leaf
                order = np.argsort(-run_priority)
                for j in range(start, end):
                    heap[j].priority = run_priority[order[j - start]]
                    heap[j].leaf = run_leaf[order[j - start]]
        start = end
    # A separate pass: a store whose address waits on the gather's cache misses, inside the loop above,
    # made that loop ~5x slower.
    for j in range(n):
        position[heap[j].leaf] = j


@numba.njit(cache=True, nogil=True)
def _rank_weights_and_cumsum(capacity: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``w[r - 1] = r**-alpha`` and their running sums, summed with Kahan compensation."""
    weights = np.empty(capacity, dtype=np.float64)
    cumsum = np.empty(capacity, dtype=np.float64)
    total = 0.0
    compensation = 0.0
    for j in range(capacity):
        w = (j + 1.0) ** -alpha
        weights[j] = w
        y = w - compensation
        t = total + y
        compensation = (t - total) - y
        total = t
        cumsum[j] = total
    return weights, cumsum


def _positive_integer(value: int, name: str) -> int:
    """``value`` as an int if it is a positive whole number (``1e6`` included, ``True`` not), else ValueError."""
    try:
        whole = int(value)
        ok = not isinstance(value, (bool, np.bool_)) and whole == value and whole >= 1
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return whole


class RankHeap:
    """
    Binary max-heap over at most ``capacity`` leaves (ids ``0..capacity-1``, chosen by the caller), for
    rank-based prioritized sampling with ``P(rank) ∝ rank**-alpha``, rank = heap position + 1.

    All batch operations are vectorised or run in one numba call; there is no Python loop over a batch.

    :param capacity: Maximum number of leaves (any positive integer)
    :param alpha: Prioritization exponent, finite and >= 0 (0 samples every stored leaf uniformly)
    :param resort_interval: Number of ``update`` calls (of any batch size, inserts included) between
        automatic full re-sorts of the heap array; None for ``DEFAULT_RESORT_INTERVAL`` (10 000, chosen by
        measurement so the amortised re-sort is ~5% of a ``sample`` + ``update`` cycle at capacity 1e6,
        batch 256; see the module docstring). A manual ``sort()`` restarts the count.
    """

    def __init__(self, capacity: int, alpha: float, resort_interval: int | None = None) -> None:
        capacity = _positive_integer(capacity, "capacity")
        try:
            alpha_value = float(alpha)
        except (TypeError, ValueError):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}") from None
        if not math.isfinite(alpha_value) or alpha_value < 0.0:
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
        if resort_interval is None:
            resort_interval = DEFAULT_RESORT_INTERVAL
        self.capacity = capacity
        self.alpha = alpha_value
        self.resort_interval = _positive_integer(resort_interval, "resort_interval")
        self.size = 0
        self._updates_since_sort = 0
        # Priority and leaf side by side, so that a sift step finds the leaf it moves in the cache line
        # that its priority comparison already loaded.
        self._heap = np.zeros(self.capacity, dtype=_HEAP_ENTRY)
        self._position = np.full(self.capacity, -1, dtype=np.int64)
        # _rank_weight[r - 1] = r**-alpha; _rank_cumsum[r - 1] = sum of the first r weights.
        self._rank_weight, self._rank_cumsum = _rank_weights_and_cumsum(self.capacity, self.alpha)
        # For sort(): the bits of a heap position in a sort key, and scratch arrays allocated on first use.
        self._position_bits = max(1, (self.capacity - 1).bit_length())
        self._spare_heap: np.ndarray | None = None
        self._sort_keys: np.ndarray | None = None

    def update(self, leaves: np.ndarray, priorities: np.ndarray, validate: bool = True) -> None:
        """
        Set the priority of each leaf, inserting the leaves not yet in the heap, and restore the heap
        property (O(log n) per leaf). Counts as one update towards the automatic re-sort.

        Writes are applied in order, so within one batch a leaf that appears several times takes the
        *last* priority given for it. A leaf written at a priority >= every stored priority ends at
        position 0 (rank 1), ties included. Bad input raises ``ValueError`` before anything is written.

        :param leaves: Integer array of leaf ids in ``[0, capacity)`` (flattened)
        :param priorities: Finite, non-negative priorities, as many as ``leaves`` (flattened)
        :param validate: Check the input first; ``False`` is for callers that have already checked it
            (an out-of-range leaf then corrupts memory, a NaN priority the heap order)
        """
        values = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
        if validate:
            ids = self._checked_leaves(leaves)
            if values.shape[0] != ids.shape[0]:
                raise ValueError(
                    f"priorities has {values.shape[0]} values but leaves has {ids.shape[0]}: they must match"
                )
            bad = _first_invalid_priority(values)
            if bad >= 0:
                kind = "finite" if not np.isfinite(values[bad]) else "non-negative"
                raise ValueError(f"priorities must be {kind}, got {values[bad]}")
        else:
            ids = np.ascontiguousarray(leaves, dtype=np.int64).reshape(-1)
        if ids.shape[0]:
            self.size = int(_update_kernel(self._heap, self._position, self.size, ids, values))
        self._updates_since_sort += 1
        if self._updates_since_sort >= self.resort_interval:
            self.sort()

    def sample(self, uniforms: np.ndarray) -> np.ndarray:
        """
        Stratified sampling of ``k = len(uniforms)`` leaves by rank.

        The rank distribution over the current size ``n`` is cut into ``k`` segments of equal mass;
        segment ``i`` takes the smallest rank ``r`` with ``CDF(r) > (i + uniforms[i]) / k`` (clipped to
        ``[1, n]``), and the leaf at heap position ``r - 1`` is returned. With uniform ``uniforms`` each
        slot is drawn from its segment, and over the batch a rank is drawn ``k * P(r)`` times on average.

        :param uniforms: 1-D array of numbers in ``[0, 1)``, one per sample
        :return: int64 array of leaf ids, one per uniform, in segment order (ranks non-decreasing)
        """
        if self.size == 0:
            raise ValueError("cannot sample from an empty RankHeap")
        u = np.ascontiguousarray(uniforms, dtype=np.float64).reshape(-1)
        k = u.shape[0]
        if k == 0:
            return np.empty(0, dtype=np.int64)
        out = np.empty(k, dtype=np.int64)
        if not _sample_kernel(self._heap, self._rank_cumsum, self.size, u, out):
            raise ValueError(f"uniforms must lie in [0, 1), got min {u.min()}, max {u.max()}")
        return out

    def probabilities(self, leaves: np.ndarray) -> np.ndarray:
        """
        Sampling probability ``P(rank(leaf)) = rank**-alpha / sum_{j=1..n} j**-alpha`` of each leaf under
        the current size ``n``, rank = heap position + 1: the mass ``sample`` gives that position, from the
        same precomputed sums, so importance weights computed from it are consistent with the sampling.

        :param leaves: Integer array of leaf ids currently in the heap
        :return: float64 array, one probability per leaf
        """
        ids = self._checked_leaves(leaves)
        positions = self._position[ids]
        if ids.shape[0] and positions.min() < 0:
            raise ValueError(f"leaf {ids[positions < 0][0]} is not in the heap")
        return self._rank_weight[positions] / self._rank_cumsum[self.size - 1]

    @property
    def min_probability(self) -> float:
        """``P(n)``, the smallest sampling probability of any stored leaf (n = ``size``)."""
        if self.size == 0:
            raise ValueError("min_probability of an empty RankHeap is undefined")
        return float(self._rank_weight[self.size - 1] / self._rank_cumsum[self.size - 1])

    def __getitem__(self, leaves: np.ndarray | int) -> np.ndarray:
        """Stored priorities of the given leaves, shaped like ``leaves`` (0.0 for a leaf not in the heap)."""
        positions = self.position(leaves)
        return np.where(positions >= 0, self._heap["priority"][positions], 0.0)

    def position(self, leaves: np.ndarray | int) -> np.ndarray:
        """Heap positions (0-based; rank - 1) of the given leaves, shaped like ``leaves``; -1 if absent."""
        return self._position[self._checked_leaves(leaves).reshape(np.shape(leaves))]

    def sort(self) -> None:
        """
        Sort the heap array by descending priority (ties in any order), which is still a valid heap, so
        that heap position + 1 is the exact rank. Restarts the count towards the automatic re-sort.
        """
        self._updates_since_sort = 0
        n = self.size
        if n < 2:
            return
        # Sort 64-bit keys, not an argsort of the priorities: numpy's (SIMD) sort of plain integers is ~3x
        # faster than its argsort of floats. A non-negative float's bit pattern orders like its value, so
        # the key is the priority's bits with the lowest ``_position_bits`` replaced by the entry's current
        # position; the rebuild then repairs the order among priorities equal up to those bits (relative
        # difference < 2**-32 at capacity 1e6). The rebuild writes into a second heap array, then the two
        # swap; both scratch arrays are kept, so later sorts neither copy nor page-fault fresh memory.
        if self._spare_heap is None or self._sort_keys is None:  # allocated together
            self._spare_heap = np.zeros_like(self._heap)
            self._sort_keys = np.empty(self.capacity, dtype=np.uint64)
        keys = self._sort_keys[:n]
        _fill_sort_keys(self._heap, keys, keys.view(np.float64), self._position_bits)
        keys.sort()
        _rebuild_from_sorted_keys(self._spare_heap, self._position, keys, self._heap, self._position_bits)
        self._heap, self._spare_heap = self._spare_heap, self._heap

    def __getstate__(self) -> dict:
        # Leave out what is rebuilt from capacity and alpha, and sort()'s scratch space: a pickled buffer
        # (save_replay_buffer) then carries 24 bytes per leaf, not 64.
        state = self.__dict__.copy()
        for name in ("_rank_weight", "_rank_cumsum", "_spare_heap", "_sort_keys"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._rank_weight, self._rank_cumsum = _rank_weights_and_cumsum(self.capacity, self.alpha)
        self._spare_heap = self._sort_keys = None

    def clear(self) -> None:
        """Remove every leaf (size 0) and restart the count towards the automatic re-sort."""
        self._position[self._heap["leaf"][: self.size]] = -1
        self.size = 0
        self._updates_since_sort = 0

    def _checked_leaves(self, leaves: np.ndarray | int) -> np.ndarray:
        ids = np.asarray(leaves)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"leaves must be integers, got dtype {ids.dtype}")
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        bad = _first_leaf_out_of_range(ids, self.capacity)
        if bad >= 0:
            raise ValueError(f"leaf {ids[bad]} is out of range [0, {self.capacity})")
        return ids
