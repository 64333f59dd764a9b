"""
Benchmark: the cost of prioritized replay next to SB3's uniform replay, side by side in one process.

Buffer cycle: on a full buffer (obs dim 8, action dim 1), one prioritized cycle is
``sample(256)`` (with IS weights) + ``update_priorities(256)``; the floor is SB3's uniform
``ReplayBuffer.sample(256)``. The two are timed interleaved, repetition by repetition, so machine
noise hits both alike; the script prints medians and their ratio.

    python scripts/bench_buffer.py                    # 1e5 and 1e6 transitions
    python scripts/bench_buffer.py --sizes 100000 --repeats 2000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer

from sb3_per import PrioritizedReplayBuffer

OBS_SPACE = spaces.Box(-np.inf, np.inf, (8,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def filled_buffer(buffer_class: type[ReplayBuffer], size: int, seed: int = 0) -> ReplayBuffer:
    """A buffer of ``buffer_class`` holding ``size`` random transitions, written straight into its arrays."""
    buffer = buffer_class(size, OBS_SPACE, ACTION_SPACE, device="cpu")
    rng = np.random.default_rng(seed)
    buffer.observations[:] = rng.standard_normal(buffer.observations.shape, dtype=np.float32)
    buffer.next_observations[:] = rng.standard_normal(buffer.next_observations.shape, dtype=np.float32)
    buffer.actions[:] = rng.uniform(-1, 1, buffer.actions.shape).astype(np.float32)
    buffer.rewards[:] = rng.standard_normal(buffer.rewards.shape, dtype=np.float32)
    buffer.full = True
    if isinstance(buffer, PrioritizedReplayBuffer):
        # Spread-out priorities, as after training, rather than all at the entry priority.
        buffer.tree.update(np.arange(size), rng.exponential(1.0, size) + 1e-3)
    return buffer


def time_buffer_cycles(size: int, batch_size: int, repeats: int) -> dict[str, float]:
    """Median seconds of a uniform sample and of a prioritized sample + update, timed interleaved."""
    uniform = filled_buffer(ReplayBuffer, size)
    prioritized = filled_buffer(PrioritizedReplayBuffer, size)
    assert isinstance(prioritized, PrioritizedReplayBuffer)
    rng = np.random.default_rng(1)
    td_errors = th.as_tensor(rng.standard_normal((repeats + 10, batch_size, 1), dtype=np.float32))
    uniform_times, per_times = [], []
    for i in range(repeats + 10):  # the first 10 warm up numba and caches, and are dropped
        start = time.perf_counter()
        uniform.sample(batch_size)
        middle = time.perf_counter()
        samples = prioritized.sample(batch_size)
        prioritized.update_priorities(samples.indices, td_errors[i])
        end = time.perf_counter()
        if i >= 10:
            uniform_times.append(middle - start)
            per_times.append(end - middle)
    return {"uniform": float(np.median(uniform_times)), "per": float(np.median(per_times))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="buffer sizes")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3000, help="timed cycles per size")
    args = parser.parse_args()
    th.set_num_threads(1)

    print(f"buffer cycle, batch {args.batch_size}, median of {args.repeats} interleaved repeats")
    print(f"{'size':>10} {'uniform sample':>16} {'PER sample+update':>19} {'ratio':>7}")
    for size in args.sizes:
        medians = time_buffer_cycles(size, args.batch_size, args.repeats)
        ratio = medians["per"] / medians["uniform"]
        print(f"{size:>10} {medians['uniform'] * 1e6:>13.1f} us {medians['per'] * 1e6:>16.1f} us {ratio:>6.2f}x")


if __name__ == "__main__":
    main()
