"""
Benchmark behind the sum tree's design (see sb3_per/sum_tree.py): ``find(256)`` + ``update(256)``
on a tree of 1e5 and 1e6 leaves, for the layouts that were tried and not kept, next to the shipped
``SumTree``. The alternatives live here only as measurement subjects.

- numpy k-ary (k = 16, 32): one vectorised numpy step per level, the design a pure-numpy tree allows;
- numba binary, one sample at a time: each sample descends the whole tree before the next starts,
  with an ``if`` per level;
- shipped ``SumTree``: numba binary, the whole batch walked level by level, branch-free descent.

    python scripts/bench_tree_layouts.py
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numba
import numpy as np

from sb3_per import SumTree


class NumpyKaryTree:
    """Sum tree with ``k`` children per node, each level a numpy array, operations vectorised per level."""

    def __init__(self, capacity: int, k: int) -> None:
        self.k = k
        n_levels = 1
        while k**n_levels < capacity:
            n_levels += 1
        self.levels = [np.zeros(k**level) for level in range(n_levels + 1)]  # levels[0] is the root

    def update(self, leaves: np.ndarray, values: np.ndarray) -> None:
        self.levels[-1][leaves] = values
        nodes = np.unique(leaves // self.k)
        for depth in range(len(self.levels) - 2, -1, -1):
            children = self.levels[depth + 1].reshape(-1, self.k)
            self.levels[depth][nodes] = children[nodes].sum(axis=1)
            nodes = np.unique(nodes // self.k)

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        remaining, nodes = prefix_sums.copy(), np.zeros(len(prefix_sums), dtype=np.int64)
        rows = np.arange(len(prefix_sums))
        for depth in range(1, len(self.levels)):
            cumulative = np.cumsum(self.levels[depth].reshape(-1, self.k)[nodes], axis=1)
            child = np.minimum((cumulative <= remaining[:, None]).sum(axis=1), self.k - 1)
            remaining -= np.where(child > 0, cumulative[rows, child - 1], 0.0)
            nodes = nodes * self.k + child
        return nodes


@numba.njit(cache=True)
def _find_one_at_a_time(sums: np.ndarray, tree_size: int, prefix_sums: np.ndarray) -> np.ndarray:
    out = np.empty(prefix_sums.shape[0], dtype=np.int64)
    for n in range(prefix_sums.shape[0]):
        remaining, node = prefix_sums[n], 1
        while node < tree_size:
            left = 2 * node
            if remaining >= sums[left] and sums[left + 1] > 0.0:
                remaining -= sums[left]
                node = left + 1
            else:
                node = left
        out[n] = node - tree_size
    return out


@numba.njit(cache=True)
def _update_one_at_a_time(sums: np.ndarray, mins: np.ndarray, tree_size: int, leaves: np.ndarray, values: np.ndarray):
    for n in range(leaves.shape[0]):
        node = leaves[n] + tree_size
        sums[node] = values[n]
        mins[node] = values[n] if values[n] > 0.0 else np.inf
        node //= 2
        while node >= 1:
            sums[node] = sums[2 * node] + sums[2 * node + 1]
            mins[node] = min(mins[2 * node], mins[2 * node + 1])
            node //= 2


class OneAtATimeTree(SumTree):
    """The shipped tree's arrays, walked one sample at a time with branches."""

    def update(self, leaf_indices: np.ndarray, priorities: np.ndarray, validate: bool = True) -> None:
        _update_one_at_a_time(self._sums, self._mins, self.tree_size, leaf_indices, priorities)

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        return _find_one_at_a_time(self._sums, self.tree_size, prefix_sums)


def time_cycles(tree, total: Callable[[], float], repeats: int, batch: int = 256) -> tuple[float, float]:
    """Median seconds of ``find`` and of ``update`` with stratified prefix sums over a full tree."""
    rng = np.random.default_rng(0)
    find_times, update_times = [], []
    for i in range(repeats + 10):
        prefix = (np.arange(batch) + rng.random(batch)) * (total() * (1 - 1e-12) / batch)
        start = time.perf_counter()
        leaves = tree.find(prefix)
        middle = time.perf_counter()
        tree.update(leaves, rng.exponential(1.0, batch) + 1e-3)
        end = time.perf_counter()
        if i >= 10:
            find_times.append(middle - start)
            update_times.append(end - middle)
    return float(np.median(find_times)), float(np.median(update_times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=1000)
    args = parser.parse_args()
    print(f"median over {args.repeats} cycles of find(256) then update(256)")
    print(f"{'leaves':>9} {'layout':<28} {'find':>9} {'update':>9} {'cycle':>9}")
    for size in args.sizes:
        priorities = np.random.default_rng(1).exponential(1.0, size) + 1e-3
        candidates = {}
        for k in (16, 32):
            tree = NumpyKaryTree(size, k)
            tree.levels[-1][:size] = priorities
            for depth in range(len(tree.levels) - 2, -1, -1):
                tree.levels[depth][:] = tree.levels[depth + 1].reshape(-1, k).sum(axis=1)
            candidates[f"numpy {k}-ary, per level"] = (tree, lambda tree=tree: float(tree.levels[0][0]))
        for name, cls in (("numba binary, one at a time", OneAtATimeTree), ("SumTree (shipped)", SumTree)):
            tree = cls(size)
            SumTree.update(tree, np.arange(size), priorities)
            candidates[name] = (tree, lambda tree=tree: tree.total)
        for name, (tree, total) in candidates.items():
            find, update = time_cycles(tree, total, args.repeats)
            cycle = find + update
            print(f"{size:>9} {name:<28} {find * 1e6:>6.1f} us {update * 1e6:>6.1f} us {cycle * 1e6:>6.1f} us")


if __name__ == "__main__":
    main()
