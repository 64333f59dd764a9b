"""
Benchmark behind ``RankHeap``'s default re-sort interval (see sb3_per/rank_heap.py): on a filled heap,
the cost of one ``sample`` + ``update`` cycle (the sampled leaves get new random priorities) and of a
full ``sort()``, the amortised share of the sort for a few intervals, and how far the heap-position
distribution drifts from the exact-rank one as cycles pass after a sort (total variation distance).

    python scripts/bench_rank_heap.py [--capacity 1000000] [--batch 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sb3_per.rank_heap import DEFAULT_RESORT_INTERVAL, RankHeap


def best_of(fn, repeats: int) -> float:
    """Best wall time of ``repeats`` calls, in seconds."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def drift_after_sort(capacity: int, batch: int, alpha: float, checkpoints: tuple[int, ...]) -> list[float]:
    """Total variation between P(heap position + 1) and P(exact rank) over the leaves, ``c`` cycles after a sort."""
    rng = np.random.default_rng(1)
    heap = RankHeap(capacity, alpha, resort_interval=10**12)
    heap.update(np.arange(capacity), rng.random(capacity))
    heap.sort()
    probability = np.arange(1, capacity + 1, dtype=np.float64) ** -alpha
    probability /= probability.sum()
    distances, done = [], 0
    for checkpoint in checkpoints:
        for _ in range(checkpoint - done):
            heap.update(heap.sample(rng.random(batch)), rng.random(batch), validate=False)
        done = checkpoint
        exact_rank = np.empty(capacity, dtype=np.int64)  # by heap position
        exact_rank[np.argsort(-heap._heap["priority"][:capacity], kind="stable")] = np.arange(capacity)
        distances.append(0.5 * float(np.abs(probability - probability[exact_rank]).sum()))
    return distances


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--alpha", type=float, default=0.7)
    parser.add_argument("--cycles", type=int, default=20_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    capacity, batch = args.capacity, args.batch

    heap = RankHeap(capacity, args.alpha, resort_interval=10**12)  # no automatic sort while timing
    heap.update(np.arange(capacity), rng.random(capacity))
    heap.sort()
    uniforms = rng.random((args.cycles, batch))
    priorities = rng.random((args.cycles, batch))

    # Warm up the numba kernels, then time the cycle in chunks and keep the fastest chunk (the machine's
    # cores are shared, so the fastest chunk is the closest to the cost without interference).
    heap.update(heap.sample(uniforms[0]), priorities[0])
    chunk = max(1, args.cycles // 20)

    def per_cycle(body) -> float:
        best = np.inf
        for first in range(0, args.cycles - chunk + 1, chunk):
            start = time.perf_counter()
            for c in range(first, first + chunk):
                body(c)
            best = min(best, (time.perf_counter() - start) / chunk)
        return best

    timings = {
        validate: per_cycle(lambda c, v=validate: heap.update(heap.sample(uniforms[c]), priorities[c], validate=v))
        for validate in (True, False)
    }
    sample_only = per_cycle(lambda c: heap.sample(uniforms[c]))

    # The automatic re-sort's case: a sort after many updates since the last one (best of 3 rounds).
    sort_after_updates = np.inf
    for _ in range(3):
        for c in range(args.cycles // 2):
            heap.update(heap.sample(uniforms[c]), priorities[c], validate=False)
        sort_after_updates = min(sort_after_updates, best_of(heap.sort, 1))
    sort_sorted = best_of(heap.sort, 3)
    # The first sort of a heap also allocates (and page-faults) its scratch arrays: a one-off cost.
    random_heap = RankHeap(capacity, args.alpha, resort_interval=10**12)
    random_heap.update(rng.permutation(capacity), rng.random(capacity))
    first_sort = best_of(random_heap.sort, 1)

    cycle = timings[True]
    print(f"capacity {capacity}, batch {batch}, alpha {args.alpha}")
    print(f"sample alone:                       {sample_only * 1e6:8.1f} us")
    print(f"sample + update (validate=True):    {timings[True] * 1e6:8.1f} us")
    print(f"sample + update (validate=False):   {timings[False] * 1e6:8.1f} us")
    print(f"sort() after {args.cycles // 2} cycles:        {sort_after_updates * 1e3:8.1f} ms")
    print(f"sort() of an already sorted heap:   {sort_sorted * 1e3:8.1f} ms")
    print(f"first sort() of a new random heap:  {first_sort * 1e3:8.1f} ms")
    sort_cost = sort_after_updates
    for interval in (1_000, 3_000, DEFAULT_RESORT_INTERVAL, 30_000):
        amortised = sort_cost / interval
        print(
            f"resort every {interval:>6} updates: +{amortised * 1e6:6.1f} us per update "
            f"({100 * amortised / cycle:4.1f}% of a cycle)"
        )
    checkpoints = (100, 1_000, 3_000, 10_000)
    distances = drift_after_sort(capacity, batch, args.alpha, checkpoints)
    print("total variation from exact ranks, cycles after a sort: ", end="")
    print(", ".join(f"{c}: {d:.3f}" for c, d in zip(checkpoints, distances, strict=True)))


if __name__ == "__main__":
    main()
