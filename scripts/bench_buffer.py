"""
Benchmark: the cost of prioritized replay next to SB3's uniform replay, side by side in one process.

Buffer cycle: on a full buffer (obs dim 8, action dim 1), one prioritized cycle is
``sample(256)`` (with IS weights) + ``update_priorities(256)``, for proportional and for rank-based
prioritization, for proportional with recency-faded priorities (``priority_half_life``), and, with the
inverse tree on (``inverse_sampling=True``), ``sample(256)`` + ``sample(256, inverse=True)`` + the update
(LA3P's critic and actor batches); the floor is SB3's uniform ``ReplayBuffer.sample(256)``. All are timed
interleaved, repetition by repetition, so machine noise hits them alike; the script prints medians and their
ratios to the uniform sample.

    python scripts/bench_buffer.py                    # 1e5 and 1e6 transitions
    python scripts/bench_buffer.py --sizes 100000 --repeats 2000
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer

from sb3_per import PrioritizedReplayBuffer

OBS_SPACE = spaces.Box(-np.inf, np.inf, (8,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def filled_buffer(buffer_class: type[ReplayBuffer], size: int, seed: int = 0, **kwargs: Any) -> ReplayBuffer:
    """A buffer of ``buffer_class`` holding ``size`` random transitions, written straight into its arrays."""
    buffer = buffer_class(size, OBS_SPACE, ACTION_SPACE, device="cpu", **kwargs)
    rng = np.random.default_rng(seed)
    buffer.observations[:] = rng.standard_normal(buffer.observations.shape, dtype=np.float32)
    buffer.next_observations[:] = rng.standard_normal(buffer.next_observations.shape, dtype=np.float32)
    buffer.actions[:] = rng.uniform(-1, 1, buffer.actions.shape).astype(np.float32)
    buffer.rewards[:] = rng.standard_normal(buffer.rewards.shape, dtype=np.float32)
    buffer.full = True
    if isinstance(buffer, PrioritizedReplayBuffer):
        # Spread-out priorities, as after training, rather than all at the entry priority.
        buffer.update_priorities(np.arange(size), rng.exponential(1.0, size))
    return buffer


# Name -> (buffer parameters, whether the cycle also draws an inverse batch)
PRIORITIZED_CYCLES: dict[str, tuple[dict[str, Any], bool]] = {
    "proportional": ({}, False),
    "rank": ({"prioritization": "rank"}, False),
    "faded": ({"priority_half_life": 100_000.0}, False),
    "inverse": ({"inverse_sampling": True}, True),
}


def time_buffer_cycles(size: int, batch_size: int, repeats: int) -> dict[str, float]:
    """Median seconds of a uniform sample and of each prioritized cycle of ``PRIORITIZED_CYCLES``, timed interleaved."""
    uniform = filled_buffer(ReplayBuffer, size)
    prioritized = {
        name: filled_buffer(PrioritizedReplayBuffer, size, **kwargs) for name, (kwargs, _) in PRIORITIZED_CYCLES.items()
    }
    rng = np.random.default_rng(1)
    td_errors = th.as_tensor(rng.standard_normal((repeats + 10, batch_size, 1), dtype=np.float32))
    times: dict[str, list[float]] = {"uniform": [], **{name: [] for name in prioritized}}
    for i in range(repeats + 10):  # the first 10 warm up numba and caches, and are dropped
        start = time.perf_counter()
        uniform.sample(batch_size)
        ends = {"uniform": time.perf_counter()}
        for name, buffer in prioritized.items():
            samples = buffer.sample(batch_size)
            if PRIORITIZED_CYCLES[name][1]:
                buffer.sample(batch_size, inverse=True)
            buffer.update_priorities(samples.indices, td_errors[i], samples.stamps)
            ends[name] = time.perf_counter()
        if i >= 10:
            for name, end in ends.items():
                times[name].append(end - start)
                start = end
    return {name: float(np.median(values)) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="buffer sizes")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3000, help="timed cycles per size")
    args = parser.parse_args()
    th.set_num_threads(1)

    print(f"buffer cycle, batch {args.batch_size}, median of {args.repeats} interleaved repeats")
    print("cycles: sample + update; 'inverse' also draws an inverse batch; 'faded' has priority_half_life=1e5")
    headers = ["uniform sample", *PRIORITIZED_CYCLES]
    print(f"{'size':>10} " + " ".join(f"{header:>20}" for header in headers))
    for size in args.sizes:
        medians = time_buffer_cycles(size, args.batch_size, args.repeats)
        cells = [f"{medians['uniform'] * 1e6:>17.1f} us"]
        for name in PRIORITIZED_CYCLES:
            cells.append(f"{medians[name] * 1e6:>9.1f} us ({medians[name] / medians['uniform']:.2f}x)")
        print(f"{size:>10} " + " ".join(cells))


if __name__ == "__main__":
    main()
